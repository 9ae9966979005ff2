"""The WB sandbox as our client meets it: a real HTTP server, WB's paths, paging, limits and faults.

Needs neither PostgreSQL nor Redis. Most tests run the server in this process
(``tests.support.wb_sandbox``); one runs the console script as a real process.
"""

from __future__ import annotations

import json
import os
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
LEGACY_REPORT = "/api/v5/supplier/reportDetailByPeriod"
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


# --- data and paging ---


def test_orders_page_by_last_change_date_until_empty(sandbox):
    client = sandbox.client("orders-seller")
    seen: dict[str, dict] = {}
    date_from, previous_last, pages = f"{FIRST_DAY.isoformat()}T00:00:00+03:00", None, 0
    while True:
        response = client.get(ORDERS, params={"dateFrom": date_from, "flag": 0})
        assert response.status_code == 200
        rows = response.json()
        if not rows:
            break
        pages += 1
        assert len(rows) <= 40
        if previous_last is not None:
            assert rows[0] == previous_last  # lastChangeDate >= dateFrom: the boundary row comes again
        changes = [row["lastChangeDate"] for row in rows]
        assert changes == sorted(changes) and all(change >= date_from[:19] for change in changes)
        seen.update((row["srid"], row) for row in rows)
        previous_last, date_from = rows[-1], rows[-1]["lastChangeDate"]

    assert len(seen) == ROWS_PER_DAY * HISTORY_DAYS  # every order, none skipped
    assert pages == -(-(ROWS_PER_DAY * HISTORY_DAYS - 1) // 39)  # 39 new rows per page after the first
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
    assert error.startswith("dateFrom: ")
    assert "X-Ratelimit-Remaining" in response.headers


def test_report_pages_by_rrd_id_until_204(sandbox):
    client = sandbox.client("report-seller")
    period = {"dateFrom": FIRST_DAY.isoformat(), "dateTo": ANCHOR.isoformat()}
    ids, rrd_id = [], 0
    while True:
        response = client.post(DETAILED, json={**period, "limit": 100, "rrdId": rrd_id})
        if response.status_code == 204:
            assert response.content == b""
            break
        rows = response.json()
        assert response.status_code == 200 and 0 < len(rows) <= 100
        assert all(row["rrd_id"] > rrd_id for row in rows)
        ids += [row["rrd_id"] for row in rows]
        rrd_id = rows[-1]["rrd_id"]
    assert len(ids) > 200 and ids == sorted(set(ids))
    row = rows[0]
    assert {
        "realizationreport_id",
        "nm_id",
        "doc_type_name",
        "quantity",
        "retail_amount",
        "ppvz_for_pay",
    } <= set(row)
    assert {"sale_dt", "rr_dt", "srid", "supplier_oper_name"} <= set(row)

    legacy = client.get(LEGACY_REPORT, params={**period, "rrdid": 0, "limit": 100_000})
    assert [r["rrd_id"] for r in legacy.json()] == ids  # the same rows
    done = client.get(LEGACY_REPORT, params={**period, "rrdid": ids[-1]})
    assert done.status_code == 204

    week = client.post(DETAILED, json={"dateFrom": "2026-05-01", "dateTo": "2026-05-07", "rrdId": 0}).json()
    assert week and all("2026-05-01" <= r["rr_dt"] <= "2026-05-07" for r in week)


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


def test_the_report_endpoints_share_one_bucket():
    with running_sandbox(anchor=ANCHOR, rows_per_day=1) as sb:
        client = sb.client("reporter")
        period = {"dateFrom": "2026-05-01", "dateTo": "2026-05-02"}
        assert client.post(DETAILED, json=period).status_code in SERVED
        assert client.get(LEGACY_REPORT, params=period).status_code == 429


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
    assert [(e["method"], e["path"], e["bucket"], e["status"]) for e in entries] == [
        ("GET", ORDERS, "orders", 200),
        ("POST", DETAILED, "report", 200),
        ("POST", CARDS, "catalog", 200),
    ]
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
                return control.get("/ping").status_code == 200
            except httpx.HTTPError:
                return False

        wait_until(answers, timeout=15, what="the sandbox to answer /ping")
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
