"""Catalog bulk operations end to end: a real API, real workers, duplicated messages, a killed worker."""

from __future__ import annotations

import uuid

import httpx

from gatehouse.catalog import NewProduct, Price
from gatehouse.catalog.bulk import Selection, patch_from_json
from gatehouse.job_types import CATALOG_BULK_OPERATION, NOTIFICATION_EMAIL
from gatehouse.jobs import message_of
from tests.conftest import ADMIN_TOKEN
from tests.support.processes import free_port, wait_until
from tests.support.smtp import SmtpServer

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
PATCH = {"price": {"amount": 999, "currency": "PLN"}}


def products(gh, n: int) -> list[str]:
    for start in range(0, n, 1000):
        gh.catalog_handlers.create_products(
            [
                NewProduct(sku=f"SKU-{i:06d}", name=f"p{i}", price=Price(100, "PLN"))
                for i in range(start, min(n, start + 1000))
            ]
        )
    return [str(p.id) for p in gh.catalog.list_products(limit=200)] if n <= 200 else []


def all_ids(sql) -> list[str]:
    return [str(r[0]) for r in sql("SELECT id FROM products ORDER BY id")]


def audit_rows(sql) -> int:
    return sql("SELECT count(*) FROM audit_log WHERE action = 'product.bulk_update'")[0][0]


def operation(url: str, op_id: str) -> dict:
    return httpx.get(f"{url}/v1/admin/catalog/bulk-operations/{op_id}", headers=ADMIN).json()


def test_51_products_run_on_a_worker_and_50_answer_at_once(processes, gh, sql):
    _, url = processes.api(env={"BACKEND_ROLE": "api"})
    processes.start("worker", "gatehouse-worker", "--processes", "1", "--threads", "2")
    products(gh, 101)
    ids = all_ids(sql)

    # 50 products: applied on the request, recorded, 200
    small = httpx.post(
        f"{url}/v1/admin/catalog/bulk-operations",
        json={"productIds": ids[:50], "patch": PATCH},
        headers=ADMIN,
    )
    assert small.status_code == 200 and small.json()["status"] == "completed"
    assert small.json()["counters"] == {"total": 50, "processed": 50, "succeeded": 50, "failed": 0}

    # 51 products: 202 at once, then the worker runs it; the list shows it
    big = httpx.post(
        f"{url}/v1/admin/catalog/bulk-operations",
        json={"productIds": ids[50:], "patch": PATCH},
        headers=ADMIN,
    )
    assert big.status_code == 202 and big.json()["status"] in ("pending", "running", "completed")
    op_id = big.json()["operationId"]
    done = wait_until(
        lambda: (op := operation(url, op_id))["status"] == "completed" and op,
        timeout=30,
        what="the operation",
    )
    assert done["counters"] == {"total": 51, "processed": 51, "succeeded": 51, "failed": 0}
    listed = httpx.get(f"{url}/v1/admin/catalog/bulk-operations?status=completed", headers=ADMIN).json()
    assert [o["operationId"] for o in listed["items"]] == [op_id, small.json()["operationId"]]
    assert audit_rows(sql) == 101


def test_duplicated_messages_on_two_workers_patch_each_product_once_and_notify_once(processes, gh, sql):
    # Given two workers, a real SMTP server, and a staff user's 2,000-product operation
    smtp = SmtpServer(free_port())
    smtp.start()
    env = {"SMTP_URL": smtp.url, "MAIL_FROM": "Gatehouse <noreply@gh.test>"}
    processes.start("worker-a", "gatehouse-worker", "--processes", "1", "--threads", "4", env=env)
    processes.start("worker-b", "gatehouse-worker", "--processes", "1", "--threads", "4", env=env)
    ala = gh.account_handlers.create_user("ala@example.com", "Ala")
    products(gh, 2000)
    ids = [uuid.UUID(i) for i in all_ids(sql)]
    request = {"productIds": [str(i) for i in ids], "patch": PATCH}
    # (its unit of work sends its job's message after the commit: the first copy)
    op = gh.catalog_handlers.create_bulk_operation(
        Selection(product_ids=tuple(ids)),
        patch_from_json(PATCH),
        request,
        requester=ala.id,
        actor=str(ala.id),
    )
    assert op.status == "pending"

    # When its message is delivered three times
    message = message_of(gh.jobs.get(op.id))
    for _ in range(2):
        gh.dispatcher.send(message)

    # Then each product is patched once, the counters are exact, and Ala is told once, by e-mail too
    try:
        wait_until(lambda: gh.bulk.get(op.id).status == "completed", timeout=60, what="the operation")
        wait_until(lambda: smtp.inbox.messages, timeout=30, what="the e-mail")
        wait_until(
            lambda: (
                not gh.dispatcher.queued_job_ids({CATALOG_BULK_OPERATION.queue, NOTIFICATION_EMAIL.queue})
            ),
            timeout=30,
            what="every copy to be consumed",
        )
    finally:
        smtp.stop()
    done = gh.bulk.get(op.id)
    assert (done.processed, done.succeeded, done.failed) == (2000, 2000, 0)
    assert audit_rows(sql) == 2000
    assert sql("SELECT count(*) FROM products WHERE price_amount = 999")[0][0] == 2000
    assert sql("SELECT count(*) FROM notifications WHERE user_id = :u", u=ala.id)[0][0] == 1
    [(recipients, message)] = smtp.inbox.messages
    assert recipients == ["ala@example.com"] and "Operacja masowa" in message["Subject"]


def test_a_worker_killed_in_the_middle_leaves_whole_batches_and_the_run_resumes(processes, gh, sql):
    env = {"BULK_BATCH_SIZE": "25", "WORKER_DEAD_AFTER_MS": "2000", "WORKER_HEARTBEAT_MS": "500"}
    doomed = processes.start("doomed", "gatehouse-worker", "--processes", "1", "--threads", "1", env=env)
    products(gh, 5000)
    _, url = processes.api(env={"BACKEND_ROLE": "api"})
    started = httpx.post(
        f"{url}/v1/admin/catalog/bulk-operations", json={"filter": {"skuPrefix": "SKU-"}, "patch": PATCH},
        headers=ADMIN,
    )  # fmt: skip
    assert started.status_code == 202
    op_id = started.json()["operationId"]

    # When the worker dies half way
    wait_until(
        lambda: operation(url, op_id)["counters"]["processed"] >= 25,
        timeout=60,
        interval=0.01,
        what="a batch",
    )
    doomed.kill_tree()
    at_kill = operation(url, op_id)["counters"]["processed"]
    assert at_kill < 5000, "the operation finished before the kill: make it longer"
    assert at_kill % 25 == 0  # whole batches only

    # Then a new worker finishes it: exact counters, each product patched once
    processes.start("survivor", "gatehouse-worker", "--processes", "1", "--threads", "2", env=env)
    done = wait_until(
        lambda: (op := operation(url, op_id))["status"] == "completed" and op,
        timeout=90,
        what="the resumed run",
    )
    assert done["counters"] == {"total": 5000, "processed": 5000, "succeeded": 5000, "failed": 0}
    assert audit_rows(sql) == 5000
    assert sql("SELECT count(*) FROM products WHERE price_amount = 999")[0][0] == 5000


def test_bad_selections_and_patches_are_problems_with_stable_codes(processes, gh, sql):
    _, url = processes.api(env={"BACKEND_ROLE": "api"})
    products(gh, 2)
    ids = all_ids(sql)
    ghost = str(uuid.uuid4())

    def post(body):
        return httpx.post(f"{url}/v1/admin/catalog/bulk-operations", json=body, headers=ADMIN)

    for body, field in (
        ({"productIds": ids, "filter": {}, "patch": PATCH}, "productIds"),  # both
        ({"patch": PATCH}, "productIds"),  # neither
        ({"productIds": ids, "patch": {"colour": "red"}}, "patch.colour"),  # unknown patch field
        ({"productIds": ids, "patch": {}}, None),  # a patch that changes nothing
        ({"filter": {"skuPrefix": "NOPE"}, "patch": PATCH}, "filter"),  # an empty selection
    ):
        answer = post(body)
        assert answer.status_code == 422, (body, answer.text)
        assert answer.headers["content-type"].startswith("application/problem+json")
        assert answer.json()["code"] == "VALIDATION_ERROR" and answer.json().get("field") == field, (
            answer.json()
        )

    # Unknown ids are failed items of the operation, not an error
    answer = post({"productIds": [*ids, ghost], "patch": PATCH})
    assert answer.status_code == 200
    assert answer.json()["counters"]["failed"] == 1
    assert answer.json()["failedItems"] == [{"productId": ghost, "reason": "product not found"}]


def test_smtp_down_at_the_end_completes_the_operation_and_the_email_follows_when_it_is_back(
    processes, gh, sql
):
    # Given a staff user's queued operation and an SMTP server that is down when it ends
    smtp = SmtpServer(free_port())  # nothing listens yet
    env = {"SMTP_URL": smtp.url, "RETRY_DELAY_SCALE": "0.01"}  # e-mail retries 0.3, 0.6, 1.2 … s apart
    processes.start("worker", "gatehouse-worker", "--processes", "1", "--threads", "2", env=env)
    ala = gh.account_handlers.create_user("ala@example.com", "Ala")
    products(gh, 60)
    ids = [uuid.UUID(i) for i in all_ids(sql)]
    # (its job's message is sent after the commit, by its unit of work)
    op = gh.catalog_handlers.create_bulk_operation(
        Selection(product_ids=tuple(ids)), patch_from_json(PATCH),
        {"productIds": [str(i) for i in ids], "patch": PATCH}, requester=ala.id, actor=str(ala.id),
    )  # fmt: skip
    assert op.status == "pending"

    # Then the operation completes regardless, and its e-mail waits on its own retries …
    wait_until(lambda: gh.bulk.get(op.id).status == "completed", timeout=30, what="the operation")

    def email_job():
        rows = sql("SELECT state, attempt FROM jobs WHERE type = 'notifications.email'")
        return rows[0] if rows else None

    wait_until(lambda: (j := email_job()) and j.attempt >= 2, timeout=30, what="the e-mail to be retrying")
    assert gh.bulk.get(op.id).status == "completed"

    # … until the server is back: then it is delivered, once
    smtp.start()
    try:
        wait_until(lambda: email_job().state == "completed", timeout=30, what="the e-mail to be sent")
        assert len(smtp.inbox.messages) == 1 and smtp.inbox.messages[0][0] == ["ala@example.com"]
    finally:
        smtp.stop()
