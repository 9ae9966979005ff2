"""The console's reads that were slow at 100,000 accounts (bench/bench_fleet_reads.py), on real PostgreSQL and Redis.

- hot accounts: a hot-only list read only the accounts a park or a pause noted (gatehouse.hot), not
  every account 200 at a time (10.9-24 s at 100,000 accounts);
- the jobs list by phase: a live phase reads the live rows, not the whole newest-first index when
  nothing matches (3.7-7.9 s);
- the overview's counts: each branch from its partial index, not a sequential scan of the table
  that one OR made (0.85-1.1 s).

The plans are read with sequential scans allowed, on a table whose finished rows outnumber the
others as retention leaves them.
"""

from __future__ import annotations

import time
import uuid

import psycopg
import pytest

from gatehouse import hot, operations
from gatehouse.accounts import Accounts
from gatehouse.gate import owner
from gatehouse.wb.pauses import TTL_MS
from gatehouse_api.resources.gates import GateViews
from tests.support.job_lists import listed

ASK = {"tier": "user", "lease_ms": 60_000, "wanted_ttl_ms": 60_000, "waiting_ttl_ms": 60_000}

# Retention's steady state in miniature: many completed rows, older failed ones, a few live ones.
SEED = """
INSERT INTO accounts (id, name) VALUES ('00000000-0000-0000-0000-00000000000a', 'a');
INSERT INTO jobs (id, type, queue, tier, state, max_attempts, progress, created_at, finished_at)
SELECT gen_random_uuid(), 'rnp:ads-sync-account', 'wb-scheduled', 'scheduled', 'completed', 3,
       '{"phase": "completed"}', now() - i * interval '1 second', now() - i * interval '1 second'
FROM generate_series(1, 40000) i;
INSERT INTO jobs (id, type, queue, tier, state, max_attempts, progress, created_at, finished_at)
SELECT gen_random_uuid(), 'rnp:ads-sync-account', 'wb-scheduled', 'scheduled', 'failed', 3,
       '{"phase": "failed"}', now() - i * interval '1 minute', now() - i * interval '1 minute'
FROM generate_series(1, 4000) i;
INSERT INTO jobs (id, type, queue, tier, account_id, state, max_attempts, progress, created_at)
SELECT gen_random_uuid(), 'import-user-feeds', 'wb-user', 'user', '00000000-0000-0000-0000-00000000000a',
       'delayed', 3, '{"phase": "waiting-account"}', now() - i * interval '1 hour' - interval '1 day'
FROM generate_series(1, 1) i;
VACUUM ANALYZE jobs;
"""


@pytest.fixture
def seeded(gh, settings):
    with psycopg.connect(settings.libpq_url, autocommit=True) as conn:
        for statement in SEED.split(";\n"):
            if statement.strip():
                conn.execute(statement)
        yield conn


def views(gh) -> GateViews:
    """The accounts' reading the API and the console share (gatehouse_api.app.create_app)."""
    return GateViews(gh.accounts, gh.gate, gh.pauses, gh.hot, gh.redis)


def plan_of(conn, sql: str, params=None) -> str:
    return "\n".join(r[0] for r in conn.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql, params))


# -- the jobs list by phase ------------------------------------------------------------------


def test_a_live_phase_reads_the_live_rows_not_the_newest_first_index(gh, seeded, monkeypatch):
    sql, params, rows = listed(gh, monkeypatch, phase="waiting-account", limit=50)
    plan = plan_of(seeded, sql, params)

    assert [r.progress["phase"] for r in rows] == ["waiting-account"]
    assert "jobs_newest" not in plan and "Seq Scan" not in plan, plan
    assert "Rows Removed by Filter" not in plan, plan  # no finished row read and thrown away
    # A live phase that nothing has reads nothing either (it read the whole index: 3.7-7.9 s at 100,000)
    sql, params, rows = listed(gh, monkeypatch, phase="rate-limited", limit=50)
    plan = plan_of(seeded, sql, params)
    assert rows == [] and "jobs_newest" not in plan and "Seq Scan" not in plan, plan


def test_the_finished_phases_keep_their_rows_and_failed_reads_only_the_failed_ones(gh, seeded, monkeypatch):
    sql, params, failed = listed(gh, monkeypatch, phase="failed", limit=50)
    plan = plan_of(seeded, sql, params)
    assert len(failed) == 50 and {r.state for r in failed} == {"failed"}
    assert "jobs_newest" not in plan and "Seq Scan" not in plan, plan  # only failed rows read
    _, _, completed = listed(gh, monkeypatch, phase="completed", limit=50)
    assert len(completed) == 50 and {r.state for r in completed} == {"completed"}
    # A phase with a state it never has: nothing, as before
    assert listed(gh, monkeypatch, phase="running", state="completed")[2] == []


# -- the overview's counts -------------------------------------------------------------------


def test_the_overview_counts_each_branch_from_its_partial_index(gh, seeded, sql):
    sql(
        "INSERT INTO jobs (id, type, queue, tier, state, worker) "
        "VALUES (gen_random_uuid(), 'probe', 'wb-user', 'user', 'active', 'w-1')"
    )
    plan = plan_of(seeded, operations.JOB_COUNTS)

    # One statement whose WHERE ORs both read the table whole at 100,000 accounts (a parallel
    # sequential scan) or, here, a BitmapOr over both indexes rechecked row by row.
    assert "Seq Scan" not in plan and "BitmapOr" not in plan, plan
    assert "jobs_failed_by_finished" in plan, plan
    with gh.engine.connect() as conn:
        counts = operations.job_counts(conn)
    assert counts.queues["wb-scheduled"].failed_24h == 24 * 60 - 1
    assert counts.queues["wb-user"] == operations.QueueCounts(delayed=1, running=1)
    assert counts.busy == {"w-1": 1}


# -- hot accounts ------------------------------------------------------------------------------


def test_a_hot_only_list_reads_only_the_accounts_a_park_or_a_pause_noted(gh, sql, monkeypatch):
    # Given 1,000 quiet accounts, one whose gate is held with a job in line, one WB paused an hour
    # ago, and one paused two days ago (no longer hot)
    sql(
        "INSERT INTO accounts (id, name, created_at) SELECT gen_random_uuid(), 'Quiet ' || i, "
        "now() - i * interval '1 second' FROM generate_series(1, 1000) i"
    )
    busy, paused, cooled = (
        gh.account_handlers.create_account(n, "token").id for n in ("Busy", "Paused", "Cool")
    )
    now = int(time.time() * 1000)
    assert gh.gate.acquire(str(busy), owner("wb-user", uuid.uuid4()), first_wait_ms=now, **ASK).proceed
    assert not gh.gate.acquire(str(busy), owner("wb-user", uuid.uuid4()), first_wait_ms=now, **ASK).proceed
    gh.pauses.record(str(paused), uuid.uuid4(), at_ms=now - 3_600_000, resume_at_ms=now, reason="wb-429")
    two_days = now - 2 * TTL_MS
    gh.pauses.record(str(cooled), uuid.uuid4(), at_ms=two_days, resume_at_ms=two_days + 1000, reason="wb-429")

    # Then the index holds the two hot ones (the old pause went at the next note) …
    assert set(gh.hot.candidates()) == {str(busy), str(paused)}
    # … and the hot-only page reads those accounts alone, in one query, instead of every account
    pages = []
    real = Accounts.page

    def spy(self, **kw):
        found = real(self, **kw)
        pages.append(found)
        return found

    monkeypatch.setattr(Accounts, "page", spy)
    found = views(gh).page({"hot": "true"}.get, limit=50)
    assert [a["accountId"] for a in found["items"]] == [str(paused), str(busy)]  # newest first
    assert [len(p) for p in pages] == [2]


def test_a_hot_only_list_with_no_account_noted_reads_no_account(gh, sql, monkeypatch):
    sql(
        "INSERT INTO accounts (id, name) SELECT gen_random_uuid(), 'Quiet ' || i FROM generate_series(1, 300) i"
    )
    monkeypatch.setattr(Accounts, "page", lambda self, **kw: pytest.fail("walked the accounts"))
    assert views(gh).page({"hot": "true"}.get, limit=50) == {"items": [], "nextCursor": None}


def test_a_waiter_keeps_its_account_noted_only_as_long_as_its_waiting_set_lives(gh):
    account = str(gh.account_handlers.create_account("Busy", "token").id)
    now = int(time.time() * 1000)
    gh.gate.acquire(account, owner("wb-user", uuid.uuid4()), first_wait_ms=now, **ASK)
    # A free gate taken is nobody waiting: nothing noted
    assert gh.hot.candidates() == []
    gh.gate.acquire(account, owner("wb-user", uuid.uuid4()), first_wait_ms=now, **ASK)
    until = gh.redis.zscore(hot.hot_key(gh.settings.broker_namespace), account)
    waiting_left = gh.redis.pttl(gh.gate.keys(account).waiting)
    assert abs(until - (time.time() * 1000 + waiting_left)) < 1000  # noted until the set expires
