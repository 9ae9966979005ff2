"""(host, method, path) -> handler, WB rate-limit bucket and the service's error shapes.

Hosts are WB's host labels (``contract.HOSTS``). One server answers them all:
a call either names its host as the first path segment
(``/finance-api/api/finance/v1/sales-reports/detailed``: how the client points
every host at the sandbox) or leaves it out, and then the host is the one
serving that path (``/ping`` unprefixed: common-api).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gatehouse_wb_sandbox import problems
from gatehouse_wb_sandbox.analytics import funnel, stocks
from gatehouse_wb_sandbox.calls import Call, Reply
from gatehouse_wb_sandbox.content import cards
from gatehouse_wb_sandbox.contract import HOSTS, PING, PING_HOST
from gatehouse_wb_sandbox.general import ping, seller_info
from gatehouse_wb_sandbox.promotion import adverts, bids, fullstats, min_bids
from gatehouse_wb_sandbox.statistics import orders, report_detailed, sales

ErrorBody = Callable[[str, str], dict[str, Any]]

# The token category each host needs (None: any token will do).
HOST_CATEGORY: dict[str, str | None] = {
    "statistics-api": "statistics",
    "finance-api": "finance",
    "advert-api": "promotion",
    "seller-analytics-api": "analytics",
    "content-api": "content",
    "common-api": None,
}
# The gateway's name per host in 401/429 bodies.
ORIGINS = {
    "statistics-api": "s2s-api-auth-stat",
    "finance-api": "s2s-api-auth-finance",
    "advert-api": "s2s-api-auth-adv",
    "seller-analytics-api": "s2s-api-auth-analytics",
    "content-api": "s2s-api-auth-content",
    "common-api": "s2s-api-auth-common",
}


@dataclass(frozen=True)
class Route:
    host: str
    method: str
    path: str
    handler: Callable[[Call], Reply]
    bucket: str
    error: ErrorBody | None = None  # the service's 400 body (None: the operation documents no 400)
    error_type: str = problems.JSON

    @property
    def origin(self) -> str:
        return ORIGINS[self.host]

    @property
    def category(self) -> str | None:
        return HOST_CATEGORY[self.host]

    @property
    def key(self) -> tuple[str, str, str]:
        return self.host, self.method, self.path


def _route(
    host: str, method: str, path: str, handler: Callable[[Call], Reply], bucket: str, *error: Any
) -> tuple[tuple[str, str, str], Route]:
    route = Route(host, method, path, handler, bucket, *error)
    return route.key, route


_STAT_400 = (problems.statistics_400,)
_FIN_400 = (problems.finance_400, problems.PROBLEM)
_ADV_400 = (problems.advert_400,)
_ANALYTICS_400 = (problems.analytics_400,)

ROUTES: dict[tuple[str, str, str], Route] = dict(
    [
        _route("statistics-api", "GET", "/api/v1/supplier/orders", orders, "orders", *_STAT_400),
        _route("statistics-api", "GET", "/api/v1/supplier/sales", sales, "sales", *_STAT_400),
        _route(
            "finance-api",
            "POST",
            "/api/finance/v1/sales-reports/detailed",
            report_detailed,
            "report",
            *_FIN_400,
        ),
        _route("advert-api", "GET", "/api/advert/v2/adverts", adverts, "adverts", *_ADV_400),
        _route("advert-api", "GET", "/adv/v3/fullstats", fullstats, "fullstats", *_ADV_400),
        _route("advert-api", "PATCH", "/api/advert/v1/bids", bids, "bids", *_ADV_400),
        _route("advert-api", "POST", "/api/advert/v1/bids/min", min_bids, "min_bids", *_ADV_400),
        _route(
            "seller-analytics-api",
            "POST",
            "/api/analytics/v3/sales-funnel/products",
            funnel,
            "funnel",
            *_ANALYTICS_400,
        ),
        _route(
            "seller-analytics-api",
            "POST",
            "/api/analytics/v1/stocks-report/wb-warehouses",
            stocks,
            "inventory",
            *_ANALYTICS_400,
        ),
        _route("content-api", "POST", "/content/v2/get/cards/list", cards, "catalog", problems.content_400),
        _route("common-api", "GET", "/api/v1/seller-info", seller_info, "seller_info"),
        # WB's ping limit holds per host: a bucket per host (gatehouse.wb.limits).
        *(_route(host, "GET", PING, ping, f"ping:{host}") for host in HOSTS),
    ]
)
_HOST_OF_PATH = {path: host for host, _, path in ROUTES if path != PING} | {PING: PING_HOST}


def locate(path: str) -> tuple[str | None, str]:
    """(host, WB path) of a request path: a leading host label, or else the host serving that path
    (None: no host serves it)."""
    first, _, rest = path.lstrip("/").partition("/")
    if first in HOSTS:
        return first, "/" + rest
    return _HOST_OF_PATH.get(path), path


def served_methods(host: str | None, path: str) -> list[str]:
    """The methods a host serves on a path ([]: an unknown path)."""
    return [method for h, method, p in ROUTES if h == host and p == path]
