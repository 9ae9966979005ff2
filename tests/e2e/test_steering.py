"""Steering under real gunicorn, a real worker and the WB sandbox: a paused queue keeps its messages
and drains on resume; a paused account parks its import (phase paused, no attempt) and runs it on
resume; a running import cancelled through the API stops at its next WB call, failed/cancelled,
and its account's gate is free."""

from __future__ import annotations

import time
import uuid

import httpx
import pytest

from tests.e2e.test_job_retry_cancel import ADMIN, FEEDS, create_account, finished, status
from tests.support.processes import wait_until
from tests.support.wb_sandbox import running_sandbox, scaled_limits

SELLER = "seller-steer"


@pytest.fixture
def sandbox():
    # 20 rows a day on pages of 10: an import of October is ~60 pages of sales and orders.
    with running_sandbox(time_scale=1000, rows_per_day=20, page_size=10) as running:
        yield running


@pytest.fixture
def fleet(processes, sandbox) -> str:
    env = {"WB_API_BASE_URL": sandbox.url, "GATE_POLL_DELAY_MS": "300", **scaled_limits(1000)}
    processes.start("worker", "gatehouse-worker", "--processes", "1", "--threads", "2", env=env)
    return processes.api(env={**env, "BACKEND_ROLE": "api"})[1]


def import_of(url: str, account: str) -> str:
    response = httpx.post(f"{url}/v1/accounts/{account}/digitization/imports", json=FEEDS, headers=ADMIN)
    assert response.status_code == 202, response.text
    return response.json()["jobId"]


def test_a_paused_queue_keeps_its_messages_and_drains_on_resume(fleet, processes, gh):
    url, worker = fleet, processes.started[0]
    account = create_account(url, SELLER)
    paused = httpx.post(f"{url}/v1/admin/queues/wb-user/pause", headers=ADMIN)
    assert paused.status_code == 200 and paused.json()["paused"] is True
    wait_until(
        lambda: "queue wb-user is held (paused by admin)" in worker.log(), timeout=10, what="the pause"
    )

    job_id = import_of(url, account)

    # For a while nothing takes it: its message waits in Redis, no attempt is spent
    until = time.monotonic() + 1.5
    while time.monotonic() < until:
        assert (gh.jobs.get(uuid.UUID(job_id)).state, gh.jobs.get(uuid.UUID(job_id)).claims) == ("waiting", 0)
        time.sleep(0.1)
    assert job_id in gh.dispatcher.queued_job_ids({"wb-user"})
    depth = {q["queue"]: q for q in httpx.get(f"{url}/v1/admin/queues", headers=ADMIN).json()["items"]}
    assert depth["wb-user"]["paused"] and depth["wb-user"]["depth"]["waiting"] == 1

    # Resumed, the worker picks it up within seconds and it completes on its first attempt
    assert httpx.post(f"{url}/v1/admin/queues/wb-user/resume", headers=ADMIN).json()["paused"] is False
    done = wait_until(lambda: finished(url, job_id), timeout=30, what="the import after the resume")
    assert done["state"] == "completed" and done["progress"]["attempt"] == 1


def test_a_paused_account_parks_its_import_and_a_running_one_is_cancelled(fleet, processes, sandbox, gh):
    url, worker = fleet, processes.started[0]
    account = create_account(url, SELLER)
    assert httpx.post(f"{url}/v1/admin/accounts/{account}/pause", headers=ADMIN).status_code == 200
    held = f"account {account} is held (paused by admin)"
    wait_until(lambda: held in worker.log(), timeout=10, what="the worker to see the hold")

    # A paused account's import parks: phase paused, a Russian message, no attempt spent, no WB call
    parked_id = import_of(url, account)
    parked = wait_until(
        lambda: (s := status(url, parked_id))["progress"] and s["progress"]["phase"] == "paused" and s,
        timeout=15,
        what="the import to park",
    )
    assert parked["state"] == "delayed" and parked["progress"]["attempt"] == 1
    assert parked["progress"]["message"].startswith("Кабинет приостановлен оператором")
    assert sandbox.log(SELLER, checks=False) == []

    # Resumed, it runs: slowed down (each WB call 150 ms), it is cancelled while it runs
    sandbox.faults(latency_ms=150)
    assert httpx.post(f"{url}/v1/admin/accounts/{account}/resume", headers=ADMIN).status_code == 200
    wait_until(lambda: len(sandbox.log(SELLER, checks=False)) >= 2, timeout=15, what="the import to call WB")
    cancel = httpx.post(f"{url}/v1/jobs/{parked_id}/cancel", headers=ADMIN)
    assert cancel.status_code == 202, cancel.text
    assert cancel.json()["state"] == "active" and cancel.json()["cancelRequestedAt"]

    # It stops at its next WB call (or checkpoint): failed, cancelled; the gate is released
    ended = wait_until(lambda: finished(url, parked_id), timeout=10, what="the cancelled import to stop")
    assert (ended["state"], ended["error"]["code"]) == ("failed", "cancelled")
    assert ended["progress"]["message"] == "Не получилось: задача отменена оператором"
    wait_until(lambda: gh.gate.inspect(account).holder is None, timeout=5, what="the gate to be released")
    calls = len(sandbox.log(SELLER, checks=False))
    assert calls < 40  # far from the ~120 calls of the whole import
    time.sleep(0.5)
    assert len(sandbox.log(SELLER, checks=False)) == calls  # nothing calls WB for it any more
