"""Seller analytics: stocks on WB warehouses and the sales funnel, both paged by ``offset``."""

from __future__ import annotations

from datetime import date
from typing import Any

from gatehouse_wb_sandbox.calls import Call, Invalid, Reply, body_object, id_list, integer, moment
from gatehouse_wb_sandbox.data import Product

STOCKS_MAX_LIMIT = 250_000
FUNNEL_MAX_LIMIT = 1_000
FUNNEL_DEFAULT_LIMIT = 50


def _offset_page(body: dict[str, Any], rows: list, high: int, default: int) -> list:
    limit = integer(body.get("limit"), "limit", default=default, low=1, high=high)
    offset = integer(body.get("offset"), "offset", default=0)
    return rows[offset : offset + limit]


def stocks(call: Call) -> Reply:
    body = body_object(call)
    nm_ids = set(id_list(body.get("nmIds"), "nmIds", high=1_000))
    chrt_ids = set(id_list(body.get("chrtIds"), "chrtIds", high=1_000))
    rows = [
        row
        for row in call.data.stocks
        if (not nm_ids or row["nmId"] in nm_ids) and (not chrt_ids or row["chrtId"] in chrt_ids)
    ]
    return Reply(200, {"data": {"items": _offset_page(body, rows, STOCKS_MAX_LIMIT, STOCKS_MAX_LIMIT)}})


def _percent(part: float, whole: float) -> int:
    return round(part / whole * 100) if whole else 0


def _funnel_row(call: Call, product: Product, first: date, last: date) -> dict[str, Any]:
    """One card's funnel for the period, from the orders and sales it had (sums in whole roubles)."""

    def within(row: dict) -> bool:
        return row["nmId"] == product.nm_id and first <= date.fromisoformat(row["date"][:10]) <= last

    placed = [row for row in call.data.orders if within(row)]
    bought = [row for row in call.data.sales if within(row) and row["saleID"].startswith("S")]
    cancelled = [row for row in placed if row["isCancel"]]
    order_sum = round(sum(row["priceWithDisc"] for row in placed))
    buyout_sum = round(sum(row["priceWithDisc"] for row in bought))
    cancel_sum = round(sum(row["priceWithDisc"] for row in cancelled))
    carts = len(placed) * 3 + len(placed) % 4
    opens = carts * 9 + product.nm_id % 17
    days = (last - first).days + 1
    stock = sum(row["quantity"] for row in call.data.stocks if row["nmId"] == product.nm_id)
    return {
        "product": {
            "nmId": product.nm_id,
            "title": product.title,
            "vendorCode": product.vendor_code,
            "brandName": product.brand,
            "subjectId": product.subject_id,
            "subjectName": product.subject,
            "tags": [],
            "productRating": 0,
            "feedbackRating": 0,
            "stocks": {"wb": stock, "mp": 0, "balanceSum": round(stock * product.price)},
        },
        "statistic": {
            "selected": {
                "period": {"start": first.isoformat(), "end": last.isoformat()},
                "openCount": opens,
                "cartCount": carts,
                "orderCount": len(placed),
                "orderSum": order_sum,
                "buyoutCount": len(bought),
                "buyoutSum": buyout_sum,
                "cancelCount": len(cancelled),
                "cancelSum": cancel_sum,
                "avgPrice": round(order_sum / len(placed)) if placed else 0,
                "avgOrdersCountPerDay": round(len(placed) / days, 2),
                "shareOrderPercent": 0,
                "addToWishlist": len(placed) + product.nm_id % 5,
                "timeToReady": {"days": 0, "hours": 0, "mins": 0},
                "localizationPercent": 0,
                "wbClub": {
                    "orderCount": 0,
                    "orderSum": 0,
                    "buyoutSum": 0,
                    "buyoutCount": 0,
                    "cancelSum": 0,
                    "cancelCount": 0,
                    "avgPrice": 0,
                    "buyoutPercent": 0,
                    "avgOrderCountPerDay": 0,
                },
                "conversions": {
                    "addToCartPercent": _percent(carts, opens),
                    "cartToOrderPercent": _percent(len(placed), carts),
                    "buyoutPercent": _percent(len(bought), len(placed)),
                },
            }
        },
    }


def funnel(call: Call) -> Reply:
    body = body_object(call)
    period = body.get("selectedPeriod")
    if not isinstance(period, dict):
        raise Invalid("selectedPeriod: field required")
    first = moment(period.get("start"), "selectedPeriod.start").date()
    last = moment(period.get("end"), "selectedPeriod.end").date()
    if first > last:
        raise Invalid("selectedPeriod: start must not be after end")
    nm_ids = set(id_list(body.get("nmIds"), "nmIds", high=FUNNEL_MAX_LIMIT))
    chosen = [p for p in call.data.products if not nm_ids or p.nm_id in nm_ids]
    page = _offset_page(body, chosen, FUNNEL_MAX_LIMIT, FUNNEL_DEFAULT_LIMIT)
    products = [_funnel_row(call, p, first, last) for p in page]
    return Reply(200, {"data": {"products": products, "currency": "RUB"}})
