"""Every sandbox route, every status it sends (200 paging steps, 204, 400, 401, 429), over real HTTP,
validates against its operation's response schema in WB's OpenAPI YAML."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from gatehouse.wb.limits import WB_LIMITS
from gatehouse_wb_sandbox import contract
from gatehouse_wb_sandbox.contract import PING
from gatehouse_wb_sandbox.data import HISTORY_DAYS
from gatehouse_wb_sandbox.routes import ROUTES, Route
from gatehouse_wb_sandbox.tokens import make_token
from tests.support.wb_sandbox import RunningSandbox, running_sandbox

ANCHOR = date(2026, 6, 1)
FIRST_DAY = ANCHOR - timedelta(days=HISTORY_DAYS)
WEEK = {"start": "2026-05-20", "end": "2026-05-26"}


@pytest.fixture(scope="module")
def loose(tmp_path_factory) -> Iterator[RunningSandbox]:
    path: Path = tmp_path_factory.mktemp("wb") / "loose.json"
    path.write_text(json.dumps({name: {"burst": 10_000} for name in WB_LIMITS}))
    with running_sandbox(anchor=ANCHOR, rows_per_day=3, page_size=60, limits_file=path) as sb:
        yield sb


@pytest.fixture(scope="module")
def tight(tmp_path_factory) -> Iterator[RunningSandbox]:
    """Every bucket holds one call an hour: the second call of a seller is a 429."""
    path: Path = tmp_path_factory.mktemp("wb") / "tight.json"
    path.write_text(
        json.dumps({name: {"burst": 1, "limit": 1, "period_ms": 3_600_000} for name in WB_LIMITS})
    )
    with running_sandbox(anchor=ANCHOR, rows_per_day=1, limits_file=path) as sb:
        yield sb


class Checked:
    """Sends calls to one route and checks each answer against WB's YAML."""

    def __init__(self, sandbox: RunningSandbox, route: Route, seller: str, token: str | None = None) -> None:
        self.route = route
        self.client = sandbox.client(seller, token=token, host=route.host)
        self.statuses: list[int] = []

    def __call__(self, query: dict[str, Any] | None = None, body: Any = None) -> httpx.Response:
        route = self.route
        response = self.client.request(route.method, route.path, params=query, json=body)
        violations = contract.check_response(
            route.host,
            route.method,
            route.path,
            response.status_code,
            response.content,
            response.headers.get("content-type"),
        )
        assert violations == [], (route.key, response.status_code, response.text[:500])
        self.statuses.append(response.status_code)
        return response


def _page_feed(call: Checked) -> None:
    date_from = FIRST_DAY.isoformat()
    while rows := call({"dateFrom": date_from}).json():
        date_from = rows[-1]["lastChangeDate"]
    call({"dateFrom": "yesterday"})  # the handler's 400
    call({})  # the contract's 400: dateFrom is required


def _page_report(call: Checked) -> None:
    period, rrd_id = {"dateFrom": FIRST_DAY.isoformat(), "dateTo": ANCHOR.isoformat()}, 0
    while (response := call(body={**period, "limit": 100, "rrdId": rrd_id})).status_code == 200:
        rrd_id = response.json()[-1]["rrdId"]
    call(body={"dateFrom": "2026-05-02", "dateTo": "2026-05-01"})
    call(body={**period, "limit": 100_001})


def _adverts(call: Checked) -> list[dict]:
    return call().json()["adverts"]


def _page_adverts(call: Checked) -> None:
    ids = ",".join(str(a["id"]) for a in _adverts(call))
    call({"ids": ids, "statuses": "9,11"})
    call({"payment_type": "cpx"})
    call({"ids": "abc"})


def _fullstats(call: Checked, sandbox: RunningSandbox, seller: str) -> None:
    adverts = sandbox.client(seller, host="advert-api").get("/api/advert/v2/adverts").json()["adverts"]
    ids = ",".join(str(a["id"]) for a in adverts)
    call({"ids": ids, "beginDate": WEEK["start"], "endDate": WEEK["end"]})
    call({"ids": ids, "beginDate": "2026-04-01", "endDate": "2026-05-02"})  # 32 days
    call({"beginDate": WEEK["start"], "endDate": WEEK["end"]})


def _bid_target(sandbox: RunningSandbox, seller: str) -> tuple[dict, int, str, int]:
    adverts = sandbox.client(seller, host="advert-api").get("/api/advert/v2/adverts").json()["adverts"]
    advert = next(a for a in adverts if a["status"] in (4, 9, 11))
    nm_id = advert["nm_settings"][0]["nm_id"]
    placement = "combined" if advert["bid_type"] == "unified" else "search"
    minimum = (
        sandbox.client(seller, host="advert-api")
        .post(
            "/api/advert/v1/bids/min",
            json={
                "advert_id": advert["id"],
                "nm_ids": [nm_id],
                "payment_type": advert["settings"]["payment_type"],
                "placement_types": [placement],
            },
        )
        .json()["bids"][0]["bids"][0]["value"]
    )
    return advert, nm_id, placement, minimum


def _bids(call: Checked, sandbox: RunningSandbox, seller: str) -> None:
    advert, nm_id, placement, minimum = _bid_target(sandbox, seller)

    def change(kopecks: int) -> dict:
        nm_bid = {"nm_id": nm_id, "bid_kopecks": kopecks, "placement": placement}
        return {"bids": [{"advert_id": advert["id"], "nm_bids": [nm_bid]}]}

    call(body=change(minimum + 10))
    call(body=change(minimum - 1))
    call(body={"bids": [{"advert_id": advert["id"]}]})


def _min_bids(call: Checked, sandbox: RunningSandbox, seller: str) -> None:
    advert, nm_id, _, _ = _bid_target(sandbox, seller)
    body = {
        "advert_id": advert["id"],
        "nm_ids": [nm_id],
        "payment_type": advert["settings"]["payment_type"],
        "placement_types": ["combined", "search", "recommendation"],
    }
    call(body=body)
    call(body={**body, "advert_id": 1})
    call(body={key: value for key, value in body.items() if key != "payment_type"})


def _page_offset(call: Checked, base: dict, items: Callable[[dict], list], limit: int) -> None:
    offset = 0
    while page := items(call(body={**base, "limit": limit, "offset": offset}).json()):
        offset += len(page)


def _funnel(call: Checked) -> None:
    _page_offset(call, {"selectedPeriod": WEEK}, lambda b: b["data"]["products"], 7)
    call(body={"selectedPeriod": {"start": "2026-05-02", "end": "2026-05-01"}})
    call(body={"limit": 5})


def _stocks(call: Checked) -> None:
    _page_offset(call, {}, lambda b: b["data"]["items"], 40)
    call(body={"nmIds": ["x"]})
    call(body={"limit": 250_001})


def _cards(call: Checked) -> None:
    cursor: dict[str, Any] = {"limit": 5}
    while True:
        body = call(body={"settings": {"cursor": cursor, "filter": {"withPhoto": -1}}}).json()
        if body["cursor"]["total"] < cursor["limit"]:
            break
        cursor = {"limit": 5, "updatedAt": body["cursor"]["updatedAt"], "nmID": body["cursor"]["nmID"]}
    call(body={"settings": {"cursor": {"limit": 5, "updatedAt": "garbage", "nmID": 1}}})
    call(body={"settings": {"cursor": {"limit": 101}}})


def _drive(call: Checked, sandbox: RunningSandbox, seller: str) -> None:
    match call.route.path:
        case "/api/v1/supplier/orders" | "/api/v1/supplier/sales":
            _page_feed(call)
        case "/api/finance/v1/sales-reports/detailed":
            _page_report(call)
        case "/api/advert/v2/adverts":
            _page_adverts(call)
        case "/adv/v3/fullstats":
            _fullstats(call, sandbox, seller)
        case "/api/advert/v1/bids":
            _bids(call, sandbox, seller)
        case "/api/advert/v1/bids/min":
            _min_bids(call, sandbox, seller)
        case "/api/analytics/v3/sales-funnel/products":
            _funnel(call)
        case "/api/analytics/v1/stocks-report/wb-warehouses":
            _stocks(call)
        case "/content/v2/get/cards/list":
            _cards(call)
        case _:  # /ping, seller-info: no parameters, no 400
            call()


def _expected(route: Route) -> set[int]:
    statuses = {200}
    if route.path == "/api/finance/v1/sales-reports/detailed":
        statuses.add(204)
    if route.error is not None:
        statuses.add(400)
    return statuses


ROUTE_IDS = [f"{host}:{method}:{path}" for host, method, path in ROUTES]


@pytest.mark.parametrize("key", list(ROUTES), ids=ROUTE_IDS)
def test_every_answer_of_every_route_validates(loose, key):
    route = ROUTES[key]
    seller = f"contract-{route.bucket}-{route.host}"
    call = Checked(loose, route, seller)
    _drive(call, loose, seller)
    assert set(call.statuses) == _expected(route)
    assert all(entry["contractErrors"] == [] for entry in loose.log(seller) if entry["status"] == 200)


@pytest.mark.parametrize("key", list(ROUTES), ids=ROUTE_IDS)
def test_every_401_of_every_route_validates(loose, key):
    route = ROUTES[key]
    tokens = [make_token("gone", exp=int(time.time()) - 60), "e30.bm90IGpzb24.c2ln", "Bearer"]
    if route.category is not None:
        others = [
            c for c in ("statistics", "finance", "promotion", "analytics", "content") if c != route.category
        ]
        tokens.append(make_token("scoped", categories=others))
    for token in tokens:
        call = Checked(loose, route, "unused", token=token)
        call(*_valid_request(route))
        assert call.statuses == [401]


def _valid_request(route: Route) -> tuple[dict | None, Any]:
    """A request the route accepts (the 401/429 tests need no data behind it)."""
    match route.path:
        case "/api/v1/supplier/orders" | "/api/v1/supplier/sales":
            return {"dateFrom": ANCHOR.isoformat()}, None
        case "/api/finance/v1/sales-reports/detailed":
            return None, {"dateFrom": "2026-05-01", "dateTo": "2026-05-01", "limit": 1}
        case "/adv/v3/fullstats":
            return {"ids": "1", "beginDate": WEEK["start"], "endDate": WEEK["end"]}, None
        case "/api/advert/v1/bids":
            return None, {
                "bids": [{"advert_id": 1, "nm_bids": [{"nm_id": 1, "bid_kopecks": 1, "placement": "search"}]}]
            }
        case "/api/advert/v1/bids/min":
            return None, {"advert_id": 1, "nm_ids": [1], "payment_type": "cpm", "placement_types": ["search"]}
        case "/api/analytics/v3/sales-funnel/products":
            return None, {"selectedPeriod": WEEK, "limit": 1}
        case "/api/analytics/v1/stocks-report/wb-warehouses":
            return None, {"limit": 1}
        case "/content/v2/get/cards/list":
            return None, {"settings": {"cursor": {"limit": 1}}}
    return None, None


@pytest.mark.parametrize("key", list(ROUTES), ids=ROUTE_IDS)
def test_every_429_of_every_route_validates(tight, key):
    route = ROUTES[key]
    call = Checked(tight, route, f"busy-{route.bucket}-{route.host}")
    query, body = _valid_request(route)
    call(query, body)  # takes the one token, whatever it answers
    limited = call(query, body)
    assert limited.status_code == 429
    assert limited.headers["content-type"].startswith("application/problem+json")


def test_the_routes_are_wbs_operations():
    for host, method, path in ROUTES:
        found = contract.operation(host, method, path)
        assert found is not None and found.method == method
    assert contract.operation("finance-api", "GET", PING).server == "https://common-api.wildberries.ru"
    assert contract.operation("statistics-api", "GET", "/api/v5/supplier/reportDetailByPeriod") is None
