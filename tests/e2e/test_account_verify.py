"""A WB token's categories, seller and validity end to end: real API, real worker, the WB sandbox.

The account-verify job a new token writes asks WB (the sandbox) what the token opens; a job whose
category the token lacks fails alone, in Russian, and the account's other work goes on; any other
401 marks the token itself invalid."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import httpx
import pytest

from gatehouse.wb.hosts import CATEGORIES
from tests.conftest import ADMIN_TOKEN
from tests.support.processes import wait_until
from tests.support.wb_sandbox import running_sandbox, scaled_limits

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
WITHOUT_FINANCE = [c for c in CATEGORIES if c != "finance"]
PERIOD = {"dateFrom": "2026-11-01", "dateTo": "2026-11-03"}


@pytest.fixture
def sandbox():
    with running_sandbox(time_scale=1000, rows_per_day=2, page_size=40) as running:
        yield running


@pytest.fixture
def env(sandbox) -> dict[str, str]:
    return {"WB_API_BASE_URL": sandbox.url, **scaled_limits(1000), "RETRY_DELAY_SCALE": "0.001"}


def create(url: str, token: str, name: str = "Shop") -> str:
    response = httpx.post(f"{url}/v1/accounts", json={"name": name, "wbToken": token}, headers=ADMIN)
    assert response.status_code == 201, response.text
    return response.json()["accountId"]


def finished(url: str, job_id: str) -> dict:
    def done():
        status = httpx.get(f"{url}/v1/jobs/{job_id}", headers=ADMIN).json()
        return status if status["state"] in ("completed", "failed") else None

    return wait_until(done, timeout=60, interval=0.05, what=f"job {job_id} to finish")


def verify_job(url: str, account: str) -> str:
    listed = httpx.get(f"{url}/v1/accounts/{account}/jobs", params={"type": "account-verify"}, headers=ADMIN)
    [job] = listed.json()["items"]
    return job["jobId"]


def test_a_new_token_is_checked_on_every_host_and_a_missing_category_refuses_only_its_jobs(
    processes, sandbox, env
):
    processes.start("worker", "gatehouse-worker", "--processes", "1", "--threads", "4", env=env)
    _, url = processes.api(env={**env, "BACKEND_ROLE": "api"})
    token = sandbox.mint("seller-nofin", categories=WITHOUT_FINANCE, expires_in_days=180)
    account = create(url, token)

    # The verify job pings each category's host once and reads the seller, outside any gate
    verify = finished(url, verify_job(url, account))
    assert verify["state"] == "completed", verify
    pings = [(e["host"], e["status"]) for e in sandbox.log("seller-nofin") if e["path"] == "/ping"]
    assert sorted(pings) == sorted(
        [("statistics-api", 200), ("finance-api", 401), ("advert-api", 200), ("seller-analytics-api", 200),
         ("content-api", 200)]
    )  # fmt: skip
    assert [e["path"] for e in sandbox.log("seller-nofin") if e["host"] == "common-api"] == [
        "/api/v1/seller-info"
    ]
    shown = httpx.get(f"{url}/v1/accounts/{account}", headers=ADMIN).json()
    assert shown["access"] == {**dict.fromkeys(CATEGORIES, "granted"), "finance": "denied"}
    assert shown["seller"]["sid"] and set(shown["seller"]) == {"name", "sid", "tin", "tradeMark"}
    assert shown["tokenInvalid"] is None
    expires = datetime.fromisoformat(shown["tokenExpiresAt"])
    assert 179 <= (expires - datetime.now(UTC)).days <= 180

    # A report import is refused at once; a feeds import runs
    imports = f"{url}/v1/accounts/{account}/digitization/imports"
    refused = httpx.post(imports, json={"kind": "report", **PERIOD}, headers=ADMIN)
    assert refused.status_code == 409 and refused.json()["code"] == "TOKEN_SCOPE_MISSING"
    feeds = httpx.post(imports, json={"kind": "feeds", **PERIOD}, headers=ADMIN).json()["jobId"]
    assert finished(url, feeds)["state"] == "completed"


def test_a_job_whose_category_wb_refuses_fails_alone_in_russian_and_the_account_goes_on(
    processes, sandbox, env, sql
):
    # Given a report import and a feeds import accepted before any worker ran (the token unchecked)
    _, url = processes.api(env={**env, "BACKEND_ROLE": "api"})
    token = sandbox.mint("seller-late", categories=WITHOUT_FINANCE)
    account = create(url, token)
    imports = f"{url}/v1/accounts/{account}/digitization/imports"
    report = httpx.post(imports, json={"kind": "report", **PERIOD}, headers=ADMIN).json()["jobId"]

    # When the worker runs them
    processes.start("worker", "gatehouse-worker", "--processes", "1", "--threads", "4", env=env)
    failed = finished(url, report)

    # Then the report fails at its first call, without a retry, saying which category is missing
    assert failed["state"] == "failed", failed
    assert failed["error"]["code"] == "wb-token-scope" and failed["error"]["category"] == "finance"
    assert failed["progress"]["attempt"] == 1
    assert failed["progress"]["message"] == (
        "Токен не даёт доступа к категории «Финансы» — выпустите токен с этой категорией"
    )
    report_calls = [
        e for e in sandbox.log("seller-late") if e["host"] == "finance-api" and e["job"] == report
    ]
    assert [e["status"] for e in report_calls] == [401]
    # … the category is denied, the token still valid, and the account's other work runs
    finished(url, verify_job(url, account))
    shown = httpx.get(f"{url}/v1/accounts/{account}", headers=ADMIN).json()
    assert shown["access"]["finance"] == "denied" and shown["tokenInvalid"] is None
    feeds = httpx.post(imports, json={"kind": "feeds", **PERIOD}, headers=ADMIN).json()["jobId"]
    assert finished(url, feeds)["state"] == "completed"
    sync = httpx.post(f"{url}/v1/accounts/{account}/inventory/sync", headers=ADMIN).json()["jobId"]
    assert finished(url, sync)["state"] == "completed"
    assert sql("SELECT count(*) FROM wb_stocks WHERE account_id = :a", a=uuid.UUID(account))[0][0] > 0


def test_a_token_wb_calls_malformed_marks_the_account_token_invalid_on_its_check(processes, sandbox, env):
    processes.start("worker", "gatehouse-worker", "--processes", "1", "--threads", "4", env=env)
    _, url = processes.api(env={**env, "BACKEND_ROLE": "api"})
    # Three dot-separated parts but no JSON inside: no expiry we can read, and WB calls it malformed
    account = create(url, "eyJhbGciOiJFUzI1NiJ9.bm90LWpzb24.c2ln")

    verify = finished(url, verify_job(url, account))

    assert verify["state"] == "failed" and verify["error"]["code"] == "wb-unauthorized"
    shown = httpx.get(f"{url}/v1/accounts/{account}", headers=ADMIN).json()
    assert shown["tokenInvalid"]["jobId"] == verify["jobId"] and shown["tokenInvalid"]["status"] == 401
    assert set(shown["access"].values()) == {"unknown"} and shown["seller"] is None
