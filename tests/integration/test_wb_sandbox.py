"""The WB sandbox as our client meets it: a real HTTP server, WB's paths, paging, limits and faults.

Needs neither PostgreSQL nor Redis. Most tests run the server in this process
(``tests.support.wb_sandbox``); one runs the console script as a real process.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import signal
import time
from collections.abc import Iterator
from datetime import date, timedelta
from pathlib import Path

import httpx
import pytest

from gatehouse.wb.limits import WB_LIMITS
from gatehouse_wb_sandbox.data import HISTORY_DAYS, dataset
from gatehouse_wb_sandbox.tokens import make_token
from tests.support.processes import BIN, Proc, free_port, wait_until
from tests.support.wb_sandbox import RunningSandbox, http_client, running_sandbox

ORDERS = "/api/v1/supplier/orders"
SALES = "/api/v1/supplier/sales"
DETAILED = "/api/finance/v1/sales-reports/detailed"
PING = "/ping"
SELLER_INFO = "/api/v1/seller-info"
ADVERTS = "/api/advert/v2/adverts"
FULLSTATS = "/adv/v3/fullstats"
BIDS = "/api/advert/v1/bids"
MIN_BIDS = "/api/advert/v1/bids/min"
STOCKS = "/api/analytics/v1/stocks-report/wb-warehouses"
FUNNEL = "/api/analytics/v3/sales-funnel/products"
CARDS = "/content/v2/get/cards/list"

ANCHOR = date(2026, 6, 1)  # the data's "today", pinned so the tests do not depend on the date
FIRST_DAY = ANCHOR - timedelta(days=HISTORY_DAYS)
ROWS_PER_DAY = 3
SERVED = (200, 204)  # a report page, or no rows left
MOSCOW_NO_ZONE = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d")
PROBLEM_FIELDS = {"title", "detail", "code", "requestId", "origin", "status", "statusText", "timestamp"}


@pytest.fixture(scope="module")
def loose_limits(tmp_path_factory) -> Path:
    """Limits no paging test reaches, so data tests need not wait."""
    path = tmp_path_factory.mktemp("wb") / "loose.json"
    path.write_text(json.dumps({name: {"burst": 10_000} for name in WB_LIMITS}))
    return path


@pytest.fixture(scope="module")
def shared(loose_limits) -> Iterator[RunningSandbox]:
    with running_sandbox(
        anchor=ANCHOR, rows_per_day=ROWS_PER_DAY, page_size=40, limits_file=loose_limits
    ) as sb:
        yield sb


@pytest.fixture
def sandbox(shared) -> RunningSandbox:
    """The module's loose-limit sandbox, reset before each test."""
    shared.reset()
    return shared


def assert_problem(response: httpx.Response, status: int, detail: str) -> dict:
    assert response.status_code == status
    assert response.headers["content-type"].startswith("application/problem+json")
    body = response.json()
    assert set(body) == PROBLEM_FIELDS
    assert body["status"] == status and detail in body["detail"]
    return body


# --- identity ---


def test_the_seller_is_the_jwt_sid_or_else_the_raw_token(sandbox):
    params = {"dateFrom": FIRST_DAY.isoformat()}
    with_jwt = sandbox.client("4242").get(ORDERS, params=params)
    bearer = sandbox.client(token=f"Bearer {make_token('4242', acc=4)}").get(ORDERS, params=params)
    raw = sandbox.client(token="4242").get(ORDERS, params=params)
    other = sandbox.client(token="raw-token-of-someone-else").get(ORDERS, params=params)

    assert with_jwt.status_code == bearer.status_code == raw.status_code == other.status_code == 200
    assert with_jwt.json() == bearer.json() == raw.json()  # one seller, one dataset
    assert other.json() != raw.json()
    assert [e["seller"] for e in sandbox.log()] == ["4242", "4242", "4242", "raw-token-of-someone-else"]


@pytest.mark.parametrize(
    ("authorization", "detail"),
    [
        (make_token("7", exp=int(time.time()) - 60), "token expired"),
        ("e30.bm90IGpzb24.c2ln", "token problem; token is malformed: the payload is not JSON"),
        ("abc.d.ghi", "token problem; token is malformed: could not base64 decode the payload"),
        ("Bearer", "empty Authorization header"),
        (None, "empty Authorization header"),
    ],
    ids=["expired", "not-json", "not-base64", "empty-bearer", "missing"],
)
def test_bad_tokens_get_401_problem_json(sandbox, authorization, detail):
    client = sandbox.client(token=authorization) if authorization is not None else sandbox.client()
    body = assert_problem(client.get(ORDERS, params={"dateFrom": "2026-01-01"}), 401, detail)
    assert body["title"] == "unauthorized" and body["origin"] == "s2s-api-auth-stat"


def test_a_token_that_expires_later_is_fine(sandbox):
    client = sandbox.client(token=make_token("7", exp=int(time.time()) + 3600))
    assert client.get(ORDERS, params={"dateFrom": "2026-01-01"}).status_code == 200


def test_a_host_prefix_names_the_host_and_unprefixed_paths_still_work(sandbox):
    params = {"dateFrom": FIRST_DAY.isoformat()}
    prefixed = sandbox.client("hosted", host="statistics-api").get(ORDERS, params=params)
    bare = sandbox.client("hosted").get(ORDERS, params=params)
    assert prefixed.status_code == bare.status_code == 200 and prefixed.json() == bare.json()
    # a path on the wrong host does not exist there
    assert_problem(
        sandbox.client("hosted", host="finance-api").get(ORDERS, params=params), 404, f"GET {ORDERS}"
    )
    assert [(e["host"], e["path"], e["status"]) for e in sandbox.log("hosted")] == [
        ("statistics-api", ORDERS, 200),
        ("statistics-api", ORDERS, 200),
        ("finance-api", ORDERS, 404),
    ]


HOSTS = ("statistics-api", "finance-api", "advert-api", "seller-analytics-api", "content-api", "common-api")


def test_ping_answers_on_every_host_and_unprefixed_on_common_api(sandbox):
    for host in HOSTS:
        response = sandbox.client("pinger", host=host).get(PING)
        assert response.status_code == 200, host
        body = response.json()
        assert body["Status"] == "OK" and body["TS"].endswith("+03:00")
    assert sandbox.client("pinger").get(PING).status_code == 200
    assert [e["host"] for e in sandbox.log("pinger")] == [*HOSTS, "common-api"]
    assert [e["bucket"] for e in sandbox.log("pinger")] == [*(f"ping:{h}" for h in HOSTS), "ping:common-api"]


def test_ping_is_limited_to_three_per_30_s_per_host_and_seller():
    with running_sandbox(anchor=ANCHOR, rows_per_day=1) as sb:
        finance = sb.client("pings", host="finance-api")
        answers = [finance.get(PING) for _ in range(4)]
        assert [r.status_code for r in answers] == [200, 200, 200, 429]
        assert answers[-1].headers["X-Ratelimit-Limit"] == "3"
        assert 9 <= int(answers[-1].headers["X-Ratelimit-Retry"]) <= 10  # 30 s / 3
        assert sb.client("pings", host="content-api").get(PING).status_code == 200  # another host
        assert sb.client("other", host="finance-api").get(PING).status_code == 200  # another seller


def test_a_token_without_the_hosts_category_gets_401_scope_not_allowed(sandbox):
    token = make_token("scoped", categories=["statistics", "content"])
    for host, path in (("finance-api", PING), ("advert-api", ADVERTS), ("seller-analytics-api", PING)):
        response = sandbox.client(token=token, host=host).get(path)
        body = assert_problem(response, 401, "token scope not allowed")
        assert body["detail"] == "token scope not allowed" and body["title"] == "unauthorized"
    origin = assert_problem(
        sandbox.client(token=token, host="finance-api").post(DETAILED, json={}), 401, "scope"
    )
    assert origin["origin"] == "s2s-api-auth-finance"
    assert sandbox.client(token=token, host="statistics-api").get(PING).status_code == 200
    assert sandbox.client(token=token, host="content-api").get(PING).status_code == 200
    # common-api needs no category; an opaque token has them all
    assert (
        sandbox.client(token=make_token("scoped", categories=[]), host="common-api").get(PING).status_code
        == 200
    )
    assert sandbox.client(token="opaque-seller", host="finance-api").get(PING).status_code == 200


def test_seller_info_is_deterministic_per_seller_for_any_category(sandbox):
    info = sandbox.client(token=make_token("4242", categories=[]), host="common-api").get(SELLER_INFO)
    again = sandbox.client("4242").get(SELLER_INFO)
    other = sandbox.client("4343", host="common-api").get(SELLER_INFO)
    assert info.status_code == again.status_code == 200 and info.json() == again.json()
    assert set(info.json()) == {"name", "sid", "tin", "tradeMark"} and info.json()["sid"] == "4242"
    assert other.json()["sid"] == "4343" and other.json()["tin"] != info.json()["tin"]


def test_minted_tokens_lack_categories_or_expire(sandbox):
    no_finance = sandbox.mint("minted", categories=["statistics"])
    assert sandbox.client(token=no_finance, host="statistics-api").get(PING).status_code == 200
    assert_problem(
        sandbox.client(token=no_finance, host="finance-api").get(PING), 401, "token scope not allowed"
    )
    expired = sandbox.mint("minted", expires_in_days=-1)
    assert_problem(sandbox.client(token=expired, host="statistics-api").get(PING), 401, "token expired")
    soon = sandbox.mint("minted", expires_in_days=0.5)
    assert sandbox.client(token=soon, host="finance-api").get(PING).status_code == 200
    assert sandbox.client(token=sandbox.mint("minted"), host="finance-api").get(PING).status_code == 200
    for bad in (
        {"categories": ["statistics"]},
        {"sid": "x", "categories": ["nonsense"]},
        {"sid": "x", "x": 1},
    ):
        assert sandbox.control.post("/__sandbox/tokens", json=bad).status_code == 400


# --- data and paging ---


def test_orders_page_by_last_change_date_until_empty(sandbox):
    client = sandbox.client("orders-seller", host="statistics-api")
    seen: dict[str, dict] = {}
    date_from, previous, pages = f"{FIRST_DAY.isoformat()}T00:00:00+03:00", None, 0
    while True:
        response = client.get(ORDERS, params={"dateFrom": date_from, "flag": 0})
        assert response.status_code == 200
        rows = response.json()
        if not rows:
            break
        pages += 1
        assert len(rows) <= 40
        changes = [row["lastChangeDate"] for row in rows]
        assert changes == sorted(changes) and all(change >= date_from[:19] for change in changes)
        assert all(MOSCOW_NO_ZONE.fullmatch(change) for change in changes)  # Moscow time, no offset
        if previous is not None:
            # lastChangeDate >= dateFrom: every row of the previous page's last second comes again
            boundary = [row for row in previous if row["lastChangeDate"] == date_from]
            assert rows[: len(boundary)] == boundary
        seen.update((row["srid"], row) for row in rows)
        previous, date_from = rows, rows[-1]["lastChangeDate"]

    assert len(seen) == ROWS_PER_DAY * HISTORY_DAYS  # every order, none skipped
    assert pages >= ROWS_PER_DAY * HISTORY_DAYS // 40
    order = next(iter(seen.values()))
    for name in (
        "date",
        "warehouseName",
        "supplierArticle",
        "nmId",
        "barcode",
        "totalPrice",
        "priceWithDisc",
    ):
        assert name in order
    assert {"isCancel", "gNumber", "srid"} <= set(order)
    assert client.get(ORDERS, params={"dateFrom": date_from}).json() == []  # nothing strictly newer


def whole_feed(client: httpx.Client, feed: str) -> list[dict]:
    """Every row of a statistics feed, paged by lastChangeDate, without the repeated ones."""
    rows: dict[tuple, dict] = {}
    date_from = FIRST_DAY.isoformat()
    while page := client.get(feed, params={"dateFrom": date_from}).json():
        rows |= {(row["srid"], row.get("saleID")): row for row in page}
        date_from = page[-1]["lastChangeDate"]
    return list(rows.values())


@pytest.mark.parametrize("feed", [ORDERS, SALES])
def test_several_rows_share_a_last_change_date_and_come_again_from_it(sandbox, feed):
    client = sandbox.client("shared-second", host="statistics-api")
    rows = whole_feed(client, feed)
    changes = [row["lastChangeDate"] for row in rows]
    assert changes == sorted(changes)
    shared = sorted({c for c, n in itertools.pairwise(changes) if c == n})
    assert len(shared) >= 2  # WB updates the feeds in runs: the rows of one run share their time
    for key in shared:
        again = client.get(feed, params={"dateFrom": key}).json()
        same = [row for row in rows if row["lastChangeDate"] == key]
        assert len(same) >= 2 and again[: len(same)] == same  # dateFrom is inclusive
    assert whole_feed(sandbox.client("shared-second"), feed) == rows  # deterministic


def test_sales_have_their_own_rows_keyed_by_sale_id(sandbox):
    client = sandbox.client("sales-seller")
    rows = client.get(SALES, params={"dateFrom": FIRST_DAY.isoformat()}).json()
    assert rows and len({row["saleID"] for row in rows}) == len(rows)
    assert {row["saleID"][0] for row in rows} <= {"S", "R"}
    assert {"forPay", "priceWithDisc", "srid", "lastChangeDate"} <= set(rows[0])


@pytest.mark.parametrize("date_from", [None, "yesterday", "2026-13-01"])
def test_statistics_reject_a_bad_date_from_with_their_legacy_body(sandbox, date_from):
    params = {} if date_from is None else {"dateFrom": date_from}
    response = sandbox.client("s").get(ORDERS, params=params)
    assert response.status_code == 400
    (error,) = response.json()["errors"]
    assert "dateFrom" in error
    assert "X-Ratelimit-Remaining" in response.headers


def test_report_pages_by_rrd_id_until_204(sandbox):
    client = sandbox.client("report-seller", host="finance-api")
    period = {"dateFrom": FIRST_DAY.isoformat(), "dateTo": ANCHOR.isoformat()}
    collected, rrd_id = [], 0
    while True:
        response = client.post(DETAILED, json={**period, "limit": 100, "rrdId": rrd_id})
        if response.status_code == 204:
            assert response.content == b""
            break
        rows = response.json()
        assert response.status_code == 200 and 0 < len(rows) <= 100
        assert all(row["rrdId"] > rrd_id for row in rows)
        collected += rows
        rrd_id = rows[-1]["rrdId"]
    ids = [row["rrdId"] for row in collected]
    assert len(ids) > 200 and ids == sorted(set(ids))
    row = collected[0]
    assert not any("_" in key for key in row)  # camelCase, like WB's finance API
    assert {"reportId", "nmId", "docTypeName", "quantity", "retailAmount", "forPay"} <= set(row)
    assert {"saleDt", "rrDate", "srid", "sellerOperName"} <= set(row)
    for key in ("retailPrice", "retailAmount", "forPay", "acquiringFee", "vw", "deliveryService", "penalty"):
        assert isinstance(row[key], str) and re.fullmatch(r"-?\d+(\.\d{1,2})?", row[key]), key

    week = client.post(DETAILED, json={"dateFrom": "2026-05-01", "dateTo": "2026-05-07", "rrdId": 0}).json()
    assert week and all("2026-05-01" <= r["rrDate"] <= "2026-05-07" for r in week)


def test_report_rows_follow_from_the_sales(sandbox):
    seller = "coherent-seller"
    client = sandbox.client(seller, host="statistics-api")
    by_sale, date_from = {}, FIRST_DAY.isoformat()
    while page := client.get(SALES, params={"dateFrom": date_from}).json():
        by_sale |= {(s["srid"], s["saleID"][0]): s for s in page}
        date_from = page[-1]["lastChangeDate"]
    period = {"dateFrom": FIRST_DAY.isoformat(), "dateTo": ANCHOR.isoformat(), "rrdId": 0}
    rows = sandbox.client(seller, host="finance-api").post(DETAILED, json=period).json()
    sold = [r for r in rows if r["docTypeName"] in ("Продажа", "Возврат")]
    assert len(sold) == len(by_sale) and len(rows) == 2 * len(sold)  # a logistics row per sale row
    for row in sold:
        sale = by_sale[row["srid"], "S" if row["docTypeName"] == "Продажа" else "R"]
        assert row["nmId"] == sale["nmId"] and row["sku"] == sale["barcode"]
        assert float(row["retailAmount"]) == abs(sale["priceWithDisc"])
        assert float(row["forPay"]) == pytest.approx(abs(sale["forPay"]))
        assert row["rrDate"] == sale["date"][:10]


def test_the_legacy_report_route_is_gone(sandbox):
    client = sandbox.client("s")
    response = client.get("/api/v5/supplier/reportDetailByPeriod", params={"dateFrom": "2026-05-01"})
    assert_problem(response, 404, "GET /api/v5/supplier/reportDetailByPeriod")


@pytest.mark.parametrize(
    "body",
    [
        {"dateTo": "2026-05-01"},
        {"dateFrom": "2026-05-01", "dateTo": "2026-05-02", "limit": 100_001},
        "not json",
    ],
    ids=["no-date-from", "limit-too-big", "not-json"],
)
def test_report_rejects_a_bad_body_in_finance_shape(sandbox, body):
    client = sandbox.client("s")
    response = (
        client.post(DETAILED, content=body) if isinstance(body, str) else client.post(DETAILED, json=body)
    )
    assert response.status_code == 400
    assert set(response.json()) == {"status", "title", "detail", "requestId", "origin"}


def test_catalog_pages_by_cursor_until_total_below_limit(sandbox):
    client = sandbox.client("catalog-seller")
    everything = client.post(CARDS, json={"settings": {"cursor": {"limit": 100}}}).json()["cards"]
    cursor, collected = {"limit": 4}, []
    while True:
        body = client.post(CARDS, json={"settings": {"cursor": cursor, "filter": {"withPhoto": -1}}}).json()
        collected += body["cards"]
        assert body["cursor"]["total"] == len(body["cards"])
        if body["cursor"]["total"] < cursor["limit"]:
            break
        cursor = {"limit": 4, "updatedAt": body["cursor"]["updatedAt"], "nmID": body["cursor"]["nmID"]}
    assert [c["nmID"] for c in collected] == [c["nmID"] for c in everything]
    assert len({c["nmID"] for c in collected}) == len(collected) >= 12
    assert [c["updatedAt"] for c in collected] == sorted((c["updatedAt"] for c in collected), reverse=True)
    assert {"vendorCode", "sizes", "subjectID", "brand", "title"} <= set(collected[0])

    too_many = client.post(CARDS, json={"settings": {"cursor": {"limit": 101}}})
    assert too_many.status_code == 400 and too_many.json()["error"] is True


def test_inventory_pages_by_offset(sandbox):
    client = sandbox.client("stock-seller")
    everything = client.post(STOCKS, json={}).json()["data"]["items"]
    collected: list = []
    while items := client.post(STOCKS, json={"limit": 7, "offset": len(collected)}).json()["data"]["items"]:
        collected += items
    assert collected == everything and len(everything) > 7
    assert {"nmId", "chrtId", "warehouseId", "warehouseName", "quantity"} <= set(everything[0])


def test_funnel_pages_by_offset_and_counts_the_orders(sandbox):
    client = sandbox.client("funnel-seller")
    period = {"start": "2026-05-01", "end": "2026-05-31"}
    everything = client.post(FUNNEL, json={"selectedPeriod": period}).json()["data"]["products"]

    def page(offset: int) -> list:
        body = {"selectedPeriod": period, "limit": 5, "offset": offset}
        return client.post(FUNNEL, json=body).json()["data"]["products"]

    collected: list = []
    while products := page(len(collected)):
        collected += products
    assert collected == everything
    assert sum(p["statistic"]["selected"]["orderCount"] for p in everything) == ROWS_PER_DAY * 31


def test_unknown_paths_and_methods(sandbox):
    client = sandbox.client("lost")
    assert_problem(client.get("/api/v9/nothing"), 404, "GET /api/v9/nothing")
    assert_problem(client.get(DETAILED), 405, f"GET {DETAILED}")


def test_adverts_fullstats_and_bids(sandbox):
    client = sandbox.client("ads-seller")
    adverts = client.get(ADVERTS).json()["adverts"]
    assert 3 <= len(adverts) <= 8
    ids = [a["id"] for a in adverts]
    params = {"beginDate": (ANCHOR - timedelta(days=7)).isoformat(), "endDate": ANCHOR.isoformat()}
    stats = client.get(FULLSTATS, params={"ids": ",".join(map(str, ids)), **params}).json()
    assert {s["advertId"] for s in stats} <= set(ids)
    for campaign in stats:
        assert 1 <= len(campaign["days"]) <= 7
        assert campaign["views"] == sum(day["views"] for day in campaign["days"])
        assert {"clicks", "ctr", "cpc", "sum", "orders"} <= set(campaign["days"][0])

    assert (
        client.get(FULLSTATS, params={"ids": ",".join(map(str, range(1, 52))), **params}).status_code == 400
    )
    month = {"beginDate": "2026-04-01", "endDate": "2026-05-02"}  # 32 days
    assert client.get(FULLSTATS, params={"ids": str(ids[0]), **month}).json()["title"] == "invalid payload"

    advert = next(a for a in adverts if a["status"] in (4, 9, 11))
    nm_id = advert["nm_settings"][0]["nm_id"]
    placement = "combined" if advert["bid_type"] == "unified" else "search"
    minimum = client.post(
        MIN_BIDS,
        json={
            "advert_id": advert["id"],
            "nm_ids": [nm_id],
            "payment_type": advert["settings"]["payment_type"],
            "placement_types": ["combined" if placement == "combined" else "search"],
        },
    ).json()["bids"][0]["bids"][0]["value"]
    change = {
        "bids": [{"advert_id": advert["id"], "nm_bids": [{"nm_id": nm_id, "bid_kopecks": minimum + 5}]}]
    }
    change["bids"][0]["nm_bids"][0]["placement"] = placement
    assert client.patch(BIDS, json=change).json()["bids"] == change["bids"]
    (after,) = client.get(ADVERTS, params={"ids": advert["id"]}).json()["adverts"]
    assert after["nm_settings"][0]["bids_kopecks"]["search"] == minimum + 5

    change["bids"][0]["nm_bids"][0]["bid_kopecks"] = minimum - 1
    too_low = client.patch(BIDS, json=change)
    assert (
        too_low.status_code == 400
        and too_low.json()["detail"] == f"wrong bid value: {minimum - 1}; min: {minimum}"
    )
    assert client.patch(BIDS, json={"bids": change["bids"] * 51}).status_code == 400


# --- rate limits ---


def test_a_burst_beyond_the_bucket_gets_429_per_seller_and_bucket():
    with running_sandbox(anchor=ANCHOR, rows_per_day=1) as sb:
        client = sb.client("busy")
        params = {"dateFrom": ANCHOR.isoformat()}  # nothing newer: small answers
        answers = [client.get(ORDERS, params=params) for _ in range(11)]

        assert [r.status_code for r in answers] == [200] * 10 + [429]
        assert [r.headers["X-Ratelimit-Remaining"] for r in answers[:10]] == [
            str(n) for n in range(9, -1, -1)
        ]
        limited = answers[-1]
        assert "X-Ratelimit-Remaining" not in limited.headers
        assert limited.headers["X-Ratelimit-Limit"] == "10"
        assert 58 <= int(limited.headers["X-Ratelimit-Retry"]) <= 60  # whole seconds, like WB
        assert 590 <= int(limited.headers["X-Ratelimit-Reset"]) <= 600
        body = assert_problem(limited, 429, "limited by ")
        assert body["title"] == "too many requests" and body["origin"] == "s2s-api-auth-stat"
        assert body["statusText"] == "Too Many Requests"

        assert sb.client("quiet").get(ORDERS, params=params).status_code == 200  # another seller
        assert client.get(SALES, params=params).status_code == 200  # another bucket
        assert client.get(ORDERS, params=params).status_code == 429


def test_time_scale_shortens_the_wait():
    with running_sandbox(
        anchor=ANCHOR, rows_per_day=1, time_scale=600
    ) as sb:  # report: 1/min -> 1 per 100 ms
        client = sb.client("scaled")
        period = {"dateFrom": "2026-05-01", "dateTo": "2026-05-02"}
        assert client.post(DETAILED, json=period).status_code in SERVED
        limited = client.post(DETAILED, json=period)
        assert limited.status_code == 429
        retry = float(limited.headers["X-Ratelimit-Retry"])
        assert 0 < retry <= 0.1 and len(limited.headers["X-Ratelimit-Retry"]) <= 5  # decimals, at most 3
        time.sleep(retry)  # waiting what WB says is enough
        assert client.post(DETAILED, json=period).status_code in SERVED


def test_a_limits_file_replaces_entries(tmp_path):
    path = tmp_path / "limits.json"
    path.write_text(json.dumps({"catalog": {"period_ms": 2_000, "limit": 1, "burst": 2}}))
    with running_sandbox(anchor=ANCHOR, rows_per_day=1, limits_file=path) as sb:
        client = sb.client("filed")
        body = {"settings": {"cursor": {"limit": 1}}}
        answers = [client.post(CARDS, json=body) for _ in range(3)]
        assert [r.status_code for r in answers] == [200, 200, 429]
        assert answers[-1].headers["X-Ratelimit-Limit"] == "2"
        assert 1.9 < float(answers[-1].headers["X-Ratelimit-Retry"]) <= 2
        config = sb.control.get("/__sandbox/config").json()
        assert config["limits"]["catalog"] == {"period_ms": 2_000, "limit": 1, "burst": 2}
        assert config["limits"]["orders"] == {"period_ms": 60_000, "limit": 1, "burst": 10}

    path.write_text(json.dumps({"katalog": {"burst": 2}}))
    with pytest.raises(ValueError, match="unknown bucket 'katalog'"), running_sandbox(limits_file=path):
        pass


# --- faults ---


def test_forced_429_on_the_nth_matching_call(sandbox):
    sandbox.faults(force_429=[{"seller": "victim", "bucket": "catalog", "nth": 3, "retry_s": 0.25}])
    victim, bystander = sandbox.client("victim"), sandbox.client("bystander")
    body = {"settings": {"cursor": {"limit": 1}}}
    statuses = []
    for _ in range(4):
        assert bystander.post(CARDS, json=body).status_code == 200  # not counted
        statuses.append(victim.post(CARDS, json=body))
    assert [r.status_code for r in statuses] == [200, 200, 429, 200]
    forced = statuses[2]
    assert forced.headers["X-Ratelimit-Retry"] == "0.25"
    assert forced.headers["X-Ratelimit-Reset"] == "0.25"
    assert forced.headers["X-Ratelimit-Limit"] == "10000"
    assert_problem(forced, 429, "limited by ")
    assert sandbox.faults()["force_429"] == []


def test_forced_statuses_then_normal_service(sandbox):
    sandbox.faults(force_status=[{"bucket": "adverts", "status": 503, "times": 2}])
    client = sandbox.client("flaky")
    assert client.post(STOCKS, json={}).status_code == 200  # another bucket
    assert [client.get(ADVERTS).status_code for _ in range(3)] == [503, 503, 200]

    bad = sandbox.control.post("/__sandbox/faults", json={"force_status": [{"status": 200}]})
    assert bad.status_code == 400


def test_error_rate_is_random_but_seeded(loose_limits):
    def statuses(seed: int) -> list[int]:
        with running_sandbox(anchor=ANCHOR, seed=seed, error_rate=0.5, limits_file=loose_limits) as sb:
            client = sb.client("unlucky")
            return [client.get(ADVERTS).status_code for _ in range(30)]

    first = statuses(3)
    assert set(first) - {200} <= {500, 502, 503}
    assert 5 <= first.count(200) <= 25
    assert statuses(3) == first
    assert statuses(4) != first


def test_latency_is_added_to_every_call(sandbox):
    client = sandbox.client("slow")
    sandbox.faults(latency_ms=300)
    started = time.monotonic()
    assert client.get(ADVERTS).status_code == 200
    assert time.monotonic() - started >= 0.3
    assert sandbox.faults()["latency_ms"] == 300


# --- log and reset ---


def test_the_log_names_seller_job_and_paging_params(sandbox):
    job = sandbox.client("logged", **{"X-Gatehouse-Job": "job-123", "X-Gatehouse-Run": "2"})
    job.get(ORDERS, params={"dateFrom": "2026-05-01"})
    job.post(DETAILED, json={"dateFrom": "2026-05-01", "dateTo": "2026-05-02", "rrdId": 77})
    job.post(
        CARDS, json={"settings": {"cursor": {"limit": 2, "nmID": 5, "updatedAt": "2026-05-01T00:00:00Z"}}}
    )
    sandbox.client("unlogged").get(ADVERTS)

    entries = sandbox.log("logged")
    assert [(e["host"], e["method"], e["path"], e["bucket"], e["status"]) for e in entries] == [
        ("statistics-api", "GET", ORDERS, "orders", 200),
        ("finance-api", "POST", DETAILED, "report", 200),
        ("content-api", "POST", CARDS, "catalog", 200),
    ]
    assert all(e["contractErrors"] == [] for e in entries)
    assert {(e["job"], e["run"]) for e in entries} == {("job-123", "2")}
    assert all(e["seller"] == "logged" for e in entries)
    assert [e["params"] for e in entries] == [
        {"dateFrom": "2026-05-01"},
        {"dateFrom": "2026-05-01", "dateTo": "2026-05-02", "rrdId": 77},
        {"cursor": {"limit": 2, "nmID": 5, "updatedAt": "2026-05-01T00:00:00Z"}},
    ]
    assert all(isinstance(e["ts"], float) and e["requestId"] for e in entries)
    assert sandbox.log("unlogged")[0]["job"] is None
    assert len(sandbox.log()) == 4

    assert sandbox.control.delete("/__sandbox/log").status_code == 204
    assert sandbox.log() == []


def test_reset_clears_faults_buckets_and_log():
    with running_sandbox(anchor=ANCHOR, rows_per_day=1) as sb:
        client = sb.client("resetter")
        period = {"dateFrom": "2026-05-01", "dateTo": "2026-05-02"}
        assert client.post(DETAILED, json=period).status_code in SERVED
        assert client.post(DETAILED, json=period).status_code == 429
        sb.faults(error_rate=1.0, latency_ms=10)

        sb.reset()
        assert sb.faults() == {
            "error_rate": 0.0,
            "latency_ms": 0,
            "force_429": [],
            "force_status": [],
        }
        assert sb.log() == []
        assert client.post(DETAILED, json=period).status_code in SERVED


# --- the console script ---


def test_cli_process_serves_the_same_data_as_the_same_seed_and_stops_on_sigterm(tmp_path):
    port = free_port()
    argv = [str(BIN / "gatehouse-wb-sandbox"), "--bind", f"127.0.0.1:{port}", "--seed", "7"]
    argv += ["--rows-per-day", "2", "--page-size", "25", "--time-scale", "60"]
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path), "LOG_LEVEL": "INFO"}
    proc = Proc("wb-sandbox", argv, env, tmp_path / "wb-sandbox.log")
    url = f"http://127.0.0.1:{port}"
    control = http_client(url)
    try:

        def answers() -> bool:
            assert proc.alive(), proc.log()
            try:
                return control.get("/__sandbox/health").status_code == 200
            except httpx.HTTPError:
                return False

        wait_until(answers, timeout=15, what="the sandbox to answer /__sandbox/health")
        assert f"listening on http://127.0.0.1:{port} (time scale 60.0" in proc.log()
        anchor = date.fromisoformat(control.get("/__sandbox/config").json()["anchor"])

        def sample(base: str, seller: str) -> list:
            client = http_client(base, Authorization=make_token(seller))
            first_day = (anchor - timedelta(days=HISTORY_DAYS)).isoformat()
            return [
                client.get(ORDERS, params={"dateFrom": first_day}).json(),
                client.post(DETAILED, json={"dateFrom": first_day, "dateTo": anchor.isoformat()}).json(),
                client.get(ADVERTS).json(),
                client.post(CARDS, json={"settings": {"cursor": {"limit": 100}}}).json(),
                client.post(STOCKS, json={}).json(),
            ]

        served = sample(url, "9000")
        assert len(served[0]) == 25  # --page-size
        dataset.cache_clear()  # build the in-process data afresh, not from the cache
        with (
            running_sandbox(anchor=anchor, seed=7, rows_per_day=2, page_size=25) as same,
            running_sandbox(anchor=anchor, seed=8, rows_per_day=2) as other,
        ):
            assert sample(same.url, "9000") == served
            assert sample(other.url, "9000")[0] != served[0]

        proc.signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    finally:
        control.close()
        proc.close()
