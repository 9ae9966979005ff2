"""A short PostgreSQL blip under a real gatehouse-worker: the running job rides it out.

The worker's own PostgreSQL (a private server, so it may be crashed) goes away
while a job body runs and comes back a few seconds later, well within the
job's row lease. The outcome write retries (``JobRuntime._write``), so the job
ends ``completed`` as soon as the store is back, its effect ran once, the
worker logs nothing CRITICAL, and it goes on taking new work.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime

import psycopg
import pytest
from psycopg_pool import PoolTimeout
from sqlalchemy.exc import OperationalError as SqlOperationalError

from gatehouse.composition import Components, bootstrap
from gatehouse.db import make_engine
from gatehouse.jobs import JobRecord
from gatehouse.migrate import upgrade
from gatehouse.settings import load_settings
from tests.conftest import ADMIN_TOKEN, FAST, TOKEN_KEY
from tests.support.pg_server import PgServer, private_postgres
from tests.support.probe import PROBE
from tests.support.probe_client import run_counts
from tests.support.processes import wait_until

OUTAGE_S = 3
BODY_S = 2
# Longer than the outage, so the run keeps its row throughout (the production lease is 90 s).
LEASE_MS = 20_000


@pytest.fixture
def private_pg() -> Iterator[tuple[PgServer, str]]:
    with private_postgres() as server:
        url = server.create_database("gatehouse")
        engine = make_engine(load_settings(database_url=url), bounded_waits=False)
        upgrade(engine)
        engine.dispose()
        yield server, url


@pytest.fixture
def pgh(private_pg, redis_url: str, clean: None) -> Iterator[Components]:
    """The producer side on the private server (and the test Redis)."""
    _, url = private_pg
    gatehouse = bootstrap(
        load_settings(
            database_url=url,
            redis_url=redis_url,
            admin_token=ADMIN_TOKEN,
            token_encryption_key=TOKEN_KEY,
            **{**FAST, "job_lease_ms": LEASE_MS},
        )
    )
    yield gatehouse
    gatehouse.close()


def row(gh: Components, job_id: uuid.UUID) -> JobRecord | None:
    """The job row, or None while the store does not answer (the test's own pool reconnects too)."""
    try:
        return gh.jobs.get(job_id)
    except (psycopg.OperationalError, PoolTimeout, SqlOperationalError):
        return None


def test_a_job_running_during_a_short_postgresql_blip_completes_once_as_soon_as_it_is_back(
    processes, private_pg, pgh
):
    server, url = private_pg
    worker = processes.start(
        "worker", "gatehouse-worker", "--processes", "1", "--threads", "2",
        env={"DATABASE_URL": url, "JOB_LEASE_MS": str(LEASE_MS)},
    )  # fmt: skip

    # Given a job whose body is running
    job_id = pgh.job_handlers.submit(PROBE, account_id=None, payload={"seconds": BODY_S})[0].id
    started = wait_until(
        lambda: (r := row(pgh, job_id)) is not None and r.state == "active" and r.started_at,
        timeout=20,
        interval=0.01,
        what="the job to start",
    )
    assert started

    # When PostgreSQL crashes while the body runs and is back a few seconds later
    server.stop_immediately()
    time.sleep(OUTAGE_S)  # the outage itself: the body ends and its outcome write meets a dead store
    assert worker.alive(), worker.log()
    restarted_at, restarted_wall = time.monotonic(), datetime.now(UTC)
    server.start()

    # Then the job completes soon after: its outcome write was retried, nothing waited for minutes
    done = wait_until(
        lambda: (r := row(pgh, job_id)) is not None and r.state in ("completed", "failed") and r,
        timeout=30,
        interval=0.05,
        what="the job to finish after PostgreSQL came back",
    )
    took = time.monotonic() - restarted_at
    assert done.state == "completed", (done.state, done.error, worker.log())
    assert took < 10, f"the job completed {took:.1f} s after PostgreSQL was restarted\n{worker.log()}"
    # … written once the server was back (so the outcome write really met the outage), its effect once
    assert done.finished_at >= restarted_wall, (done.finished_at, restarted_wall)
    assert run_counts(pgh)[str(job_id)] == 1
    assert done.attempt == 1

    # … and the worker goes on taking new work
    after = pgh.job_handlers.submit(PROBE, account_id=None, payload={"seconds": 0})[0].id
    wait_until(
        lambda: (r := row(pgh, after)) is not None and r.state == "completed",
        timeout=15,
        what="a job submitted after the blip to complete",
    )
    assert run_counts(pgh)[str(after)] == 1
    assert run_counts(pgh)[str(job_id)] == 1

    log = worker.log()
    assert "CRITICAL" not in log, log
    assert "Unexpected failure" not in log, log
    assert worker.alive(), log
