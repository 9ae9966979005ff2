"""Every request our WB client can send, held to WB's OpenAPI: each job type that calls WB runs on a
real worker against the strict sandbox, which checks every request against its operation (host,
method, path, required parameters, body schema) and logs any violation as ``contractErrors``."""

from __future__ import annotations

import json
from collections import Counter

import httpx

from gatehouse.wb.client import ENDPOINTS, REPORT
from gatehouse.wb.hosts import HOST_LABELS
from tests.conftest import ADMIN_TOKEN
from tests.support.processes import wait_until
from tests.support.wb_sandbox import running_sandbox, scaled_limits

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
SELLER = "seller-contract"
# Every schedule whose job calls WB, unspread, so a run's jobs are due at once.
SCHEDULES = (
    "digitization-incremental",
    "digitization-backfill",
    "rnp-ads",
    "rnp-finance",
    "inventory",
    "catalog",
)


def finished(url: str, job_id: str) -> dict:
    def done():
        status = httpx.get(f"{url}/v1/jobs/{job_id}", headers=ADMIN).json()
        return status if status["state"] in ("completed", "failed") else None

    status = wait_until(done, timeout=90, interval=0.05, what=f"job {job_id} to finish")
    assert status["state"] == "completed", status
    return status


def test_every_request_of_every_job_and_paging_step_validates_against_wbs_openapi(processes):
    with running_sandbox(time_scale=1000, rows_per_day=4, page_size=30) as sandbox:
        env = {
            "WB_API_BASE_URL": sandbox.url,
            **scaled_limits(1000),
            "WB_REPORT_PAGE_ROWS": "25",  # the report pages several times before its 204
            "SCHEDULES": json.dumps({name: {"spread_ms": 0} for name in SCHEDULES}),
        }
        processes.start("worker", "gatehouse-worker", "--processes", "1", "--threads", "4", env=env)
        _, url = processes.api(env={**env, "BACKEND_ROLE": "api"})
        created = httpx.post(
            f"{url}/v1/accounts", json={"name": "Contract", "wbToken": SELLER}, headers=ADMIN
        )
        account = created.json()["accountId"]

        # The user jobs (and the account's verify job), then every schedule's job of the account
        period = {"dateFrom": "2026-01-01", "dateTo": "2026-12-31"}
        imports = f"{url}/v1/accounts/{account}/digitization/imports"
        started = [
            httpx.post(imports, json={"kind": kind, **period}, headers=ADMIN).json()["jobId"]
            for kind in ("feeds", "report")
        ]
        for sync in ("autobidder", "inventory"):
            started.append(
                httpx.post(f"{url}/v1/accounts/{account}/{sync}/sync", headers=ADMIN).json()["jobId"]
            )
        for job_id in started:
            finished(url, job_id)
        for name in SCHEDULES:
            assert httpx.post(f"{url}/v1/admin/schedules/{name}/run", headers=ADMIN).status_code == 202

        def scheduled_done():
            jobs = httpx.get(f"{url}/v1/accounts/{account}/jobs", params={"limit": 100}, headers=ADMIN)
            items = jobs.json()["items"]
            done = [j for j in items if j["tier"] == "scheduled" and j["state"] in ("completed", "failed")]
            return items if len(done) == len(SCHEDULES) else None

        jobs = wait_until(scheduled_done, timeout=120, interval=0.1, what="every schedule's job to finish")
        assert {j["state"] for j in jobs} == {"completed"}, [
            (j["type"], j["state"], j["error"]) for j in jobs
        ]
        log = sandbox.log(SELLER)

    # No request broke the contract, and every endpoint of the client was called and answered
    assert [e for e in log if e["contractErrors"]] == []
    # (a 429 is WB's to send: at 1,000 times WB's pace a millisecond of jitter meets one, and the job
    # pauses and resumes; what no request may meet is a 400)
    assert {e["status"] for e in log} <= {200, 204, 429}, [e for e in log if e["status"] not in (200, 204)]
    called = {(e["host"], e["method"], e["path"]) for e in log if e["status"] in (200, 204)}
    assert {(HOST_LABELS[e.service], e.method, e.path) for e in ENDPOINTS} <= called
    # … through more than one page where WB pages: the feeds by lastChangeDate, the report to its 204
    per_path = Counter(e["path"] for e in log if e["status"] == 200)
    assert per_path["/api/v1/supplier/orders"] >= 2 and per_path["/api/v1/supplier/sales"] >= 2
    report = [e["status"] for e in log if e["path"] == REPORT.path]
    assert report.count(200) >= 2 and 204 in report
