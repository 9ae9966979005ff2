"""A WB 429 is noted for its account: the operator sees which job WB paused, when and until when."""

from __future__ import annotations

from datetime import datetime, timedelta

import httpx

from tests.e2e.test_wb_pauses import ADMIN, paused_status, period, sandbox, start, start_report, status  # noqa: F401
from tests.support.processes import wait_until


def test_a_429_pause_is_recorded_for_the_account_and_shown_to_operators(processes, sandbox):  # noqa: F811
    # Given WB answering 429 (retry in 1 s) to the second page of a report
    url, account = start(processes, sandbox)
    first, last, _ = period(sandbox)
    sandbox.faults(force_429=[{"bucket": "report", "nth": 2, "retry_s": 1.0}])

    # When the import runs into it and pauses
    report = start_report(url, account, first, last)
    wait_until(lambda: paused_status(url, report), interval=0.01, what="the report to pause")

    # Then the account's gate view names the pause: this job, WB's 429, until about a second later
    gate = httpx.get(f"{url}/v1/admin/accounts/{account}/gate", headers=ADMIN).json()
    [pause] = gate["recentPauses"]
    assert pause["jobId"] == report and pause["reason"] == "wb-429"
    at, until = datetime.fromisoformat(pause["at"]), datetime.fromisoformat(pause["resumeAt"])
    assert timedelta(milliseconds=800) <= until - at <= timedelta(milliseconds=1500)
    # … the accounts list marks the account hot, and the job completes all the same
    listed = httpx.get(f"{url}/v1/admin/accounts", params={"hot": "true"}, headers=ADMIN).json()["items"]
    assert [a["accountId"] for a in listed] == [account]
    wait_until(lambda: status(url, report)["state"] == "completed", timeout=30, what="the report to complete")
    again = httpx.get(f"{url}/v1/admin/accounts/{account}/gate", headers=ADMIN).json()["recentPauses"]
    # One pause noted per 429 WB answered: the forced one, and any the sandbox's own limits gave a slow run
    answered_429 = [e for e in sandbox.log() if e["status"] == 429]
    assert len(answered_429) >= 1
    assert [(p["jobId"], p["reason"]) for p in again] == [(report, "wb-429")] * len(answered_429)
