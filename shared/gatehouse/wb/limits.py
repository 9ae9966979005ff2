"""WB's documented rate limits per seller account, and the ones our client keeps to.

``WB_LIMITS`` holds the Personal/Service-token limits per WB bucket (see the
WB API reference): a bucket holds ``burst`` requests and refills ``limit``
per ``period_ms``. The WB sandbox serves these same limits, so the two cannot
drift apart. WB_LIMITS (the setting, JSON) overrides entries for our client.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from gatehouse.wb.hosts import HOST_LABELS

# bucket -> (period_ms, limit, burst), Personal/Service token limits.
WB_LIMITS: dict[str, tuple[int, int, int]] = {
    "orders": (60_000, 1, 10),  # GET /api/v1/supplier/orders
    "sales": (60_000, 1, 10),  # GET /api/v1/supplier/sales (its own bucket, not the orders one)
    "report": (60_000, 1, 1),  # finance sales-reports/detailed and legacy reportDetailByPeriod share it
    "adverts": (1_000, 5, 5),  # GET /api/advert/v2/adverts
    "fullstats": (60_000, 3, 1),  # GET /adv/v3/fullstats (20 s interval)
    "bids": (1_000, 5, 5),  # PATCH /api/advert/v1/bids
    "min_bids": (60_000, 20, 5),  # POST /api/advert/v1/bids/min
    "funnel": (60_000, 3, 3),  # POST /api/analytics/v3/sales-funnel/products
    "inventory": (60_000, 3, 1),  # POST /api/analytics/v1/stocks-report/wb-warehouses
    "catalog": (60_000, 100, 5),  # POST /content/v2/get/cards/list
    "seller_info": (60_000, 1, 10),  # GET common-api /api/v1/seller-info
    # GET /ping: 3 per 30 s on each host (account-verify only; WB blocks it on a timer).
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
