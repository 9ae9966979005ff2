"""Digitization imports (оцифровка): a seller's feeds and realization report for a period.

Both page through WB and save a checkpoint after every page, so a WB pause,
a retry or a crash resumes where the job stopped instead of re-importing.
"""

from __future__ import annotations

from typing import Any

from gatehouse.job_types import IMPORT_USER_FEEDS, IMPORT_USER_REPORT
from gatehouse.wb import client as wb
from gatehouse.wb import tables
from gatehouse.wb.tables import WbData
from gatehouse_worker.runtime import JobContext, job


@job(IMPORT_USER_FEEDS)
def import_user_feeds(ctx: JobContext, data: WbData) -> dict[str, Any]:
    """Orders and sales whose last change falls in [dateFrom, dateTo]."""
    since, until = ctx.payload["dateFrom"], f"{ctx.payload['dateTo']}T23:59:59"
    client = ctx.wb()
    return {
        feed: import_feed(ctx, data, client, feed, endpoint, dataset, since, until)
        for feed, endpoint, dataset in (
            ("orders", wb.ORDERS, tables.ORDERS),
            ("sales", wb.SALES, tables.SALES),
        )
    }


def import_feed(
    ctx: JobContext,
    data: WbData,
    client: wb.WbClient,
    feed: str,
    endpoint: wb.Endpoint,
    dataset: tables.Dataset,
    since: str,
    until: str,
    *,
    remember: bool = False,
) -> int:
    """Page a statistics feed by lastChangeDate; returns how many distinct rows were stored.

    A call returns the rows changed at or after the cursor, so the rows of the
    cursor's own timestamp come again; they are upserted again (harmless) but
    counted once. The checkpoint keeps the cursor, the count and those rows' keys;
    with ``remember`` the account's own cursor for the feed moves along too
    (the scheduled incremental sync starts from it next time).
    """
    state = ctx.checkpoint.get(feed) or {"cursor": since, "stored": 0, "boundary": [], "done": False}
    while not state["done"]:
        rows = client.call(endpoint, params={"dateFrom": state["cursor"], "flag": 0}) or []
        in_period = [r for r in rows if r["lastChangeDate"] <= until]
        data.upsert(dataset, ctx.job.account_id, in_period)
        seen = set(state["boundary"])
        state["stored"] += sum(1 for r in in_period if r[dataset.natural] not in seen)
        last = rows[-1]["lastChangeDate"] if rows else state["cursor"]
        state["done"] = not rows or last > until or last == state["cursor"]
        state["boundary"] = [r[dataset.natural] for r in in_period if r["lastChangeDate"] == last]
        state["cursor"] = last
        ctx.save_checkpoint({**ctx.checkpoint, feed: state})
        if remember:
            data.save_cursor(ctx.job.account_id, feed, last)
    return state["stored"]


@job(IMPORT_USER_REPORT)
def import_user_report(ctx: JobContext, data: WbData, report_page_rows: int) -> dict[str, Any]:
    client = ctx.wb()
    rows = import_report(
        ctx, data, client, ctx.payload["dateFrom"], ctx.payload["dateTo"], page_rows=report_page_rows
    )
    return {"reportRows": rows}


def import_report(
    ctx: JobContext, data: WbData, client: wb.WbClient, date_from: str, date_to: str, *, page_rows: int
) -> int:
    """The realization report for a period, page by page on the rrdId cursor until WB answers 204.

    Rows are stored whole as WB sends them (camelCase: SalesReportsDetailedRes)."""
    body = {"dateFrom": date_from, "dateTo": date_to, "limit": page_rows}
    state = ctx.checkpoint.get("report") or {"rrdId": 0, "rows": 0}
    while rows := client.call(wb.REPORT, body={**body, "rrdId": state["rrdId"]}):
        data.upsert(tables.REPORT, ctx.job.account_id, rows)
        state = {"rrdId": rows[-1]["rrdId"], "rows": state["rows"] + len(rows)}
        ctx.save_checkpoint({**ctx.checkpoint, "report": state})
    return state["rows"]
