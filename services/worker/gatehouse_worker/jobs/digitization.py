"""Digitization imports (оцифровка): a seller's feeds and realization report for a period."""

from __future__ import annotations

from typing import Any

from gatehouse.job_types import IMPORT_USER_FEEDS, IMPORT_USER_REPORT
from gatehouse.wb import client as wb
from gatehouse.wb import tables
from gatehouse_worker.runtime import JobContext, job

# Rows per report request (WB allows up to 100 000).
REPORT_PAGE = 100_000


@job(IMPORT_USER_FEEDS)
def import_user_feeds(ctx: JobContext) -> dict[str, Any]:
    """Orders and sales whose last change falls in [dateFrom, dateTo]."""
    since, until = ctx.payload["dateFrom"], f"{ctx.payload['dateTo']}T23:59:59"
    with ctx.wb() as client:
        return {
            "orders": import_feed(ctx, client, wb.ORDERS, tables.ORDERS, since, until),
            "sales": import_feed(ctx, client, wb.SALES, tables.SALES, since, until),
        }


def import_feed(
    ctx: JobContext, client: wb.WbClient, endpoint: wb.Endpoint, dataset: Any, since: str, until: str
) -> int:
    """Page a statistics feed by lastChangeDate; returns how many distinct rows were stored.

    Each call returns rows changed at or after the cursor, so a page repeats the
    previous page's last rows; they are upserted again (harmless) but not counted.
    """
    cursor, stored, previous = since, 0, set()
    keys = dataset[1]
    while True:
        rows = client.call(endpoint, params={"dateFrom": cursor, "flag": 0}) or []
        in_period = [r for r in rows if r["lastChangeDate"] <= until]
        tables.upsert(ctx.gatehouse.engine, dataset, ctx.job.account_id, in_period)
        page = {tuple(keys(r).values()) for r in in_period}
        stored += len(page - previous)
        previous = page
        last = rows[-1]["lastChangeDate"] if rows else cursor
        if not rows or last > until or last == cursor:
            return stored
        cursor = last


@job(IMPORT_USER_REPORT)
def import_user_report(ctx: JobContext) -> dict[str, Any]:
    """The realization report for the period, page by page on the rrdId cursor until WB answers 204."""
    body = {"dateFrom": ctx.payload["dateFrom"], "dateTo": ctx.payload["dateTo"], "limit": REPORT_PAGE}
    rrd_id, rows_written = 0, 0
    with ctx.wb() as client:
        while rows := client.call(wb.REPORT, body={**body, "rrdId": rrd_id}):
            rows_written += tables.upsert(ctx.gatehouse.engine, tables.REPORT, ctx.job.account_id, rows)
            rrd_id = rows[-1]["rrd_id"]
    return {"reportRows": rows_written}
