"""Fan-outs with real worker processes: resumable after a kill, spread over their window, fair to starved
accounts; and scheduled syncs that write nothing over unchanged WB data."""

from __future__ import annotations

import json
import uuid

import pytest

from gatehouse import job_types as jt
from gatehouse.fanout import TICK_FIELD, offset_ms
from gatehouse.gate import owner
from gatehouse.jobs import datetime_to_ms, utcnow
from gatehouse.schedules import DEFAULTS, FANOUT_QUEUE
from tests.support.processes import wait_until
from tests.support.wb_sandbox import running_sandbox, scaled_limits

ADS = jt.RNP_ADS.name
FAN_OUT = "fan-out:rnp-ads"


def only_ads(**entry) -> dict[str, str]:
    """SCHEDULES with rnp-ads as given (never due by itself: the test sends its ticks) and the rest off;
    WB on a closed loopback port unless the test brings its sandbox."""
    return {
        "WB_API_BASE_URL": "http://127.0.0.1:9",
        "SCHEDULES": json.dumps(
            {
                "rnp-ads": {"cron": "0 0 1 1 *", **entry},
                **{s.name: {"enabled": False} for s in DEFAULTS if s.name != "rnp-ads"},
            }
        ),
    }


def worker(processes, name: str, env: dict[str, str], threads: int = 4):
    proc = processes.start(name, "gatehouse-worker", "--processes", "1", "--threads", str(threads), env=env)
    wait_until(lambda: "Worker process is ready" in proc.log(), timeout=30, what=f"{name} to start")
    return proc


def tick(gh) -> None:
    """What the scheduler (or an admin's "run now") sends: the schedule's tick message."""
    gh.dispatcher.tick(FANOUT_QUEUE, "schedule:rnp-ads")


def fan_out_done(sql, n: int = 1) -> list:
    rows = sql(
        "SELECT id, state, result, payload, checkpoint FROM jobs WHERE type = :t ORDER BY created_at",
        t=FAN_OUT,
    )
    return rows if len(rows) == n and rows[-1].state == "completed" and rows else []


def seed_accounts(sql, n: int) -> list[uuid.UUID]:
    """``n`` active accounts without WB tokens: a job due within the test fails before any WB call."""
    sql(
        "INSERT INTO accounts (id, name) SELECT gen_random_uuid(), 'shop-' || g FROM generate_series(1, :n) g",
        n=n,
    )
    return [r.id for r in sql("SELECT id FROM accounts ORDER BY id")]


def test_a_fan_out_killed_mid_way_resumes_on_another_worker_and_a_second_tick_doubles_nothing(
    processes, gh, sql
):
    # Given 3,000 accounts, and a worker that fans rnp-ads out 10 accounts a chunk (spread over 10 min)
    accounts = seed_accounts(sql, 3_000)
    env = {
        **only_ads(spread_ms=600_000),
        "FAN_OUT_CHUNK_SIZE": "10",
        "WORKER_HEARTBEAT_MS": "200",
        "WORKER_DEAD_AFTER_MS": "1500",
    }
    doomed = worker(processes, "doomed", env)
    tick(gh)

    # When the worker is killed (kill -9, every process) while its fan-out is part way
    def part_way():
        rows = sql("SELECT checkpoint FROM jobs WHERE type = :t", t=FAN_OUT)
        return rows and rows[0].checkpoint and rows[0].checkpoint["created"] >= 300

    wait_until(part_way, timeout=30, interval=0.01, what="the fan-out to commit some chunks")
    doomed.kill_tree()
    [killed] = sql("SELECT state, checkpoint FROM jobs WHERE type = :t", t=FAN_OUT)
    written = sql("SELECT count(*) FROM jobs WHERE type = :t", t=ADS)[0][0]
    assert killed.state == "active" and written < len(accounts), "the kill came too late to test a resume"
    assert written == killed.checkpoint["created"]  # each chunk commits with its checkpoint, or not at all

    # … and a second tick arrives, handled by another worker, which also takes over the dead one's fan-out
    worker(processes, "survivor", env)
    tick(gh)
    [done] = wait_until(lambda: fan_out_done(sql), timeout=60, what="the fan-out to finish on the survivor")

    # Then every active account has exactly one job of the tick: none doubled, none missed
    children = sql("SELECT account_id, payload FROM jobs WHERE type = :t", t=ADS)
    assert sorted(c.account_id for c in children) == accounts
    assert done.result == {"created": 3_000, "alreadyLive": 0, "spreadMs": 600_000}
    # … all of the first tick (the second found its fan-out still live and created nothing)
    assert {c.payload["dueAtMs"] - offset_ms(c.account_id, 600_000) for c in children} == {
        done.payload[TICK_FIELD]
    }
    # … and each has its message once reconciliation has run (a chunk may have died between commit and send)
    gh.job_handlers.reconcile(grace_ms=0)
    queued = gh.dispatcher.queued_job_ids([jt.RNP_ADS.queue])
    live = sql("SELECT id FROM jobs WHERE type = :t AND state IN ('waiting', 'delayed')", t=ADS)
    assert {str(r.id) for r in live} <= queued


def test_a_ticks_jobs_are_spread_over_the_window_at_the_same_offset_every_tick(processes, gh, sql):
    # Given 300 accounts and rnp-ads spread over 10 minutes
    accounts = seed_accounts(sql, 300)
    worker(processes, "worker", only_ads(spread_ms=600_000))

    def offsets(n: int) -> dict[uuid.UUID, int]:
        fan_out = wait_until(lambda: fan_out_done(sql, n), timeout=30, what=f"fan-out {n}")[-1]
        rows = sql(
            "SELECT account_id, state, resume_at, payload FROM jobs WHERE type = :t AND created_at >= :at",
            t=ADS,
            at=ticks[-1],
        )
        assert len(rows) == len(accounts)
        # (a job due within the test has run, and failed: no WB token; its payload says when it was due)
        assert all(datetime_to_ms(r.resume_at) == r.payload["dueAtMs"] for r in rows if r.state == "delayed")
        return {r.account_id: r.payload["dueAtMs"] - fan_out.payload[TICK_FIELD] for r in rows}

    # When the schedule ticks, its jobs end, and it ticks again
    ticks = [utcnow()]
    tick(gh)
    first = offsets(1)
    sql("UPDATE jobs SET state = 'completed' WHERE type = :t AND state <> 'failed'", t=ADS)
    ticks.append(utcnow())
    tick(gh)
    second = offsets(2)

    # Then each job is due within the window, at its account's offset, the same at both ticks
    assert second == first == {a: offset_ms(a, 600_000) for a in accounts}
    assert all(0 <= o < 600_000 for o in first.values())
    # … spread over the window, not bunched: every minute of it has some of the 300, none has most
    per_minute = [sum(1 for o in first.values() if o // 60_000 == m) for m in range(10)]
    assert min(per_minute) >= 10 and max(per_minute) <= 60, per_minute
    # … and the second tick's jobs wait on the delay queue for that moment
    assert gh.redis.hlen("gatehouse:wb-scheduled.DQ.msgs") >= len(accounts) - 10


@pytest.fixture
def sandbox():
    with running_sandbox(time_scale=1000, rows_per_day=2) as running:
        yield running


def hold_gate(gh, account: uuid.UUID) -> str:
    """A user job of the test holds the account's gate (as a long user import would)."""
    holder = owner(jt.USER_QUEUE, uuid.uuid4())
    acquired = gh.gate.acquire(
        str(account),
        holder,
        tier="user",
        lease_ms=120_000,
        wanted_ttl_ms=60_000,
        waiting_ttl_ms=60_000,
        first_wait_ms=datetime_to_ms(utcnow()),
    )
    assert acquired.proceed
    return holder


def test_a_spread_jobs_max_wait_counts_from_its_eta_not_from_the_tick(processes, gh, sql, sandbox):
    # Given an account whose ads sync is due at least 4 s after the tick (a 6 s window), a max wait
    # of 2 s, and the account's gate held by a user job all along
    account = next(
        a.id
        for a in (gh.account_handlers.create_account(f"shop-{i}", "seller-0") for i in range(200))
        if offset_ms(a.id, 6_000) >= 4_000
    )
    sql("UPDATE accounts SET active = (id = :a)", a=account)
    hold_gate(gh, account)
    env = {**only_ads(spread_ms=6_000, max_wait_ms=2_000), "GATE_POLL_DELAY_MS": "200",
           "WB_API_BASE_URL": sandbox.url, **scaled_limits(1000)}  # fmt: skip
    worker(processes, "worker", env)

    # When the schedule ticks
    tick(gh)
    [done] = wait_until(lambda: fan_out_done(sql), timeout=30, what="the fan-out")
    due = done.payload[TICK_FIELD] + offset_ms(account, 6_000)
    job = wait_until(
        lambda: (
            (r := sql("SELECT * FROM jobs WHERE type = :t", t=ADS)) and r[0].state == "completed" and r[0]
        ),
        timeout=30,
        what="the ads sync to give up",
    )

    # Then it waited its 2 s from the moment it was due (more than 4 s after it was created), then skipped
    assert job.result == {"skipped": True, "reason": "account-busy"}
    assert job.payload["dueAtMs"] == due and due - datetime_to_ms(job.created_at) >= 3_900
    waited = datetime_to_ms(job.finished_at) - due
    assert 2_000 <= waited < 6_000, waited


def test_after_three_skips_in_a_row_the_next_scheduled_job_waits_as_a_user_job_once(
    processes, gh, sql, sandbox
):
    # Given an account whose gate a long user job holds, and ads ticks whose syncs wait at most 300 ms
    account = gh.account_handlers.create_account("shop", "seller-0").id
    holder = hold_gate(gh, account)
    env = {**only_ads(spread_ms=0, max_wait_ms=300), "GATE_POLL_DELAY_MS": "100",
           "WB_API_BASE_URL": sandbox.url, **scaled_limits(1000)}  # fmt: skip
    worker(processes, "worker", env)

    def tick_and_wait(n: int, state: str = "completed"):
        tick(gh)
        wait_until(lambda: fan_out_done(sql, n), timeout=30, what=f"fan-out {n}")
        rows = sql("SELECT * FROM jobs WHERE type = :t ORDER BY created_at", t=ADS)
        assert len(rows) == n
        return wait_until(
            lambda: (r := gh.jobs.get(rows[-1].id)) and r.state == state and r, timeout=30, what=f"sync {n}"
        )

    # When three ticks' syncs give up waiting, one after another
    for n in (1, 2, 3):
        skipped = tick_and_wait(n)
        assert skipped.result == {"skipped": True, "reason": "account-busy"}
        assert gh.skip_streaks.of(ADS, [account]) == [n]

    # Then the fourth tick's sync waits for the gate with the user tier's priority: it wants the gate
    # (so no scheduled job may take it), is first in line, and does not give up after its max wait
    fourth = tick_and_wait(4, state="delayed")
    assert fourth.payload == {
        "maxWaitMs": 300,
        "dueAtMs": fourth.payload["dueAtMs"],
        "skipStreak": 3,
        "gateTier": "user",
    }
    me = owner(jt.RNP_ADS.queue, fourth.id)
    wait_until(
        lambda: gh.gate.inspect(str(account)).wanted == me, timeout=10, what="the sync to want the gate"
    )
    state = gh.gate.inspect(str(account))
    assert state.best_waiter == me and state.waiting[0].tier == "user"
    still = wait_until(
        lambda: (
            (r := gh.jobs.get(fourth.id)) and datetime_to_ms(utcnow()) - r.payload["dueAtMs"] > 1_500 and r
        ),
        timeout=10,
        what="five max waits to pass",
    )
    assert still.state == "delayed" and still.progress["phase"] == "waiting-account"

    # When the user job ends, the sync runs, and its account's streak starts again from nothing
    gh.gate.release(str(account), holder)
    ran = wait_until(
        lambda: (r := gh.jobs.get(fourth.id)) and r.state == "completed" and r,
        timeout=30,
        what="the sync to run",
    )
    assert ran.result["campaigns"] >= 1 and not ran.result.get("skipped")
    assert gh.skip_streaks.of(ADS, [account]) == [0]
    # … and the next tick's sync is an ordinary scheduled one again
    fifth = tick_and_wait(5)
    assert "gateTier" not in fifth.payload and "skipStreak" not in fifth.payload
    assert not fifth.result.get("skipped")


def test_a_second_sync_over_unchanged_wb_data_writes_no_row(processes, gh, sql, sandbox):
    # Given an account whose ads, stocks and cards were synced once
    account = gh.account_handlers.create_account("shop", "seller-0").id
    worker(processes, "worker", {"WB_API_BASE_URL": sandbox.url, **scaled_limits(1000)})
    kinds = (jt.RNP_ADS, jt.INVENTORY_SYNC, jt.CATALOG_SYNC)
    tables = ("wb_campaigns", "wb_campaign_stats", "wb_stocks", "wb_cards")

    def sync_all() -> None:
        ids = [gh.job_handlers.submit(kind, account_id=account)[0].id for kind in kinds]
        for job_id in ids:
            done = wait_until(
                lambda job_id=job_id: (r := gh.jobs.get(job_id)) and r.state in ("completed", "failed") and r,
                timeout=60,
                what="the sync",
            )
            assert done.state == "completed" and not done.result.get("skipped"), done

    def rows() -> dict[str, set]:
        return {
            t: {tuple(r) for r in sql(f"SELECT xmin::text, imported_at, data::text FROM {t}")} for t in tables
        }

    sync_all()
    before = rows()
    assert all(before.values()), {t: len(r) for t, r in before.items()}

    # When the same syncs run again over the same WB data
    sync_all()

    # Then no row was written (same row versions), and imported_at stayed where the data last changed
    assert rows() == before
