"""Scheduled syncs, one per active account from a fan-out tick (gatehouse.schedules).

The gated ones (digitization, RNP ads and finance) share the account's gate
with the user jobs and give way to them; inventory and catalog use other WB
buckets and run beside them.
"""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

from gatehouse import job_types as jt
from gatehouse.wb import client as wb
from gatehouse.wb import tables
from gatehouse.wb.tables import WbData
from gatehouse_worker.jobs.autobidder import sync_stats
from gatehouse_worker.jobs.digitization import import_feed, import_report
from gatehouse_worker.runtime import JobContext, job

FIRST_SYNC_DAYS = 7  # an account's first incremental sync starts this far back
BACKFILL_CHUNK_DAYS, BACKFILL_HISTORY_DAYS = 7, 90
FINANCE_DAYS = 7  # the realization report is weekly
STOCKS_PAGE, CARDS_PAGE = 1_000, 100


@job(jt.SYNC_INCREMENTAL)
def sync_incremental(ctx: JobContext, data: WbData) -> dict[str, Any]:
    """Orders and sales changed since the account's stored cursors."""
    start = (date.today() - timedelta(days=FIRST_SYNC_DAYS)).isoformat()
    counts = {}
    client = ctx.wb()
    for feed, endpoint, dataset in (
        ("orders", wb.ORDERS, tables.ORDERS),
        ("sales", wb.SALES, tables.SALES),
    ):
        since = data.read_cursor(ctx.job.account_id, feed) or start
        counts[feed] = import_feed(ctx, data, client, feed, endpoint, dataset, since, "9999", remember=True)
    return counts


@job(jt.SYNC_BACKFILL)
def sync_backfill(ctx: JobContext, data: WbData, report_page_rows: int) -> dict[str, Any]:
    """One chunk of the report further back than the account's backfill has reached."""
    account = ctx.job.account_id
    reached = data.read_cursor(account, "report-backfill")
    end = date.fromisoformat(reached) - timedelta(days=1) if reached else date.today() - timedelta(days=1)
    if end < date.today() - timedelta(days=BACKFILL_HISTORY_DAYS):
        return {"done": True}
    begin = end - timedelta(days=BACKFILL_CHUNK_DAYS - 1)
    client = ctx.wb()
    rows = import_report(ctx, data, client, begin.isoformat(), end.isoformat(), page_rows=report_page_rows)
    data.save_cursor(account, "report-backfill", begin.isoformat())
    return {"from": begin.isoformat(), "to": end.isoformat(), "reportRows": rows}


@job(jt.RNP_ADS)
def rnp_ads(ctx: JobContext, data: WbData) -> dict[str, Any]:
    """Campaigns and their fullstats of yesterday and today (РНП ads)."""
    client = ctx.wb()
    campaigns = (client.call(wb.ADVERTS) or {}).get("adverts", [])
    data.upsert(tables.CAMPAIGNS, ctx.job.account_id, campaigns)
    days = sync_stats(ctx, data, client, campaigns, date.today() + timedelta(days=1), days=2)
    return {"campaigns": len(campaigns), "statDays": days}


@job(jt.RNP_FINANCE)
def rnp_finance(ctx: JobContext, data: WbData, report_page_rows: int) -> dict[str, Any]:
    """The last week's realization report (РНП finance)."""
    end = date.today() - timedelta(days=1)
    begin = (end - timedelta(days=FINANCE_DAYS - 1)).isoformat()
    client = ctx.wb()
    rows = import_report(ctx, data, client, begin, end.isoformat(), page_rows=report_page_rows)
    return {"reportRows": rows}


@job(jt.INVENTORY_SYNC)
@job(jt.INVENTORY_SYNC_USER)  # the same sync, asked for by a user (POST …/inventory/sync)
def inventory_sync(ctx: JobContext, data: WbData) -> dict[str, Any]:
    """Stocks on WB warehouses, page by page on the offset."""
    offset = ctx.checkpoint.get("offset", 0)
    client = ctx.wb()
    while True:
        answer = client.call(wb.STOCKS, body={"limit": STOCKS_PAGE, "offset": offset}) or {}
        items = answer.get("data", {}).get("items", [])
        data.upsert(tables.STOCKS, ctx.job.account_id, items)
        offset += len(items)
        ctx.save_checkpoint({"offset": offset})
        if len(items) < STOCKS_PAGE:
            return {"stocks": offset}


@job(jt.CATALOG_SYNC)
def catalog_sync(ctx: JobContext, data: WbData) -> dict[str, Any]:
    """Product cards, page by page on the (updatedAt, nmID) cursor until a short page."""
    state = ctx.checkpoint or {"cursor": {}, "cards": 0}
    client = ctx.wb()
    while True:
        cursor = {"limit": CARDS_PAGE, **state["cursor"]}
        answer = (
            client.call(wb.CARDS, body={"settings": {"cursor": cursor, "filter": {"withPhoto": -1}}}) or {}
        )
        cards = answer.get("cards", [])
        data.upsert(tables.CARDS, ctx.job.account_id, cards)
        last = answer.get("cursor") or {}
        state = {
            "cursor": {"updatedAt": last.get("updatedAt"), "nmID": last.get("nmID")},
            "cards": state["cards"] + len(cards),
        }
        ctx.save_checkpoint(state)
        if last.get("total", 0) < CARDS_PAGE:
            return {"cards": state["cards"]}
