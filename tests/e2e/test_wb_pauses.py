"""WB rate limits: a 429 or an empty bucket pauses a job without an attempt, and it resumes from its checkpoint."""

from __future__ import annotations

import json
import uuid
from datetime import date, timedelta

import httpx
import pytest

from gatehouse_wb_sandbox.data import DataSpec, dataset, report_page
from tests.conftest import ADMIN_TOKEN
from tests.support.processes import wait_until
from tests.support.wb_sandbox import running_sandbox, scaled_limits

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
SELLER = "seller-pauses"
SCALE = 1000


@pytest.fixture
def sandbox():
    with running_sandbox(time_scale=SCALE, rows_per_day=3) as running:
        yield running


def start(processes, sandbox, **env):
    worker_env = {
        "WB_API_BASE_URL": sandbox.url,
        "WB_REPORT_PAGE_ROWS": "30",
        "GATE_POLL_DELAY_MS": "300",
        **scaled_limits(SCALE),
        **env,
    }
    processes.start("worker", "gatehouse-worker", "--processes", "1", "--threads", "4", env=worker_env)
    _, url = processes.api(env={"BACKEND_ROLE": "api"})
    account = httpx.post(f"{url}/v1/accounts", json={"name": "Shop", "wbToken": SELLER}, headers=ADMIN).json()
    return url, account["accountId"]


def period(sandbox) -> tuple[date, date, set[int]]:
    anchor = date.fromisoformat(sandbox.control.get("/__sandbox/config").json()["anchor"])
    first, last = anchor - timedelta(days=40), anchor - timedelta(days=1)
    data = dataset(DataSpec(seed=0, anchor=anchor, rows_per_day=3), SELLER)
    return first, last, {r["rrdId"] for r in report_page(data, first, last, 0, 10**9)}


def status(url: str, job_id: str) -> dict:
    return httpx.get(f"{url}/v1/jobs/{job_id}", headers=ADMIN).json()


def paused_status(url: str, job_id: str) -> dict | None:
    current = status(url, job_id)
    return current if (current["progress"] or {}).get("phase") == "rate-limited" else None


def start_report(url: str, account: str, first: date, last: date) -> str:
    body = {"kind": "report", "dateFrom": first.isoformat(), "dateTo": last.isoformat()}
    return httpx.post(f"{url}/v1/accounts/{account}/digitization/imports", json=body, headers=ADMIN).json()[
        "jobId"
    ]


def test_a_429_in_the_middle_of_a_report_pauses_keeps_the_gate_and_resumes_from_the_cursor(
    processes, sandbox, gh, sql
):
    # Given WB answering 429 (retry in 1 s) to the third page of a report
    url, account = start(processes, sandbox)
    first, last, expected = period(sandbox)
    assert len(expected) > 90  # several pages of 30
    sandbox.faults(force_429=[{"bucket": "report", "nth": 3, "retry_s": 1.0}])

    # When the import runs
    report = start_report(url, account, first, last)

    # Then it pauses: delayed, rate-limited, its attempt untouched, until WB's retry moment
    paused = wait_until(lambda: paused_status(url, report), interval=0.01, what="the report to pause")
    assert paused["state"] == "delayed" and paused["progress"]["attempt"] == 1
    assert paused["progress"]["message"].startswith("Пауза по лимиту запросов Wildberries — продолжим через")
    # … it keeps the account's gate: another job of the account waits instead of running in the pause
    assert gh.gate.inspect(account).holder.endswith(report)
    other = httpx.post(f"{url}/v1/accounts/{account}/autobidder/sync", headers=ADMIN).json()["jobId"]
    wait_until(lambda: status(url, report)["state"] == "completed", timeout=30, what="the report to complete")
    wait_until(lambda: status(url, other)["state"] == "completed", timeout=30, what="the sync to complete")

    # … and resumed from its cursor: the call after the 429 asked for the same rrdId, no page was served twice
    calls = [e for e in sandbox.log(SELLER) if e["bucket"] == "report"]
    cursors = [e["params"]["rrdId"] for e in calls]
    limited = next(i for i, e in enumerate(calls) if e["status"] == 429)
    assert cursors[limited + 1] == cursors[limited] and cursors.count(0) == 1
    served = [e["params"]["rrdId"] for e in calls if e["status"] in (200, 204)]
    assert len(set(served)) == len(served)
    done = status(url, report)
    assert done["progress"]["attempt"] == 1 and done["result"] == {"reportRows": len(expected)}
    assert {r[0] for r in sql("SELECT rrd_id FROM wb_report_rows")} == expected
    # The other job ran only after the report let the gate go
    rows = {j: gh.jobs.get(uuid.UUID(j)) for j in (report, other)}
    assert rows[other].started_at >= rows[report].finished_at - timedelta(milliseconds=50)


def test_an_empty_bucket_pauses_the_job_instead_of_burning_requests(processes, sandbox, sql):
    # Given our report bucket at one request per 800 ms and a job that sleeps at most 200 ms for a token
    limits = json.loads(scaled_limits(SCALE)["WB_LIMITS"])
    limits["report"] = {"period_ms": 800, "limit": 1, "burst": 1}
    url, account = start(processes, sandbox, WB_LIMITS=json.dumps(limits), WB_BUCKET_MAX_SLEEP_MS="200")
    first, last, expected = period(sandbox)

    report = start_report(url, account, first, last)

    # Then it pauses for the bucket (no attempt), WB never says 429, and the import completes
    paused = wait_until(lambda: paused_status(url, report), interval=0.01, what="a bucket pause")
    assert paused["progress"]["attempt"] == 1
    wait_until(lambda: status(url, report)["state"] == "completed", timeout=60, what="the report to complete")
    assert {e["status"] for e in sandbox.log(SELLER)} <= {200, 204}
    assert {r[0] for r in sql("SELECT rrd_id FROM wb_report_rows")} == expected
