"""Deadline arithmetic (gatehouse.deadlines), run time limits (job types, the interrupt) and cut-short SQL errors."""

from __future__ import annotations

import math
import threading
import time
import uuid

import falcon
import falcon.testing
import httpx
import psycopg
import pytest
import sqlalchemy.exc

from gatehouse import deadlines, progress
from gatehouse.db import cut_short, session_options
from gatehouse.errors import RunTimeLimitExceeded, error_info
from gatehouse.job_types import (
    CATALOG_BULK_OPERATION,
    IMPORT_USER_FEEDS,
    NOTIFICATION_EMAIL,
    RNP_ADS,
    WEBHOOK_DELIVER,
    RunTimeLimits,
    webhook_run_time_limit,
)
from gatehouse.jobs import Claim
from gatehouse.settings import load_settings
from gatehouse_api import errors
from gatehouse_worker import time_limits
from gatehouse_worker.runtime import JobContext


def test_without_a_deadline_nothing_is_clamped():
    assert deadlines.current() is None
    assert deadlines.remaining() == math.inf
    assert deadlines.clamp(30.0) == 30.0
    assert deadlines.clamp(None) is None


def test_a_deadline_clamps_each_wait_to_what_is_left_and_the_earliest_of_nested_ones_wins():
    with deadlines.within(10):
        assert 9.9 < deadlines.remaining() <= 10
        assert deadlines.clamp(2.0) == 2.0  # the operation's own timeout is shorter
        assert 9.9 < deadlines.clamp(30.0) <= 10  # what is left is shorter
        assert 9.9 < deadlines.clamp(None) <= 10
        with deadlines.within(60):  # a WB call's deadline inside a shorter run limit: the run's
            assert deadlines.remaining() <= 10
        with deadlines.within(1):
            assert deadlines.remaining() <= 1
        assert 1 < deadlines.remaining() <= 10  # the outer one is back
    assert deadlines.current() is None


def test_a_passed_deadline_refuses_the_next_wait_instead_of_making_it_non_blocking():
    with deadlines.within(0.01):
        time.sleep(0.02)
        assert deadlines.remaining() < 0
        with pytest.raises(deadlines.DeadlinePassed):
            deadlines.clamp(5.0)


def test_the_deadline_belongs_to_its_thread():
    seen = []
    with deadlines.within(5):
        worker = threading.Thread(target=lambda: seen.append(deadlines.current()))
        worker.start()
        worker.join()
    assert seen == [None]


def _backend(transport: httpx.BaseTransport) -> object:
    return transport._pool._network_backend


def test_the_http_transports_wait_through_the_deadline_backend_proxies_from_the_environment_too(monkeypatch):
    # httpx has no public hook for it: if httpx moves its pool, this says so before a trickle does.
    transport = deadlines.transport()
    assert isinstance(_backend(transport), deadlines._Backend)
    transport.close()
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:3128")
    with deadlines.client(httpx.Client()) as http:
        transports = [http._transport, *http._mounts.values()]
        assert len(transports) == 2  # its own, and the one through the proxy (kept, as before)
        assert all(isinstance(_backend(t), deadlines._Backend) for t in transports)
    mock = httpx.MockTransport(lambda request: httpx.Response(204))
    with deadlines.client(httpx.Client(transport=mock)) as http:
        assert http._transport is mock


# -- run time limits ---------------------------------------------------------------------------


def test_every_job_type_has_a_limit_scaled_by_the_setting_and_webhooks_follow_their_timeout():
    limits = RunTimeLimits(0.5, {WEBHOOK_DELIVER.name: webhook_run_time_limit(15_000, 50)})
    assert RunTimeLimits().of(IMPORT_USER_FEEDS) == RunTimeLimits().of(RNP_ADS) == 30 * 60_000
    assert RunTimeLimits().of(CATALOG_BULK_OPERATION) == RunTimeLimits().of(NOTIFICATION_EMAIL) == 5 * 60_000
    assert limits.of(IMPORT_USER_FEEDS) == 15 * 60_000
    assert (
        limits.of(WEBHOOK_DELIVER) == 15_000 * 50 + 30_000
    )  # unscaled: a full batch, each within its timeout


def _ctx() -> JobContext:
    job = type("Job", (), {"type": "probe", "id": uuid.uuid4()})()
    return JobContext(claim=Claim(job, 1), jobs=None, wb_access=None, poll_delay_ms=0)  # type: ignore[arg-type]


def _run_in_thread(ctx: JobContext, limit_ms: int, body) -> tuple[threading.Thread, list]:
    outcome: list = []

    def run() -> None:
        try:
            with time_limits.body_running(ctx, limit_ms):
                body()
            outcome.append("returned")
        except RunTimeLimitExceeded as exc:
            outcome.append(exc)
        # Past the body: an interrupt must never land here.
        for _ in range(200_000):
            pass
        outcome.append("after")

    thread = threading.Thread(target=run)
    thread.start()
    return thread, outcome


def test_a_body_that_spins_without_a_cooperative_point_is_interrupted_after_its_deadline_and_grace():
    ctx = _ctx()
    spin = threading.Event()

    def forever() -> None:
        while not spin.is_set():
            pass

    thread, outcome = _run_in_thread(ctx, 50, forever)
    try:
        assert not time_limits.interrupt_if_overdue(ctx)  # not yet: within its limit
        time.sleep(0.1)
        assert ctx.overdue()
        assert not time_limits.interrupt_if_overdue(ctx)  # past it, but the grace is not over
        assert time_limits.interrupt_if_overdue(ctx, time.monotonic() + time_limits.INTERRUPT_GRACE_S)
        thread.join(timeout=5)
        assert not thread.is_alive()
        assert isinstance(outcome[0], RunTimeLimitExceeded) and outcome[0].code == "time-limit"
        assert outcome[1] == "after"
        assert not time_limits.interrupt_if_overdue(
            ctx, time.monotonic() + 60
        )  # once, and never after the body
    finally:
        spin.set()


def test_a_body_that_ended_is_never_interrupted():
    ctx = _ctx()
    thread, outcome = _run_in_thread(ctx, 10, lambda: None)
    thread.join(timeout=5)
    assert outcome == ["returned", "after"]
    assert not time_limits.interrupt_if_overdue(ctx, time.monotonic() + 60)


def test_the_cooperative_point_stops_a_run_past_its_deadline():
    ctx = _ctx()
    ctx.deadline = time.monotonic() + 60
    ctx.ensure_held()
    ctx.deadline = time.monotonic() - 0.001
    with pytest.raises(RunTimeLimitExceeded):
        ctx.ensure_held()


# -- SQL that PostgreSQL cut short ---------------------------------------------------------------


def _wrapped(orig: Exception) -> sqlalchemy.exc.OperationalError:
    return sqlalchemy.exc.OperationalError("UPDATE …", {}, orig)


@pytest.mark.parametrize(
    ("error", "why"),
    [
        (psycopg.errors.LockNotAvailable("lock timeout"), "lock-timeout"),
        (psycopg.errors.QueryCanceled("statement timeout"), "statement-timeout"),
        (psycopg.errors.DeadlockDetected("deadlock"), "write-conflict"),
        (psycopg.errors.SerializationFailure("serialization"), "write-conflict"),
        (psycopg.OperationalError("connection refused"), None),
    ],
)
def test_a_statement_postgresql_stopped_is_told_from_an_outage(error, why):
    assert cut_short(error) == why
    assert cut_short(_wrapped(error)) == why
    if why:  # … and a failed step records why, not SQLAlchemy's help-page key ("e3q8")
        assert error_info(_wrapped(error))["code"] == why


def test_the_session_options_bound_both_waits_and_keep_those_of_the_database_url():
    plain = load_settings(
        database_url="postgresql://u@h/db", db_lock_timeout_ms=250, db_statement_timeout_ms=9000
    )
    assert session_options(plain) == "-c lock_timeout=250 -c statement_timeout=9000"
    given = load_settings(database_url="postgresql://u@h/db?options=-c%20search_path%3Dgh")
    assert session_options(given) == "-c search_path=gh -c lock_timeout=10000 -c statement_timeout=60000"


def test_a_run_sets_its_thread_deadline_whatever_an_interrupted_run_left_and_clears_it_after():
    deadlines.reset(time.monotonic() - 10)  # what an interrupt landing in a ``within`` could leave
    ctx = _ctx()
    with time_limits.body_running(ctx, 5_000):
        assert deadlines.current() == ctx.deadline and 4.9 < deadlines.remaining() <= 5
    assert deadlines.current() is None


def test_a_run_stopped_by_a_limit_says_why_in_its_progress_message():
    retrying = progress.message(
        progress.RETRYING, job_type="import-user-feeds", attempt=2, max_attempts=5, resume_in_ms=60_000,
        reason="time-limit",
    )  # fmt: skip
    assert retrying.startswith("Задача не уложилась в отведённое время — повторим (попытка 2 из 5)")
    failed = progress.message(
        progress.FAILED, job_type="catalog.bulk-operation", attempt=5, max_attempts=5, resume_in_ms=None,
        reason="lock-timeout",
    )  # fmt: skip
    assert failed == "Не получилось после 5 попыток: данные заняты другой операцией"


@pytest.mark.parametrize(
    ("error", "code", "retry_after"),
    [
        (_wrapped(psycopg.errors.LockNotAvailable("lock timeout")), "RESOURCE_BUSY", "1"),
        (psycopg.errors.DeadlockDetected("deadlock"), "RESOURCE_BUSY", "1"),
        (psycopg.errors.QueryCanceled("statement timeout"), "STATEMENT_TIMEOUT", "5"),
        (_wrapped(psycopg.OperationalError("connection refused")), "STORE_UNAVAILABLE", "5"),
    ],
)
def test_the_api_answers_a_statement_postgresql_stopped_with_503_and_its_own_code(error, code, retry_after):
    class Raises:
        def on_get(self, req, resp):
            raise error

    app = falcon.App()
    errors.install(app)
    app.add_route("/x", Raises())
    answer = falcon.testing.TestClient(app).simulate_get("/x")
    assert answer.status_code == 503 and answer.headers["content-type"] == "application/problem+json"
    assert answer.json["code"] == code and answer.json["store"] == "postgresql"
    assert answer.headers["retry-after"] == retry_after
