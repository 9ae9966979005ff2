"""The user jobs end to end: real API, real worker, the WB sandbox, rows in PostgreSQL."""

from __future__ import annotations

import uuid
from datetime import date, timedelta

import httpx
import pytest

from gatehouse_wb_sandbox.data import DataSpec, dataset, report_page
from tests.conftest import ADMIN_TOKEN
from tests.support.processes import wait_until
from tests.support.wb_sandbox import running_sandbox, scaled_limits

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
SELLER = "seller-e2e"  # a raw (non-JWT) token is its own seller id
ROWS_PER_DAY = 3


@pytest.fixture
def sandbox():
    # Fast time: WB's 1/min buckets refill in milliseconds, so limits never slow these tests.
    with running_sandbox(time_scale=1000, rows_per_day=ROWS_PER_DAY, page_size=40) as running:
        yield running


@pytest.fixture
def stack(processes, sandbox):
    env = {"WB_API_BASE_URL": sandbox.url, **scaled_limits(1000)}
    processes.start("worker", "gatehouse-worker", "--processes", "1", "--threads", "4", env=env)
    _, url = processes.api(env={**env, "BACKEND_ROLE": "api"})
    return url


def seller_data(sandbox):
    anchor = date.fromisoformat(sandbox.control.get("/__sandbox/config").json()["anchor"])
    return anchor, dataset(DataSpec(seed=0, anchor=anchor, rows_per_day=ROWS_PER_DAY), SELLER)


def create_account(url: str, token: str = SELLER) -> str:
    response = httpx.post(f"{url}/v1/accounts", json={"name": "Shop", "wbToken": token}, headers=ADMIN)
    return response.json()["accountId"]


def run(url: str, path: str, body: dict | None = None, state: str = "completed") -> dict:
    job_id = httpx.post(f"{url}{path}", json=body, headers=ADMIN).json()["jobId"]

    def finished():
        status = httpx.get(f"{url}/v1/jobs/{job_id}", headers=ADMIN).json()
        return status if status["state"] in ("completed", "failed") else None

    status = wait_until(finished, timeout=60, interval=0.05, what=f"job {job_id} to finish")
    assert status["state"] == state, status
    return status


def count(sql, table: str, account: str) -> int:
    return sql(f"SELECT count(*) FROM {table} WHERE account_id = :a", a=uuid.UUID(account))[0][0]


def test_feeds_import_stores_the_period_once_even_when_rerun_or_retried(stack, sandbox, sql):
    anchor, data = seller_data(sandbox)
    since, until = (anchor - timedelta(days=30)).isoformat(), (anchor - timedelta(days=1)).isoformat()
    expected_orders = {o["srid"] for o in data.orders if since <= o["lastChangeDate"] <= f"{until}T23:59:59"}
    expected_sales = {s["saleID"] for s in data.sales if since <= s["lastChangeDate"] <= f"{until}T23:59:59"}
    account = create_account(stack)
    imports = f"/v1/accounts/{account}/digitization/imports"
    body = {"kind": "feeds", "dateFrom": since, "dateTo": until}

    # When the import runs
    status = run(stack, imports, body)

    # Then every order and sale of the period is stored once
    assert status["result"] == {"orders": len(expected_orders), "sales": len(expected_sales)}
    assert {r[0] for r in sql("SELECT srid FROM wb_orders")} == expected_orders
    assert {r[0] for r in sql("SELECT sale_id FROM wb_sales")} == expected_sales
    # … and every call carried the job's id and its run (the sandbox log)
    assert {(e["job"], e["run"]) for e in sandbox.log(SELLER, checks=False)} == {(status["jobId"], "1")}

    # When it runs again, and once more with its first attempt failing on WB's side
    run(stack, imports, body)
    sandbox.faults(force_status=[{"bucket": "sales", "status": 502, "times": 1}])
    retried = run(stack, imports, body)

    # Then nothing is duplicated, and the retry was a second attempt, its calls a second run
    assert retried["progress"]["attempt"] == 2
    assert {e["run"] for e in sandbox.log(SELLER) if e["job"] == retried["jobId"]} == {"1", "2"}
    assert count(sql, "wb_orders", account) == len(expected_orders)
    assert count(sql, "wb_sales", account) == len(expected_sales)


def test_report_import_pages_by_rrd_id_until_204(stack, sandbox, sql):
    anchor, data = seller_data(sandbox)
    first, last = anchor - timedelta(days=40), anchor - timedelta(days=1)
    expected = {r["rrdId"] for r in report_page(data, first, last, 0, 10**9)}
    account = create_account(stack)

    status = run(
        stack,
        f"/v1/accounts/{account}/digitization/imports",
        {"kind": "report", "dateFrom": first.isoformat(), "dateTo": last.isoformat()},
    )

    assert status["result"] == {"reportRows": len(expected)}
    assert {r[0] for r in sql("SELECT rrd_id FROM wb_report_rows")} == expected
    assert sandbox.log(SELLER)[-1]["status"] == 204


def test_autobidder_sync_stores_campaigns_with_their_bids_and_stats(stack, sandbox, sql):
    _, data = seller_data(sandbox)
    account = create_account(stack)

    status = run(stack, f"/v1/accounts/{account}/autobidder/sync")

    assert status["result"]["campaigns"] == len(data.campaigns)
    stored = {r[0]: r[1] for r in sql("SELECT advert_id, data FROM wb_campaigns")}
    assert set(stored) == {c.advert_id for c in data.campaigns}
    assert all("nm_settings" in campaign for campaign in stored.values())  # the current bids
    assert count(sql, "wb_campaign_stats", account) == status["result"]["statDays"]
    # fullstats was asked only for the campaigns WB keeps statistics for (finished, active, paused)
    asked = [
        int(advert)
        for e in sandbox.log(SELLER)
        if e["path"] == "/adv/v3/fullstats"
        for advert in str(e["params"]["ids"]).split(",")
    ]
    with_stats = {c.advert_id for c in data.campaigns if c.status in (7, 9, 11)}
    assert sorted(asked) == sorted(with_stats) and with_stats != {c.advert_id for c in data.campaigns}


def test_inventory_sync_stores_the_stocks_and_a_second_call_while_it_runs_is_already_running(
    stack, sandbox, sql
):
    _, data = seller_data(sandbox)
    account = create_account(stack)
    url = f"{stack}/v1/accounts/{account}/inventory/sync"
    sandbox.faults(latency_ms=300)  # its first WB call takes a while: the second POST finds it live

    first = httpx.post(url, headers=ADMIN)
    second = httpx.post(url, json={}, headers=ADMIN)
    sandbox.faults(latency_ms=0)

    assert first.status_code == second.status_code == 202
    assert first.json()["alreadyRunning"] is False
    assert second.json() == {"jobId": first.json()["jobId"], "alreadyRunning": True}
    status = wait_until(
        lambda: (
            (s := httpx.get(f"{stack}/v1/jobs/{first.json()['jobId']}", headers=ADMIN).json())["state"]
            in ("completed", "failed")
            and s
        ),
        timeout=60,
        what="the inventory sync to finish",
    )
    assert (status["type"], status["state"]) == ("inventory-sync-user", "completed"), status
    assert status["result"] == {"stocks": len(data.stocks)}
    assert count(sql, "wb_stocks", account) == len(data.stocks)


def test_a_rejected_wb_token_fails_at_once_without_retries(stack, sandbox):
    account = create_account(stack, token="a.b.c")  # JWT-shaped but undecodable: WB answers 401

    status = run(stack, f"/v1/accounts/{account}/autobidder/sync", state="failed")

    assert status["error"]["code"] == "wb-unauthorized"
    assert status["progress"]["attempt"] == 1 and status["progress"]["maxAttempts"] == 5
    assert (
        status["progress"]["message"] == "Wildberries отклонил токен — обновите токен в настройках кабинета"
    )
