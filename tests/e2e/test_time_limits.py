"""Nothing hangs for ever: real worker processes, real PostgreSQL and Redis, and stand-ins on 127.0.0.1
that trickle one byte at a time, never answer, or hold a row lock (docs/operations/limits.md)."""

from __future__ import annotations

import time
import uuid

import httpx
import psycopg
import pytest

from gatehouse.catalog import NewProduct, Price
from gatehouse.composition import bootstrap
from gatehouse.events import Event
from gatehouse.job_types import IMPORT_USER_FEEDS, IMPORT_USER_REPORT, WB_SYNC_LIMIT_MS
from gatehouse.jobs import JobRecord
from tests.conftest import ADMIN_TOKEN
from tests.support.probe import PROBE, SPIN
from tests.support.processes import wait_until
from tests.support.trickle import trickling

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
GATE_ENV = {"GATE_LEASE_MS": "2000", "GATE_HEARTBEAT_MS": "300", "GATE_POLL_DELAY_MS": "500"}
PERIOD = {"dateFrom": "2026-09-01", "dateTo": "2026-09-02"}
# The orders and sales feeds on their host (WB_API_BASE_URL + /statistics-api): the paths the stand-ins
# hold up; any other call (a new account's token check) gets 204 at once.
FEEDS = "/statistics-api/api/v1/supplier/"
SLACK_S = 2.0  # a worker's poll, the keeper's tick, the stand-in noticing the hang-up, a loaded machine


def worker(processes, *, threads: int = 4, **env: str):
    return processes.start(
        "worker", "gatehouse-worker", "--processes", "1", "--threads", str(threads), env={**GATE_ENV, **env}
    )


def account(gh) -> uuid.UUID:
    return gh.account_handlers.create_account(f"acc-{uuid.uuid4().hex[:6]}", "token").id


def submit(gh, job_type, account_id=None, payload=None) -> uuid.UUID:
    return gh.job_handlers.submit(job_type, account_id=account_id, payload=payload or {})[0].id


def started(gh, job_id: uuid.UUID) -> float:
    """Waits for the job to start; returns when that was seen (time.monotonic())."""
    wait_until(lambda: gh.jobs.get(job_id).state == "active", timeout=20, what=f"job {job_id} to start")
    return time.monotonic()


def finished(gh, job_id: uuid.UUID, timeout: float = 30) -> JobRecord:
    return wait_until(
        lambda: (job := gh.jobs.get(job_id)).state in ("completed", "failed") and job,
        timeout=timeout,
        what=f"job {job_id} to finish",
    )


def gate_free(gh, account_id: uuid.UUID) -> bool:
    return gh.gate.inspect(str(account_id)).holder is None


# -- (a) a WB answer that trickles ------------------------------------------------------------------


def test_a_trickling_wb_answer_holds_the_account_no_longer_than_the_call_deadline_and_the_next_job_runs(
    processes, gh
):
    # Given WB whose feeds trickle one byte every 0.2 s (its report answers at once), a call
    # deadline of 1.5 s and a per-read timeout far above the trickle's pace
    with trickling(interval=0.2, slow_paths=(FEEDS,)) as wb:
        worker(processes, WB_API_BASE_URL=wb.url, WB_CALL_DEADLINE_MS="1500", WB_TIMEOUT_MS="30000")
        acc = account(gh)

        # When a feeds import starts, and then a report import of the same account
        feeds = submit(gh, IMPORT_USER_FEEDS, acc, PERIOD)
        began = started(gh, feeds)
        report = submit(gh, IMPORT_USER_REPORT, acc, PERIOD)

        # Then the report runs (and completes) once the feeds' call is cut: within the deadline, not never
        done = finished(gh, report)
        assert done.state == "completed" and done.attempt == 1, done
        assert time.monotonic() - began < 1.5 + 2 * SLACK_S

        # And the feeds import spends its five attempts, each cut at the deadline, and fails
        failed = finished(gh, feeds, timeout=40)
        assert failed.state == "failed" and failed.attempt == 5, failed
        assert failed.error["code"] == "wb-timeout", failed.error
        slow = [c for c in wb.slow() if c.closed is not None]
        assert len(slow) >= 5
        assert max(c.closed - c.opened for c in slow) < 1.5 + SLACK_S, slow
        assert gate_free(gh, acc)


# -- (b) a row locked by another session -------------------------------------------------------------


def test_a_row_locked_elsewhere_makes_a_bulk_batch_fail_and_retry_and_the_operation_completes_after(
    processes, gh, sql, settings
):
    # Given 60 products (above the synchronous threshold), lock waits of 300 ms, and the bulk
    # ladder of 10, 20, 40, 80 s run as 1, 2, 4, 8 s
    env = {"DB_LOCK_TIMEOUT_MS": "300", "RETRY_DELAY_SCALE": "0.1"}
    _, url = processes.api(env={"BACKEND_ROLE": "api", **env})
    worker(processes, **env)
    gh.catalog_handlers.create_products(
        [NewProduct(sku=f"L-{i:03d}", name=f"p{i}", price=Price(100, "PLN")) for i in range(60)]
    )
    ids = [str(r[0]) for r in sql("SELECT id FROM products ORDER BY id")]

    # When another session holds a lock on one of them
    with psycopg.connect(settings.libpq_url) as locker:
        locker.execute("SELECT id FROM products WHERE id = %s FOR UPDATE", (ids[30],))

        # Then an edit of that product through the API answers 503 RESOURCE_BUSY at once, not after the lock
        start = time.monotonic()
        busy = httpx.patch(
            f"{url}/v1/admin/catalog/products/{ids[30]}", json={"name": "x"}, headers=ADMIN, timeout=30
        )
        print(f"PATCH of a locked product answered {busy.status_code} in {time.monotonic() - start:.3f} s")
        assert busy.status_code == 503, busy.text
        assert busy.headers["content-type"] == "application/problem+json"
        assert busy.json()["code"] == "RESOURCE_BUSY" and busy.json()["store"] == "postgresql"
        assert busy.headers["retry-after"] == "1"
        assert time.monotonic() - start < 3

        # And a bulk operation over them fails its attempt on the lock and waits to retry
        op = httpx.post(
            f"{url}/v1/admin/catalog/bulk-operations",
            json={"productIds": ids, "patch": {"price": {"amount": 999, "currency": "PLN"}}},
            headers=ADMIN,
        )
        assert op.status_code == 202, op.text
        op_id = uuid.UUID(op.json()["operationId"])
        retrying = wait_until(
            lambda: (job := gh.jobs.get(op_id)) and job.attempt >= 2 and job,
            timeout=20,
            what="the bulk job to fail an attempt on the lock",
        )
        assert retrying.error["code"] == "lock-timeout", retrying.error
        assert retrying.state in ("delayed", "active")
        locker.rollback()  # the lock is released

    # Then the operation completes, every product patched once
    job = finished(gh, op_id, timeout=40)
    assert job.state == "completed", job
    status = httpx.get(f"{url}/v1/admin/catalog/bulk-operations/{op_id}", headers=ADMIN).json()
    assert status["status"] == "completed"
    assert status["counters"] == {"total": 60, "processed": 60, "succeeded": 60, "failed": 0}
    assert sql("SELECT count(*) FROM products WHERE price_amount = 999")[0][0] == 60


# -- (c) a run past its time limit -----------------------------------------------------------------


def test_a_wb_sync_whose_wb_never_answers_is_stopped_at_its_run_time_limit_and_frees_the_account(
    processes, gh
):
    # Given WB whose feeds never answer, call deadlines far away (60 s), and the WB syncs' 30-minute
    # run time limit scaled to 2 s; retries 60 s apart (unscaled), so the first outcome stays to be seen
    with trickling("http-silent", slow_paths=(FEEDS,)) as wb:
        worker(
            processes,
            WB_API_BASE_URL=wb.url,
            WB_CALL_DEADLINE_MS="60000",
            WB_TIMEOUT_MS="60000",
            RUN_TIME_LIMIT_SCALE=str(2_000 / WB_SYNC_LIMIT_MS),
            RETRY_DELAY_SCALE="1.0",
        )
        acc = account(gh)

        # When a feeds import starts
        feeds = submit(gh, IMPORT_USER_FEEDS, acc, PERIOD)
        began = started(gh, feeds)

        # Then its attempt ends at the limit: a failed attempt with error.code time-limit, a retry planned
        job = wait_until(
            lambda: (j := gh.jobs.get(feeds)).state == "delayed" and j, timeout=15, what="the attempt to end"
        )
        assert time.monotonic() - began < 2 + SLACK_S
        print(
            f"the silent WB sync's attempt ended {time.monotonic() - began:.3f} s after it was seen starting"
        )
        assert job.error["code"] == "time-limit", job.error
        assert job.attempt == 2 and job.progress["phase"] == "retrying", job.progress

        # And its account's gate is free: the next job of the account runs
        assert gate_free(gh, acc)
        report = submit(gh, IMPORT_USER_REPORT, acc, PERIOD)
        assert finished(gh, report).state == "completed"


def test_a_body_that_loops_without_a_cooperative_point_is_interrupted_at_its_limit(processes, gh):
    # Given one worker thread, and a job whose body spins in pure Python for ever (limit 1 s)
    proc = worker(processes, threads=1)
    acc = account(gh)

    # When it runs
    spin = submit(gh, SPIN, acc)
    began = started(gh, spin)

    # Then it is stopped just past its limit and the grace: failed (one attempt), error.code time-limit
    job = finished(gh, spin, timeout=15)
    assert time.monotonic() - began < 1 + 1 + SLACK_S
    assert job.state == "failed" and job.error["code"] == "time-limit", job.error
    ran = (job.finished_at - job.started_at).total_seconds()
    print(f"the spinning body ran {ran:.3f} s (limit 1 s, grace 1 s, the keeper's tick 0.5 s)")
    assert 1 + 1 <= ran < 1 + 1 + SLACK_S
    assert gate_free(gh, acc)

    # And the worker's one thread is free again: the next job runs on it
    assert finished(gh, submit(gh, PROBE, None, {"seconds": 0})).state == "completed"
    assert "ran past its time limit without stopping; interrupted" in proc.log()


# -- (d) a webhook receiver that trickles, (e) an SMTP server that trickles ----------------------------


@pytest.fixture
def allow_loopback(settings, clean):
    gatehouse = bootstrap(settings.model_copy(update={"webhook_allowed_hosts": ["127.0.0.0/8"]}))
    yield gatehouse
    gatehouse.close()


def test_a_webhook_receiver_that_trickles_is_cut_at_the_attempt_deadline(processes, allow_loopback):
    wh = allow_loopback
    # Given a receiver that trickles its answer one byte every 0.2 s, and a 1.5 s attempt timeout
    with trickling(interval=0.2) as receiver:
        worker(
            processes, WEBHOOK_ALLOWED_HOSTS="127.0.0.0/8", WEBHOOK_TIMEOUT_MS="1500", RETRY_DELAY_SCALE="1"
        )
        created = wh.webhook_handlers.create_endpoint(
            receiver.url + "/hook", event_types=None, description=""
        )

        # When an event is raised
        with wh.uow.begin() as tx:
            tx.publish(Event("catalog.product.updated", {"productId": str(uuid.uuid4())}))

        # Then its first attempt is recorded as a timeout after 1.5 s, not after the whole answer
        def attempted():
            [delivery] = wh.webhooks.list_deliveries(endpoint_id=created.endpoint.id, limit=10)
            attempts = wh.webhooks.get_delivery(delivery.id)[1]
            return attempts and attempts[0].duration_ms is not None and attempts[0]  # recorded, not in flight

        attempt = wait_until(attempted, timeout=20, what="the first attempt")
        assert attempt.error == "timeout after 1.5 s", attempt
        assert 1_400 <= attempt.duration_ms < 1_500 + SLACK_S * 1000
        [conn] = receiver.connections
        wait_until(lambda: conn.closed, timeout=5, what="the receiver to see the hang-up")
        assert conn.closed - conn.opened < 1.5 + SLACK_S


def test_an_smtp_server_that_trickles_is_cut_at_the_exchange_deadline(processes, gh):
    # Given an SMTP server that trickles its greeting one byte every 0.2 s, and a 1.5 s exchange timeout
    with trickling("smtp", interval=0.2) as smtp:
        worker(
            processes, SMTP_URL=f"smtp://127.0.0.1:{smtp.port}", SMTP_TIMEOUT_MS="1500", RETRY_DELAY_SCALE="1"
        )
        user = gh.account_handlers.create_user("ala@example.com", "Ala")

        # When a notification is written (its e-mail job sent after the commit)
        with gh.uow.begin() as tx:
            gh.notifications.notify(
                tx, user_id=user.id, kind="catalog.bulk_operation.completed", title="t", body="b"
            )
            [message] = tx.messages

        # Then the e-mail's first attempt fails at the deadline and waits to retry
        job = wait_until(
            lambda: (j := gh.jobs.get(message.job_id)).state == "delayed" and j, timeout=20, what="the retry"
        )
        assert job.error["code"] == "TimeoutError", job.error
        assert "did not end within 1.5 s" in job.error["message"]
        [conn] = smtp.connections
        wait_until(lambda: conn.closed, timeout=5, what="the server to see the hang-up")
        assert conn.closed - conn.opened < 1.5 + SLACK_S
