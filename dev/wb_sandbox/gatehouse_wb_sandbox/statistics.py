"""Statistics feeds (orders, sales; statistics-api) and the realization report (finance-api).

Orders and sales page by ``lastChangeDate`` (``dateFrom`` = the last row's
value, ``>=``: that second's rows come again; ``[]`` = done), the report by
the body's ``rrdId`` (the last row's; 204 = done).
"""

from __future__ import annotations

from datetime import datetime

from gatehouse_wb_sandbox.calls import Call, Invalid, Reply, body_object, integer, moment
from gatehouse_wb_sandbox.data import changed_since, report_page

REPORT_MAX_LIMIT = 100_000


def _statistics(call: Call, rows: list[dict], keys: list[datetime]) -> Reply:
    since = moment(call.query.get("dateFrom"), "dateFrom")
    flag = call.query.get("flag", "0")
    if flag not in ("0", "1"):
        raise Invalid("flag: must be 0 or 1")
    if flag == "1":  # every row of that one day, whatever its lastChangeDate
        day = since.date().isoformat()
        return Reply(200, [row for row in rows if row["date"][:10] == day][: call.sandbox.config.page_size])
    return Reply(200, changed_since(rows, keys, since, call.sandbox.config.page_size))


def orders(call: Call) -> Reply:
    return _statistics(call, call.data.orders, call.data.order_keys)


def sales(call: Call) -> Reply:
    return _statistics(call, call.data.sales, call.data.sale_keys)


def report_detailed(call: Call) -> Reply:
    body = body_object(call)
    first_day = moment(body.get("dateFrom"), "dateFrom").date()
    last_day = moment(body.get("dateTo"), "dateTo").date()
    if first_day > last_day:
        raise Invalid("dateFrom: must not be after dateTo")
    rows = report_page(
        call.data,
        first_day,
        last_day,
        integer(body.get("rrdId"), "rrdId", default=0),
        integer(body.get("limit"), "limit", default=REPORT_MAX_LIMIT, low=1, high=REPORT_MAX_LIMIT),
    )
    return Reply(200, rows) if rows else Reply(204)
