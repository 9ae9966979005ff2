"""WB's documented rate limits per seller account, and the ones our client keeps to.

``WB_LIMITS`` holds the Personal/Service-token limits per WB bucket, as WB's
OpenAPI YAML gives them (tests/contract holds the table to it): a bucket holds
``burst`` requests and refills ``limit`` per ``period_ms``. The WB sandbox
serves these same limits. WB_LIMITS (the setting, JSON) overrides entries for
our client.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from gatehouse.wb.hosts import HOST_LABELS

# bucket -> (period_ms, limit, burst), Personal/Service token limits: the `description_limit`
# tables of WB's OpenAPI YAML (snapshot 2026-07-23; tests/contract checks them against it).
WB_LIMITS: dict[str, tuple[int, int, int]] = {
    "orders": (60_000, 1, 10),  # GET statistics-api /api/v1/supplier/orders
    "sales": (60_000, 1, 1),  # GET statistics-api /api/v1/supplier/sales (its own bucket; burst 1)
    "report": (60_000, 1, 1),  # POST finance-api /api/finance/v1/sales-reports/detailed
    "adverts": (1_000, 5, 5),  # GET advert-api /api/advert/v2/adverts
    "fullstats": (60_000, 3, 1),  # GET advert-api /adv/v3/fullstats (20 s interval)
    "bids": (1_000, 5, 5),  # PATCH advert-api /api/advert/v1/bids
    "min_bids": (60_000, 20, 5),  # POST advert-api /api/advert/v1/bids/min
    "funnel": (60_000, 3, 3),  # POST seller-analytics-api /api/analytics/v3/sales-funnel/products
    "inventory": (60_000, 3, 1),  # POST seller-analytics-api /api/analytics/v1/stocks-report/wb-warehouses
    "catalog": (60_000, 100, 5),  # POST content-api /content/v2/get/cards/list
    "seller_info": (60_000, 1, 10),  # GET common-api /api/v1/seller-info
    # GET /ping: "at most 3 per 30 s" (prose; burst taken as 3) on each host, so a bucket per host
    # (account-verify only; WB blocks it when it is called on a timer).
    **{f"ping:{label}": (30_000, 3, 3) for label in HOST_LABELS.values()},
}


@dataclass(frozen=True)
class Limit:
    period_ms: float
    limit: int
    burst: int


def client_limits(overrides: dict[str, dict[str, Any]], headroom: float = 0.0) -> dict[str, Limit]:
    """WB_LIMITS with the setting's entries merged over them (an entry may give some fields).

    ``headroom`` stretches every period: our buckets refill that much slower
    than WB's, so two calls granted one interval apart cannot reach WB closer
    together than that because of network jitter.
    """
    limits = {name: Limit(*values) for name, values in WB_LIMITS.items()}
    for name, entry in overrides.items():
        if name not in limits:
            raise ValueError(f"WB_LIMITS: unknown bucket {name!r} (known: {', '.join(limits)})")
        limits[name] = replace(limits[name], **entry)
    return {
        name: Limit(float(lim.period_ms) * (1 + headroom), int(lim.limit), int(lim.burst))
        for name, lim in limits.items()
    }
