"""Modules end to end: two worker processes pause a module's consumers and resume them; real API processes.

The worker logs when it pauses or resumes a consumer; the tests wait for those
lines (no sleeps) and then watch, for a bounded while, that nothing of the
module's queue is taken.
"""

from __future__ import annotations

import time
import uuid

import httpx

from gatehouse.catalog import NewProduct, Price, ProductPatch
from gatehouse.catalog.bulk import Selection, patch_from_json
from gatehouse.job_types import CATALOG_BULK_OPERATION
from tests.conftest import ADMIN_TOKEN
from tests.support.processes import wait_until
from tests.support.receiver import Receiver

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
PATCH = {"price": {"amount": 777, "currency": "PLN"}}
QUEUE = CATALOG_BULK_OPERATION.queue
WATCH_S = 3  # how long a paused queue is watched for any taker


def products(gh, n: int) -> list[uuid.UUID]:
    for start in range(0, n, 1000):
        gh.catalog_handlers.create_products(
            [
                NewProduct(sku=f"M-{i:05d}", name=f"p{i}", price=Price(100, "PLN"))
                for i in range(start, min(n, start + 1000))
            ]
        )
    return [p.id for p in gh.catalog.list_products(limit=200)] if n <= 200 else []


def queue_bulk(gh, ids) -> uuid.UUID:
    """What the API's POST does, for when its route is off: the row first, then the message (after commit)."""
    op = gh.catalog_handlers.create_bulk_operation(
        Selection(product_ids=tuple(ids)), patch_from_json(PATCH),
        {"productIds": [str(i) for i in ids], "patch": PATCH}, requester=None, actor="admin",
    )  # fmt: skip
    assert op.status == "pending"  # over BULK_SYNC_THRESHOLD (50): its job runs it
    return op.id


def workers(processes, n: int = 2, **env: str) -> list:
    return [
        processes.start(f"worker-{i}", "gatehouse-worker", "--processes", "1", "--threads", "2", env=env)
        for i in range(n)
    ]


def set_module(url: str, name: str, **body: bool) -> dict:
    response = httpx.put(f"{url}/v1/admin/modules/{name}", json=body, headers=ADMIN)
    assert response.status_code == 200, response.text
    return response.json()


def logged(procs, line: str, count: int = 1) -> bool:
    return all(p.log().count(line) >= count for p in procs)


def test_a_disabled_module_pauses_its_consumers_in_every_worker_and_drains_when_enabled(processes, gh, sql):
    # Given an API with 2 gunicorn workers and 2 worker processes, all consuming
    _, url = processes.api(env={"BACKEND_ROLE": "api", "API_WORKERS": "2"})
    procs = workers(processes)
    wait_until(lambda: logged(procs, "Worker process is ready"), timeout=30, what="the workers")
    ids = products(gh, 60)

    # When catalog is disabled
    assert set_module(url, "catalog", enabled=False)["enabled"] is False

    # Then every API process answers its routes MODULE_DISABLED from the next request on (the requests'
    # own time is the client's, so no clock here: a loaded machine slows them, not the switch) …
    answers = [httpx.get(f"{url}/v1/admin/catalog/products", headers=ADMIN) for _ in range(8)]
    assert all(a.status_code == 409 and a.json()["code"] == "MODULE_DISABLED" for a in answers)
    assert all(a.json()["module"] == "catalog" for a in answers)
    # … and both workers pause the catalog consumer
    paused = "queue catalog.bulk-operation is held (module catalog is off): its consumer is paused"
    wait_until(lambda: logged(procs, paused), timeout=10, what="both workers to pause catalog")

    # And a bulk operation queued meanwhile stays pending: nobody takes it, its message waits in Redis
    op_id = queue_bulk(gh, ids)
    watch_until = time.monotonic() + WATCH_S
    while time.monotonic() < watch_until:
        [(state, claims)] = sql("SELECT state, claims FROM jobs WHERE id = :id", id=op_id)
        assert (state, claims) == ("waiting", 0)
        assert gh.bulk.get(op_id).status == "pending"
        time.sleep(0.2)
    assert str(op_id) in gh.dispatcher.queued_job_ids({QUEUE})
    [(attempt,)] = sql("SELECT attempt FROM jobs WHERE id = :id", id=op_id)
    assert attempt == 1

    # When catalog is enabled again, the backlog drains within seconds and the routes answer
    set_module(url, "catalog", enabled=True)
    wait_until(lambda: gh.bulk.get(op_id).status == "completed", timeout=15, what="the operation")
    assert gh.bulk.get(op_id).succeeded == 60
    wait_until(
        lambda: httpx.get(f"{url}/v1/admin/catalog/products", headers=ADMIN).status_code == 200,
        timeout=2,
        what="the catalog routes",
    )
    resumed = "queue catalog.bulk-operation is no longer held: consuming it again"
    assert any(resumed in p.log() for p in procs)


def test_a_job_running_when_its_module_is_disabled_finishes(processes, gh):
    _, url = processes.api(env={"BACKEND_ROLE": "api"})
    procs = workers(processes, 1, BULK_BATCH_SIZE="20")
    wait_until(lambda: logged(procs, "Worker process is ready"), timeout=30, what="the worker")
    products(gh, 3000)
    with gh.engine.connect() as conn:
        ids = [p for (p,) in conn.exec_driver_sql("SELECT id FROM products").fetchall()]
    op_id = queue_bulk(gh, ids)
    wait_until(lambda: gh.bulk.get(op_id).processed > 0, timeout=30, what="the operation to start")

    set_module(url, "catalog", enabled=False)

    done = wait_until(lambda: (op := gh.bulk.get(op_id)).status == "completed" and op, timeout=60, what="it")
    assert (done.processed, done.succeeded) == (3000, 3000)


def test_a_disabled_webhooks_module_keeps_its_deliveries_and_sends_them_when_enabled(processes, gh, settings):
    from gatehouse.composition import bootstrap

    receiver = Receiver()
    wh = bootstrap(settings.model_copy(update={"webhook_allowed_hosts": ["127.0.0.0/8"]}))
    try:
        created = wh.webhook_handlers.create_endpoint(receiver.url, event_types=None, description="")
        receiver.secrets.append(created.secret)
        _, url = processes.api(env={"BACKEND_ROLE": "api", "WEBHOOK_ALLOWED_HOSTS": "127.0.0.0/8"})
        procs = workers(processes, 2, WEBHOOK_ALLOWED_HOSTS="127.0.0.0/8")
        set_module(url, "webhooks", enabled=False)
        paused = "queue webhook.deliver is held (module webhooks is off): its consumer is paused"
        wait_until(lambda: logged(procs, paused), timeout=15, what="both workers to pause webhooks")

        # A domain event while webhooks is off: its delivery is recorded and waits
        [p] = products(gh, 1)
        wh.catalog_handlers.patch_product(p, ProductPatch(name="nowa nazwa"), actor="admin")
        [delivery] = wh.webhooks.list_deliveries()
        watch_until = time.monotonic() + WATCH_S
        while time.monotonic() < watch_until:
            assert not receiver.received
            time.sleep(0.2)
        assert wh.webhooks.get_delivery(delivery.id)[0].status == "pending"

        set_module(url, "webhooks", enabled=True)
        wait_until(lambda: receiver.received, timeout=15, what="the delivery after enabling")
        assert receiver.received[0].verified_by == (0,)
        assert receiver.received[0].webhook_id == delivery.message_id
    finally:
        wh.close()
        receiver.stop()
