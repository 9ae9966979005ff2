"""Mixed WB load with the gate and token buckets vs with both switched off.

Five sandbox sellers (WB's limits at 1/100 of their periods), each with a
feeds import, a report import and an autobidder sync from the API path plus
every scheduled sync: 40 jobs on one in-process worker. Prints WB calls, 429s
and makespan of both runs, and their ratios.
"""

from __future__ import annotations

import time

from sqlalchemy import text

from bench.support import Result, bench_settings, running_worker
from gatehouse import job_types as jt
from gatehouse.schedules import schedules
from gatehouse.wb.limits import WB_LIMITS
from gatehouse_worker.wiring import build
from tests.support.wb_sandbox import running_sandbox

SCALE = 100
SELLERS = [f"bench-{i}" for i in range(5)]
NO_LIMITS = {
    name: {"burst": 1_000_000}
    for name in ("orders", "sales", "report", "adverts", "fullstats", "inventory", "catalog")
}


def run(settings, sandbox) -> dict[str, float]:
    # Every tick's jobs due at once (unspread): the bench measures the gate and the limits, not the spread.
    unspread = {s.name: {"spread_ms": 0} for s in schedules({}).values() if s.per_account}
    gh = build(settings.model_copy(update={"schedules": unspread}))
    with gh.engine.begin() as conn:
        conn.execute(text("TRUNCATE jobs, accounts CASCADE"))
    gh.redis.flushdb()
    sandbox.reset()
    accounts = [gh.account_handlers.create_account(s, s).id for s in SELLERS]
    start = time.perf_counter()
    with running_worker(gh.broker, threads=8):
        period = {"dateFrom": "2026-09-01", "dateTo": "2026-11-29"}
        for account in accounts:
            gh.job_handlers.submit(jt.IMPORT_USER_FEEDS, account_id=account, payload=period)
            gh.job_handlers.submit(jt.IMPORT_USER_REPORT, account_id=account, payload=period)
            gh.job_handlers.submit(jt.AUTOBIDDER_SYNC_USER, account_id=account)
        for schedule in schedules({}).values():
            if schedule.per_account:  # the WB syncs (not the sweeps)
                gh.fan_out_handlers.tick(schedule)  # its fan-out job runs on the worker
        with gh.engine.connect() as conn:
            while conn.execute(
                text("SELECT count(*) FROM jobs WHERE state IN ('waiting','active','delayed')")
            ).scalar():
                conn.rollback()
                time.sleep(0.05)
        makespan = time.perf_counter() - start
    log = sandbox.log()
    gh.close()
    return {"calls": len(log), "429": sum(e["status"] == 429 for e in log), "makespan": makespan}


def main() -> list[Result]:
    with (
        running_sandbox(time_scale=SCALE, rows_per_day=3) as sandbox,
        bench_settings(wb_api_base_url=sandbox.url, wb_report_page_rows=40) as base,
    ):
        scaled = {name: {"period_ms": period / SCALE} for name, (period, _, _) in WB_LIMITS.items()}
        on = run(base.model_copy(update={"wb_limits": scaled}), sandbox)
        off = run(base.model_copy(update={"gate_enabled": False, "wb_limits": NO_LIMITS}), sandbox)
    for label, r in (("gate + buckets", on), ("both off      ", off)):
        print(
            f"{label}: {r['calls']:4.0f} WB calls, {r['429']:3.0f} × 429 ({r['429'] / r['calls']:.1%}), makespan {r['makespan']:.1f} s"
        )
    print(
        f"ratios off/on: 429s {off['429'] / max(on['429'], 1):.1f}×, WB calls {off['calls'] / on['calls']:.2f}, "
        f"makespan {off['makespan'] / on['makespan']:.2f}"
    )
    name = "bench_wb_load"
    return [
        Result(name, "429s off/on", off["429"] / max(on["429"], 1)),
        Result(name, "WB 429 share, gate + buckets", on["429"] / on["calls"] * 100, unit="%"),
        Result(name, "WB calls off/on", off["calls"] / on["calls"]),
        Result(name, "makespan off/on", off["makespan"] / on["makespan"]),
    ]


if __name__ == "__main__":
    main()
