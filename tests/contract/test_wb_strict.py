"""The sandbox holds requests to WB's YAML (400 in the service's shape, logged with contractErrors) and
refuses to start when one of its own answers breaks the YAML."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from datetime import date

import pytest

from gatehouse_wb_sandbox.calls import Call, Reply
from gatehouse_wb_sandbox.routes import ROUTES
from gatehouse_wb_sandbox.selfcheck import ContractError
from gatehouse_wb_sandbox.server import serve
from tests.support.wb_sandbox import RunningSandbox, running_sandbox

ANCHOR = date(2026, 6, 1)
ORDERS = "/api/v1/supplier/orders"
DETAILED = "/api/finance/v1/sales-reports/detailed"
CARDS = "/content/v2/get/cards/list"
REPORT_KEY = ("finance-api", "POST", DETAILED)


@pytest.fixture(scope="module")
def sandbox() -> Iterator[RunningSandbox]:
    with running_sandbox(anchor=ANCHOR, rows_per_day=1) as sb:
        yield sb


@pytest.fixture
def fresh(sandbox) -> RunningSandbox:
    sandbox.reset()
    return sandbox


def test_a_missing_required_query_parameter_is_a_400_naming_it(fresh):
    response = fresh.client("strict", host="statistics-api").get(ORDERS, params={"flag": 0})
    assert response.status_code == 400
    (error,) = response.json()["errors"]  # statistics' shape
    assert "dateFrom" in error and "contract" in error
    (entry,) = fresh.log("strict")
    assert entry["status"] == 400 and entry["contractErrors"] == [
        "Missing required query parameter: dateFrom"
    ]


def test_a_missing_required_body_field_is_a_400_in_finance_shape(fresh):
    response = fresh.client("strict", host="finance-api").post(DETAILED, json={"dateTo": "2026-05-01"})
    assert response.status_code == 400
    assert response.headers["content-type"].startswith("application/problem+json")
    body = response.json()
    assert set(body) == {"status", "title", "detail", "requestId", "origin"}
    assert "'dateFrom' is a required property" in body["detail"]
    (entry,) = fresh.log("strict")
    assert any("'dateFrom' is a required property" in e for e in entry["contractErrors"])


@pytest.mark.parametrize(
    ("host", "path", "body", "violation"),
    [
        (
            "finance-api",
            DETAILED,
            {"dateFrom": "2026-05-01", "dateTo": "2026-05-02", "period": "monthly"},
            "monthly",
        ),
        (
            "content-api",
            CARDS,
            {"settings": {"cursor": {"limit": 5}, "filter": {"withPhoto": 5}}},
            "withPhoto",
        ),
        (
            "seller-analytics-api",
            "/api/analytics/v3/sales-funnel/products",
            {
                "selectedPeriod": {"start": "2026-05-01", "end": "2026-05-02"},
                "orderBy": {"field": "x", "mode": "asc"},
            },
            "orderBy",
        ),
    ],
    ids=["report-period-enum", "cards-with-photo-enum", "funnel-order-by-enum"],
)
def test_what_only_the_contract_knows_is_refused_too(fresh, host, path, body, violation):
    response = fresh.client("strict", host=host).post(path, json=body)
    assert response.status_code == 400
    (entry,) = fresh.log("strict")
    assert entry["contractErrors"] and any(violation in e for e in entry["contractErrors"])


def test_a_valid_request_logs_no_contract_errors(fresh):
    assert (
        fresh.client("fine", host="statistics-api").get(ORDERS, params={"dateFrom": "2026-05-01"}).status_code
        == 200
    )
    assert [e["contractErrors"] for e in fresh.log("fine")] == [[]]


def test_start_up_refuses_a_route_whose_answer_breaks_the_yaml(monkeypatch):
    route = ROUTES[REPORT_KEY]

    def without_rrd_id(call: Call) -> Reply:
        reply = route.handler(call)
        if reply.status != 200:
            return reply
        return replace(reply, body=[{k: v for k, v in row.items() if k != "rrdId"} for row in reply.body])

    monkeypatch.setitem(ROUTES, REPORT_KEY, replace(route, handler=without_rrd_id))
    with pytest.raises(
        ContractError, match=r"finance-api POST /api/finance/v1/sales-reports/detailed: 200: .*rrdId"
    ):
        serve("127.0.0.1:0")


def test_start_up_refuses_a_400_body_in_the_wrong_shape(monkeypatch):
    route = ROUTES[REPORT_KEY]
    monkeypatch.setitem(ROUTES, REPORT_KEY, replace(route, error_type="application/json"))
    with pytest.raises(ContractError, match=r"400: .*application/json"):
        serve("127.0.0.1:0")


COLD_START = """
import time
started = time.perf_counter()
from gatehouse_wb_sandbox.server import serve
serve("127.0.0.1:0").server_close()
print(time.perf_counter() - started)
"""


def test_a_cold_start_with_the_yaml_and_the_self_check_is_quick():
    """Import, YAML, openapi-core and every route's sample check in a new process: ~0.6 s here."""
    done = subprocess.run(
        [sys.executable, "-c", COLD_START], capture_output=True, text=True, timeout=60, check=True
    )
    assert float(done.stdout) < 3.0
