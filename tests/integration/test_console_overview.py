"""The overview and schedules pages in process (Falcon TestClient): the JSON twin's numbers, Run now, CSRF."""

from __future__ import annotations

import html
import re
import time
import uuid

import pytest
from falcon import testing

from gatehouse.composition import bootstrap
from gatehouse.schedules import DEFAULTS
from gatehouse.workers import WorkerBeat
from gatehouse_api.app import create_app
from gatehouse_api.resources.overview import StoreChecks
from tests.conftest import ADMIN_TOKEN

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
FORM = {"Content-Type": "application/x-www-form-urlencoded"}
FANOUT = "gatehouse:schedules"  # the tick queue's list in Redis


@pytest.fixture
def client(gh):
    return testing.TestClient(create_app(gh))


def csrf_of(page: str) -> str:
    return re.search(r'name="csrf" value="([0-9a-f]+)"', page).group(1)


def row(page: str, kind: str, name: str) -> str:
    found = re.search(rf'<tr data-{kind}="{re.escape(name)}">(.*?)</tr>', page, re.S)
    assert found, f"no {kind} row {name!r}"
    return found.group(1)


def cell(row_html: str, count: str) -> str:
    text = re.search(rf'data-count="{count}">(.*?)</td>', row_html, re.S).group(1)
    return html.unescape(re.sub(r"<[^>]+>", "", text)).strip()


def add_job(sql, queue: str, state: str, worker: str | None = None) -> None:
    sql(
        "INSERT INTO jobs (id, type, queue, tier, state, payload, worker, finished_at) "
        "VALUES (:id, 'probe', :q, 'user', :s, '{}', :w, CASE WHEN CAST(:s AS varchar) = 'failed' THEN now() END)",
        id=uuid.uuid4(), q=queue, s=state, w=worker,
    )  # fmt: skip


def test_the_overview_shows_the_same_numbers_as_its_json_twin(client, cookie, gh, sql):
    # Given jobs on two queues, a live worker running one of them, and the webhooks module off
    for state in ("waiting", "waiting", "delayed", "failed"):
        add_job(sql, "wb-user", state)
    add_job(sql, "wb-user", "active", worker="host:1:abc")
    gh.liveness.beat("host:1:abc", WorkerBeat(threads=4, queues=("wb-user",)))
    gh.module_handlers.set_module("webhooks", enabled=False, by="test")

    page = client.simulate_get("/console", headers=cookie)
    twin = client.simulate_get("/v1/admin/overview", headers=ADMIN)

    assert page.status_code == 200 and twin.status_code == 200
    queues = {q["name"]: q for q in twin.json["queues"]}
    assert queues["wb-user"] | {"ready": 2, "delayed": 1, "running": 1, "failed24h": 1} == queues["wb-user"]
    user = row(page.text, "queue", "wb-user")
    for field in ("ready", "delayed", "running", "failed24h", "deadLetters"):
        assert cell(user, field) == str(queues["wb-user"][field]), field
    assert "paused (module off)" not in user
    # The paused marker where the module is off, and the dead deliveries labelled on webhook.deliver only
    assert queues["webhook.deliver"]["paused"] is True
    webhook = row(page.text, "queue", "webhook.deliver")
    assert "paused (module off)" in webhook and cell(webhook, "deadDeliveries") == "0"
    assert cell(row(page.text, "queue", "wb-user"), "deadDeliveries") == "—"
    assert "Dead letters (Dramatiq)" in page.text and "Dead deliveries (webhooks)" in page.text
    # Every registry queue is there, zero or not
    assert (
        "notifications.email" in queues
        and cell(row(page.text, "queue", "notifications.email"), "ready") == "0"
    )
    # The worker: alive, busy 1 of its 4 threads
    listed_workers = twin.json["workers"]
    [running] = listed_workers[0].pop("jobs")
    assert listed_workers == [
        {
            "name": "host:1:abc",
            "alive": True,
            "threads": 4,
            "busy": 1,
            "queues": ["wb-user"],
            "startedAt": None,
        }
    ]
    worker = row(page.text, "worker", "host:1:abc")
    assert "alive" in worker and "busy 1 of 4 threads" in worker
    # and what it is doing: the running job, linked
    assert f'href="/console/jobs/{running["jobId"]}"' in worker
    # Stores as /readyz checks them; schedules as GET /v1/admin/schedules lists them
    assert twin.json["stores"] == {"postgresql": "ok", "redis": "ok"}
    listed = client.simulate_get("/v1/admin/schedules", headers=ADMIN).json["items"]
    assert twin.json["schedules"] == listed
    for s in DEFAULTS:
        assert f'data-schedule="{s.name}"' in page.text
    # Its numbers are live regions the page script refreshes
    for region in ("stores", "queues", "workers", "schedule-runs"):
        assert re.search(rf'id="{region}" data-live', page.text), region


def test_the_overview_is_for_admins_only(client, gh):
    account = client.simulate_post("/v1/accounts", json={"name": "Shop", "wbToken": "t"}, headers=ADMIN).json
    key = client.simulate_post(f"/v1/accounts/{account['accountId']}/keys", headers=ADMIN).json["key"]
    assert (
        client.simulate_get("/v1/admin/overview", headers={"Authorization": f"Bearer {key}"}).status_code
        == 403
    )
    assert client.simulate_get("/v1/admin/overview").status_code == 401
    response = client.simulate_get("/console")
    assert response.status_code == 303 and response.headers["location"] == "/console/login?next=/console"


def test_no_worker_alive_is_said_plainly(client, cookie):
    page = client.simulate_get("/console", headers=cookie).text
    assert "No worker is alive" in page


def test_the_schedules_page_lists_each_schedule_as_the_json_api_does(client, cookie, gh):
    page = client.simulate_get("/console/schedules", headers=cookie)
    assert page.status_code == 200
    for item in client.simulate_get("/v1/admin/schedules", headers=ADMIN).json["items"]:
        tr = row(page.text, "schedule", item["name"])
        assert item["cron"] in tr and item["jobType"] in tr and "Run now" in tr
    assert "5 min" in row(page.text, "schedule", "rnp-ads")  # its max wait (300,000 ms)
    assert "not gated" in row(page.text, "schedule", "inventory")
    assert "one system job" in row(page.text, "schedule", "cart-abandonment")


def test_run_now_sends_the_tick_the_json_call_sends_and_says_so(client, cookie, gh):
    token = csrf_of(client.simulate_get("/console/schedules", headers=cookie).text)

    response = client.simulate_post(
        "/console/schedules/cart-abandonment/run", body=f"csrf={token}", headers={**cookie, **FORM}
    )

    assert response.status_code == 303
    assert response.headers["location"] == "/console/schedules?ran=cart-abandonment"
    assert gh.redis.llen(FANOUT) == 1
    assert client.simulate_post("/v1/admin/schedules/cart-abandonment/run", headers=ADMIN).status_code == 202
    assert gh.redis.llen(FANOUT) == 2  # the JSON call: the same message on the same queue
    sent = [gh.broker.client.hget("gatehouse:schedules.msgs", i) for i in gh.redis.lrange(FANOUT, 0, -1)]
    assert all(b'"actor_name":"schedule:cart-abandonment"' in m for m in sent)
    page = client.simulate_get(response.headers["location"], headers=cookie).text
    assert "Tick sent for <code>cart-abandonment</code>" in page


def test_run_now_without_the_token_or_for_no_schedule_sends_nothing(client, cookie, gh):
    refused = client.simulate_post("/console/schedules/cart-abandonment/run", headers={**cookie, **FORM})
    assert refused.status_code == 403
    token = csrf_of(client.simulate_get("/console/schedules", headers=cookie).text)
    missing = client.simulate_post(
        "/console/schedules/nope/run", body=f"csrf={token}", headers={**cookie, **FORM}
    )
    assert missing.status_code == 404 and missing.headers["content-type"].startswith("text/html")
    assert gh.redis.llen(FANOUT) == 0


def test_a_schedule_of_a_module_that_is_off_says_so_and_run_now_refuses_it(client, cookie, gh):
    def listed(name: str) -> tuple:
        items = client.simulate_get("/v1/admin/schedules", headers=ADMIN).json["items"]
        [item] = [i for i in items if i["name"] == name]
        return item["module"], item["moduleEnabled"]

    assert listed("cart-abandonment") == ("carts", True) and listed("rnp-ads") == (None, True)
    token = csrf_of(client.simulate_get("/console/schedules", headers=cookie).text)
    gh.module_handlers.set_module("carts", enabled=False, by="test")

    # The JSON list says it; Run now is refused with the module, sends nothing and moves no last run
    assert listed("cart-abandonment") == ("carts", False) and listed("rfq-expiry") == ("rfq", True)
    refused = client.simulate_post("/v1/admin/schedules/cart-abandonment/run", headers=ADMIN)
    assert refused.status_code == 409 and refused.headers["content-type"] == "application/problem+json"
    assert (refused.json["code"], refused.json["module"]) == ("MODULE_DISABLED", "carts")
    # the console: the row shows the schedule off with its module and offers no Run now
    page = client.simulate_get("/console/schedules", headers=cookie).text
    off = re.search(r'<tr data-schedule="cart-abandonment" data-module-off="carts">(.*?)</tr>', page, re.S)
    assert off, "the cart-abandonment row is not marked off"
    assert "off: module carts" in off.group(1) and "Run now" not in off.group(1)
    assert "Run now" in row(page, "schedule", "rfq-expiry")
    # a Run now posted anyway (a page from before) answers the error on a page, not "Tick sent"
    posted = client.simulate_post(
        "/console/schedules/cart-abandonment/run", body=f"csrf={token}", headers={**cookie, **FORM}
    )
    assert posted.status_code == 409 and posted.headers["content-type"].startswith("text/html")
    assert "the carts module is disabled" in posted.text
    assert gh.redis.llen(FANOUT) == 0
    assert gh.schedule_runs.runs("cart-abandonment") == (None, None)
    # a module that is not installed: 404, as its routes answer
    gh.module_handlers.set_module("carts", installed=False, by="test")
    gone = client.simulate_post("/v1/admin/schedules/cart-abandonment/run", headers=ADMIN)
    assert (gone.status_code, gone.json["code"], gone.json["module"]) == (404, "MODULE_DISABLED", "carts")
    # switched on again, it runs
    gh.module_handlers.set_module("carts", installed=True, enabled=True, by="test")
    assert client.simulate_post("/v1/admin/schedules/cart-abandonment/run", headers=ADMIN).status_code == 202


def test_the_note_names_only_a_schedule(client, cookie):
    page = client.simulate_get("/console/schedules?ran=<script>alert(1)</script>", headers=cookie).text
    assert "Tick sent" not in page and "<script>alert(1)" not in page


@pytest.mark.parametrize("down", ["postgresql", "redis"])
def test_a_store_that_does_not_answer_leaves_only_its_numbers_unknown(client, cookie, gh, monkeypatch, down):
    # The readiness probes say one store is down (a real outage is tests/e2e; here only the checks lie)
    checks = {"postgresql": "ok", "redis": "ok", down: "down: no answer within 300 ms"}
    monkeypatch.setattr(StoreChecks, "__call__", lambda self: dict(checks))

    twin = client.simulate_get("/v1/admin/overview", headers=ADMIN)
    page = client.simulate_get("/console", headers=cookie)

    assert twin.status_code == 200 and page.status_code == 200
    assert twin.json["stores"] == checks
    user = next(q for q in twin.json["queues"] if q["name"] == "wb-user")
    store = re.search(rf'data-store="{down}">(.*?)</div>', page.text, re.S).group(1)
    assert "down" in store and "no answer within 300 ms" in store
    if down == "postgresql":
        assert user["ready"] is None and user["paused"] is None and user["deadLetters"] == 0
        assert cell(row(page.text, "queue", "wb-user"), "ready") == "unknown"
        assert twin.json["schedules"] is not None
    else:
        assert user["ready"] == 0 and user["deadLetters"] is None
        assert twin.json["workers"] is None and twin.json["schedules"] is None
        assert "Unknown: Redis, where workers beat, did not answer." in page.text


def test_with_redis_really_gone_the_overview_still_answers_fast_with_what_postgresql_knows(settings, gh, sql):
    add_job(sql, "wb-user", "waiting")
    gone = bootstrap(
        settings.model_copy(update={"redis_url": "redis://127.0.0.1:1/0", "redis_timeout_ms": 200})
    )
    try:
        client = testing.TestClient(create_app(gone))
        started = time.monotonic()
        twin = client.simulate_get("/v1/admin/overview", headers=ADMIN)
        took = time.monotonic() - started
    finally:
        gone.close()
    assert twin.status_code == 200, twin.text
    assert twin.json["stores"]["postgresql"] == "ok" and twin.json["stores"]["redis"].startswith("down")
    user = next(q for q in twin.json["queues"] if q["name"] == "wb-user")
    assert user["ready"] == 1 and user["deadLetters"] is None and twin.json["workers"] is None
    assert took < 1.5, took


def test_the_overview_counts_the_secrets_still_under_an_old_key_on_a_page_load(client, cookie, gh, sql):
    account = gh.account_handlers.create_account("a", "wb-token")
    gh.account_handlers.create_account("b", "wb-token")

    page = client.simulate_get("/console", headers=cookie).text
    assert 'data-old-keys="0"' in page and "Every stored secret" in page

    # A token written under another key (or before key ids were kept)
    sql("UPDATE accounts SET wb_token_key_id = 'an-old-key' WHERE id = :id", id=account.id)
    page = client.simulate_get("/console", headers=cookie).text
    assert 'data-old-keys="1"' in page and "gatehouse-rotate-keys" in page
    # The live refreshes replace only their own parts, and do not count again
    live = client.simulate_get("/console", headers={**cookie, "X-Console-Live": "1"}).text
    assert "data-old-keys" not in live
