"""(method, path) -> handler, WB rate-limit bucket and the service's error shapes.

Every WB host's paths are distinct, so one server answers them all (the client
points every host at it with WB_API_BASE_URL).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gatehouse_wb_sandbox import problems
from gatehouse_wb_sandbox.analytics import funnel, stocks
from gatehouse_wb_sandbox.calls import Call, Reply
from gatehouse_wb_sandbox.content import cards
from gatehouse_wb_sandbox.promotion import adverts, bids, fullstats, min_bids
from gatehouse_wb_sandbox.statistics import orders, report_detailed, report_legacy, sales

ErrorBody = Callable[[str, str], dict[str, Any]]


@dataclass(frozen=True)
class Route:
    handler: Callable[[Call], Reply]
    bucket: str
    origin: str  # the gateway's name in 401/429 bodies
    error: ErrorBody  # the service's 400 body


_STAT, _FIN, _ADV = "s2s-api-auth-stat", "s2s-api-auth-finance", "s2s-api-auth-adv"
_ANALYTICS, _CONTENT = "s2s-api-auth-analytics", "s2s-api-auth-content"

ROUTES: dict[tuple[str, str], Route] = {
    ("GET", "/api/v1/supplier/orders"): Route(orders, "orders", _STAT, problems.statistics_400),
    ("GET", "/api/v1/supplier/sales"): Route(sales, "sales", _STAT, problems.statistics_400),
    ("POST", "/api/finance/v1/sales-reports/detailed"): Route(
        report_detailed, "report", _FIN, problems.finance_400
    ),
    ("GET", "/api/v5/supplier/reportDetailByPeriod"): Route(
        report_legacy, "report", _STAT, problems.statistics_400
    ),
    ("GET", "/api/advert/v2/adverts"): Route(adverts, "adverts", _ADV, problems.advert_400),
    ("GET", "/adv/v3/fullstats"): Route(fullstats, "fullstats", _ADV, problems.advert_400),
    ("PATCH", "/api/advert/v1/bids"): Route(bids, "bids", _ADV, problems.advert_400),
    ("POST", "/api/advert/v1/bids/min"): Route(min_bids, "min_bids", _ADV, problems.advert_400),
    ("POST", "/api/analytics/v3/sales-funnel/products"): Route(
        funnel, "funnel", _ANALYTICS, problems.analytics_400
    ),
    ("POST", "/api/analytics/v1/stocks-report/wb-warehouses"): Route(
        stocks, "inventory", _ANALYTICS, problems.analytics_400
    ),
    ("POST", "/content/v2/get/cards/list"): Route(cards, "catalog", _CONTENT, problems.content_400),
}
