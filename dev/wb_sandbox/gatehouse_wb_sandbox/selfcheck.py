"""The start-up check: every route's sample answers validate against WB's YAML, or the sandbox does not start.

For each route, a fixed sample seller's requests (valid ones: they are checked
too) go to the handler of a small throwaway sandbox with the same seed and
anchor; each answer (200, and 204 for the report), the route's 400 body and
the gateway's 401 and 429 bodies are checked with ``contract.check_response``.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from gatehouse_wb_sandbox import contract, gateway, problems
from gatehouse_wb_sandbox.calls import Call, Reply
from gatehouse_wb_sandbox.data import dataset
from gatehouse_wb_sandbox.routes import ROUTES, Route
from gatehouse_wb_sandbox.state import Sandbox, SandboxConfig
from gatehouse_wb_sandbox.tokens import make_token

SAMPLE_SELLER = "sample-seller"
SAMPLE_REQUEST_ID = "0" * 32


class ContractError(ValueError):
    """A sample answer does not validate against WB's YAML; the message lists every violation."""


def _samples(sandbox: Sandbox, route: Route) -> list[tuple[dict[str, str], Any]]:
    """(query, body) pairs for the route, answered 200 (or 204) for the sample seller."""
    data = dataset(sandbox.spec, SAMPLE_SELLER)
    anchor, first = sandbox.spec.anchor, sandbox.spec.anchor - timedelta(days=sandbox.spec.history_days)
    week = {
        "start": (anchor - timedelta(days=7)).isoformat(),
        "end": (anchor - timedelta(days=1)).isoformat(),
    }
    campaign = next(c for c in data.campaigns if c.status in (4, 9, 11))
    nm_id = campaign.nm_ids[0]
    placement = "combined" if campaign.bid_type == "unified" else "search"
    match route.path:
        case "/api/v1/supplier/orders" | "/api/v1/supplier/sales":
            return [({"dateFrom": (anchor - timedelta(days=3)).isoformat(), "flag": "0"}, None)]
        case "/api/finance/v1/sales-reports/detailed":
            period = {"dateFrom": first.isoformat(), "dateTo": anchor.isoformat()}
            return [({}, {**period, "limit": 20, "rrdId": 0}), ({}, {**period, "rrdId": data.report_ids[-1]})]
        case "/api/advert/v2/adverts":
            return [({}, None)]
        case "/adv/v3/fullstats":
            ids = ",".join(str(c.advert_id) for c in data.campaigns)
            return [({"ids": ids, "beginDate": week["start"], "endDate": week["end"]}, None)]
        case "/api/advert/v1/bids":
            nm_bid = {"nm_id": nm_id, "bid_kopecks": 10_000, "placement": placement}
            return [({}, {"bids": [{"advert_id": campaign.advert_id, "nm_bids": [nm_bid]}]})]
        case "/api/advert/v1/bids/min":
            body = {
                "advert_id": campaign.advert_id,
                "nm_ids": [nm_id],
                "payment_type": campaign.payment_type,
                "placement_types": ["combined", "search", "recommendation"],
            }
            return [({}, body)]
        case "/api/analytics/v3/sales-funnel/products":
            return [({}, {"selectedPeriod": week, "limit": 5})]
        case "/api/analytics/v1/stocks-report/wb-warehouses":
            return [({}, {"limit": 20})]
        case "/content/v2/get/cards/list":
            return [({}, {"settings": {"cursor": {"limit": 5}, "filter": {"withPhoto": -1}}})]
    return [({}, None)]  # /ping, seller-info


def _check(route: Route, reply: Reply) -> list[str]:
    return contract.check_response(
        route.host, route.method, route.path, reply.status, reply.body, reply.content_type
    )


def route_violations(sandbox: Sandbox, route: Route) -> list[str]:
    """Everything about the route's sample requests and answers that breaks WB's YAML."""
    token = make_token(SAMPLE_SELLER)
    found: list[str] = []
    for query, body in _samples(sandbox, route):
        found += contract.check_request(route.host, route.method, route.path, query, body, token)
        found += _check(route, route.handler(Call(sandbox, SAMPLE_SELLER, query, body)))
    if route.error is not None:
        found += _check(route, gateway.bad_request(route, "sample violation", SAMPLE_REQUEST_ID))
    found += _check(
        route,
        Reply(
            401,
            problems.gateway(
                401, "unauthorized", "token expired", origin=route.origin, request_id=SAMPLE_REQUEST_ID
            ),
            problems.PROBLEM,
        ),
    )
    limit = sandbox.limits[route.bucket]
    found += _check(route, gateway.too_many(route, SAMPLE_REQUEST_ID, 1.0, 1.0, limit.burst, exact=False))
    return [f"{route.host} {route.method} {route.path}: {line}" for line in found]


def verify(sandbox: Sandbox) -> None:
    """Raise ContractError unless every route's sample answers validate (a throwaway sandbox serves them)."""
    sample = Sandbox(SandboxConfig(anchor=sandbox.spec.anchor, seed=sandbox.config.seed, rows_per_day=2))
    found = [line for route in ROUTES.values() for line in route_violations(sample, route)]
    if found:
        raise ContractError("answers that break WB's OpenAPI YAML:\n  " + "\n  ".join(found))
