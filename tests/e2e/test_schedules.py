"""Scheduled syncs: periodiq ticks, fan-outs, two schedulers, the admin view, and a scheduled job yielding to a user job."""

from __future__ import annotations

import json
import uuid

import httpx
import pytest

from gatehouse.schedules import DEFAULTS
from tests.conftest import ADMIN_TOKEN
from tests.support.processes import wait_until
from tests.support.wb_sandbox import quiet_schedules, running_sandbox, scaled_limits

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
ONLY_ADS_EVERY_MINUTE = json.dumps(
    {
        "rnp-ads": {"cron": "* * * * *", "spread_ms": 0},  # its syncs due at the tick
        **{s.name: {"enabled": False} for s in DEFAULTS if s.name != "rnp-ads"},
    }
)


@pytest.fixture
def sandbox():
    with running_sandbox(time_scale=1000, rows_per_day=2) as running:
        yield running


def accounts(gh, n: int) -> list[uuid.UUID]:
    return [gh.account_handlers.create_account(f"shop-{i}", f"seller-{i}").id for i in range(n)]


def jobs_of(sql, job_type: str) -> list:
    return sql("SELECT id, account_id, state, result FROM jobs WHERE type = :t", t=job_type)


def test_two_schedulers_send_each_tick_once_and_its_fan_out_makes_one_job_per_account(
    processes, gh, sql, sandbox
):
    # Given three accounts and two schedulers started in the same minute (ads every minute, the rest off)
    accounts(gh, 3)
    env = {"SCHEDULES": ONLY_ADS_EVERY_MINUTE}
    schedulers = [processes.start(f"scheduler-{i}", "gatehouse-scheduler", env=env) for i in range(2)]

    # When both have handled a tick (a start near a minute's end may give two)
    def ticks() -> dict[str, list[str]] | None:
        by_minute: dict[str, list[str]] = {}
        for scheduler in schedulers:
            for line in scheduler.log().splitlines():
                if "schedule:rnp-ads for " in line:
                    by_minute.setdefault(line.split("schedule:rnp-ads for ", 1)[1].split(" ")[0], []).append(
                        line
                    )
        return by_minute if any(len(lines) == 2 for lines in by_minute.values()) else None

    by_minute = wait_until(ticks, timeout=30, what="both schedulers to handle a tick")

    # Then each tick was sent by one and seen as sent by the other: one fan-out message per tick
    for lines in (lines for lines in by_minute.values() if len(lines) == 2):
        assert sum("Scheduling" in ln for ln in lines) == 1, lines
        assert sum("was sent by another scheduler" in ln for ln in lines) == 1, lines
    assert gh.redis.llen("gatehouse:schedules") == len(by_minute)

    # … and, the schedulers stopped, a worker turns the ticks into ads syncs: one live per account at a time
    for scheduler in schedulers:
        scheduler.kill_tree()
    processes.start("worker", "gatehouse-worker", "--processes", "1", "--threads", "4",
                    env={"WB_API_BASE_URL": sandbox.url, **scaled_limits(1000), **env})  # fmt: skip

    def synced():
        rows = jobs_of(sql, "rnp:ads-sync-account")
        return (
            gh.redis.llen("gatehouse:schedules") == 0
            and rows
            and all(r.state == "completed" for r in rows)
            and rows
        )

    rows = wait_until(synced, timeout=30, what="the ads syncs")
    if len(by_minute) == 1:
        assert len(rows) == 3  # one tick: one ads sync per account
    assert {r.account_id for r in rows} == {r[0] for r in sql("SELECT DISTINCT account_id FROM wb_campaigns")}
    assert len({r.account_id for r in rows}) == 3


def test_admin_lists_schedules_and_fires_a_tick_through_the_same_fan_out(processes, gh, sql, sandbox):
    ids = accounts(gh, 2)
    # (the worker fans the ticks out: with its jobs due at once)
    env = {"WB_API_BASE_URL": sandbox.url, **scaled_limits(1000), **quiet_schedules()}
    processes.start("worker", "gatehouse-worker", "--processes", "1", "--threads", "4", env=env)
    processes.start("scheduler", "gatehouse-scheduler", env=quiet_schedules())
    _, url = processes.api(env={"BACKEND_ROLE": "api", **quiet_schedules()})

    listed = wait_until(
        lambda: (r := httpx.get(f"{url}/v1/admin/schedules", headers=ADMIN).json()["items"]) and all(i["nextRun"] for i in r) and r,
        what="the scheduler to publish next runs",
    )  # fmt: skip
    by_name = {i["name"]: i for i in listed}
    assert set(by_name) == {
        "token-expiry",
        "digitization-incremental",
        "digitization-backfill",
        "rnp-ads",
        "rnp-finance",
        "inventory",
        "catalog",
        "cart-abandonment",
        "price-list-status",
        "rfq-expiry",
        "prune",
    }
    assert by_name["rnp-ads"] == {
        **by_name["rnp-ads"],
        "jobType": "rnp:ads-sync-account",
        "cron": "0 0 1 1 *",
        "maxWaitMs": 300_000,
        "perAccount": True,
        "enabled": True,
    }
    assert by_name["inventory"]["maxWaitMs"] is None  # other WB buckets: not gated

    # When an admin fires the inventory and catalog ticks, twice
    for name in ("inventory", "catalog", "inventory"):
        assert httpx.post(f"{url}/v1/admin/schedules/{name}/run", headers=ADMIN).status_code == 202
    assert httpx.post(f"{url}/v1/admin/schedules/nope/run", headers=ADMIN).status_code == 404

    # Then each account gets its syncs, with no pile-up of a second live job, and the data lands
    def synced():
        rows = jobs_of(sql, "inventory-sync") + jobs_of(sql, "catalog-sync")
        return len(rows) >= 4 and all(r.state == "completed" for r in rows)

    wait_until(synced, timeout=30, what="inventory and catalog syncs")
    for table in ("wb_stocks", "wb_cards"):
        assert {r[0] for r in sql(f"SELECT DISTINCT account_id FROM {table}")} == set(ids)
    last = {
        i["name"]: i["lastRun"] for i in httpx.get(f"{url}/v1/admin/schedules", headers=ADMIN).json()["items"]
    }
    assert last["inventory"] and last["catalog"] and last["rnp-ads"] is None


def test_a_scheduled_holder_yields_at_its_wb_pause_to_a_waiting_user_job(processes, gh, sandbox):
    # Given a scheduled finance sync holding the gate, paging its report slowly
    env = {
        "WB_API_BASE_URL": sandbox.url,
        **scaled_limits(1000),
        "WB_REPORT_PAGE_ROWS": "10",
        "GATE_POLL_DELAY_MS": "300",
    }
    processes.start("worker", "gatehouse-worker", "--processes", "1", "--threads", "4", env=env)
    [account] = accounts(gh, 1)
    from gatehouse.job_types import AUTOBIDDER_SYNC_USER, RNP_FINANCE

    sandbox.faults(latency_ms=40)
    scheduled = gh.job_handlers.submit(RNP_FINANCE, account_id=account, payload={"maxWaitMs": 600_000})[0].id
    wait_until(lambda: gh.jobs.get(scheduled).started_at, what="the scheduled sync to start")
    # … when a user job asks for the account and WB then says 429 to the scheduled sync
    user = gh.job_handlers.submit(AUTOBIDDER_SYNC_USER, account_id=account)[0].id
    wait_until(lambda: gh.gate.inspect(str(account)).wanted, what="the user job to want the gate")
    sandbox.faults(force_429=[{"seller": "seller-0", "bucket": "report", "nth": 1, "retry_s": 1.0}])

    # Then the scheduled sync yields at that pause and the user job runs before it resumes
    wait_until(lambda: gh.jobs.get(user).state == "completed", timeout=30, what="the user job")
    assert gh.jobs.get(scheduled).state == "delayed"  # still pausing: the user job did not wait it out
    wait_until(lambda: gh.jobs.get(scheduled).state == "completed", timeout=30, what="the scheduled sync")
    sync = gh.jobs.get(scheduled)
    assert sync.attempt == 1 and sync.result["reportRows"] > 0
