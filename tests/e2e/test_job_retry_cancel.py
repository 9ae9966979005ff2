"""An operator's retry and cancel of a job under real gunicorn, real workers and the WB sandbox."""

from __future__ import annotations

import uuid

import httpx
import pytest

from tests.conftest import ADMIN_TOKEN
from tests.e2e.test_gate import GATE_ENV, account, done, segments, worker
from tests.support.probe import GATED_USER_A, GATED_USER_B
from tests.support.processes import wait_until
from tests.support.wb_sandbox import running_sandbox, scaled_limits

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
SELLER = "seller-retry"  # a raw (non-JWT) token is its own seller id
FEEDS = {"kind": "feeds", "dateFrom": "2026-10-01", "dateTo": "2026-10-31"}
CANCELLED_TEXT = "Не получилось: задача отменена оператором"


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def assert_problem(response: httpx.Response, status: int, code: str) -> dict:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["code"] == code
    return response.json()


def create_account(url: str, token: str = SELLER) -> str:
    response = httpx.post(f"{url}/v1/accounts", json={"name": "Shop", "wbToken": token}, headers=ADMIN)
    assert response.status_code == 201, response.text
    return response.json()["accountId"]


def status(url: str, job_id: str) -> dict:
    return httpx.get(f"{url}/v1/jobs/{job_id}", headers=ADMIN).json()


def finished(url: str, job_id: str) -> dict | None:
    current = status(url, job_id)
    return current if current["state"] in ("completed", "failed") else None


def audit(sql, job_id: str) -> list[tuple]:
    rows = sql("SELECT actor, action FROM audit_log WHERE entity_id = :id ORDER BY id", id=job_id)
    return [tuple(r) for r in rows]


# -- retry -----------------------------------------------------------------------------


@pytest.fixture
def sandbox():
    with running_sandbox(time_scale=1000, rows_per_day=3, page_size=40) as running:
        yield running


def test_a_failed_import_retried_runs_again_from_attempt_one_and_completes(processes, sandbox, sql):
    env = {"WB_API_BASE_URL": sandbox.url, **scaled_limits(1000)}
    processes.start("worker", "gatehouse-worker", "--processes", "1", "--threads", "2", env=env)
    _, url = processes.api(env={**env, "BACKEND_ROLE": "api"})
    acc = create_account(url)
    # Given an import that failed at once: WB rejected the token (401) on its sales call
    sandbox.faults(force_status=[{"bucket": "sales", "status": 401, "times": 1}])
    imports = f"{url}/v1/accounts/{acc}/digitization/imports"
    job_id = httpx.post(imports, json=FEEDS, headers=ADMIN).json()["jobId"]
    failed = wait_until(lambda: finished(url, job_id), timeout=60, what="the import to fail")
    assert failed["state"] == "failed" and failed["error"]["code"] == "wb-unauthorized"

    # When an operator retries it
    response = httpx.post(f"{url}/v1/jobs/{job_id}/retry", headers=ADMIN)

    # Then it is back in line as if just created …
    assert response.status_code == 202, response.text
    assert response.headers["location"] == f"/v1/jobs/{job_id}"
    body = response.json()
    assert set(body) == set(status(url, job_id))  # the status poll's shape
    assert (body["jobId"], body["state"], body["progress"]) == (job_id, "waiting", None)
    assert (body["error"], body["result"], body["finishedAt"]) == (None, None, None)
    # … a worker runs it again, from attempt 1 of 5, and it completes
    done_ = wait_until(lambda: finished(url, job_id), timeout=60, what="the retried import to finish")
    assert done_["state"] == "completed", done_
    assert (done_["progress"]["attempt"], done_["progress"]["maxAttempts"]) == (1, 5)
    assert set(done_["result"]) == {"orders", "sales"} and done_["error"] is None
    # … the retry is audited, and a completed job is not retried
    assert audit(sql, job_id) == [("admin", "job.retry")]
    assert_problem(httpx.post(f"{url}/v1/jobs/{job_id}/retry", headers=ADMIN), 409, "JOB_NOT_FAILED")


def test_retry_and_cancel_answer_why_not_and_are_for_operators_only(processes, sql):
    # Given the API alone: jobs stay where the calls put them
    _, url = processes.api(env={"BACKEND_ROLE": "api"})
    acc = create_account(url)
    seller = bearer(httpx.post(f"{url}/v1/accounts/{acc}/keys", headers=ADMIN).json()["key"])
    user = httpx.post(
        f"{url}/v1/admin/users", json={"email": "ops@example.com", "name": "Ops"}, headers=ADMIN
    )
    staff = bearer(
        httpx.post(f"{url}/v1/admin/users/{user.json()['userId']}/keys", headers=ADMIN).json()["key"]
    )
    imports = f"{url}/v1/accounts/{acc}/digitization/imports"
    first = httpx.post(imports, json=FEEDS, headers=ADMIN).json()["jobId"]

    # A waiting job is not retried; an account key may do neither, even to its own job; unknown is 404
    assert_problem(httpx.post(f"{url}/v1/jobs/{first}/retry", headers=ADMIN), 409, "JOB_NOT_FAILED")
    for action in ("retry", "cancel"):
        assert_problem(httpx.post(f"{url}/v1/jobs/{first}/{action}", headers=seller), 403, "FORBIDDEN")
        assert_problem(httpx.post(f"{url}/v1/jobs/{uuid.uuid4()}/{action}", headers=seller), 403, "FORBIDDEN")
        assert_problem(httpx.post(f"{url}/v1/jobs/{uuid.uuid4()}/{action}", headers=ADMIN), 404, "NOT_FOUND")
    assert status(url, first)["state"] == "waiting"

    # When a staff user cancels the waiting job
    cancelled = httpx.post(f"{url}/v1/jobs/{first}/cancel", headers=staff)

    # Then it ended failed, and the poll says it was cancelled
    assert cancelled.status_code == 200, cancelled.text
    assert cancelled.json() == status(url, first)
    assert cancelled.json()["state"] == "failed" and cancelled.json()["error"]["code"] == "cancelled"
    assert cancelled.json()["progress"]["phase"] == "failed"
    assert cancelled.json()["progress"]["message"] == CANCELLED_TEXT
    assert_problem(httpx.post(f"{url}/v1/jobs/{first}/cancel", headers=ADMIN), 409, "JOB_FINISHED")

    # When a new import of that kind is live, the cancelled one cannot be retried beside it
    second = httpx.post(imports, json=FEEDS, headers=ADMIN).json()
    assert second["alreadyRunning"] is False
    refused = assert_problem(
        httpx.post(f"{url}/v1/jobs/{first}/retry", headers=ADMIN), 409, "JOB_ALREADY_LIVE"
    )
    assert second["jobId"] in refused["detail"]

    # … and once that one is cancelled too, it can
    assert httpx.post(f"{url}/v1/jobs/{second['jobId']}/cancel", headers=ADMIN).status_code == 200
    retried = httpx.post(f"{url}/v1/jobs/{first}/retry", headers=ADMIN)
    assert retried.status_code == 202 and retried.json()["state"] == "waiting"
    assert status(url, first)["state"] == "waiting"
    staff_id = user.json()["userId"]
    assert audit(sql, first) == [(staff_id, "job.cancel"), ("admin", "job.retry")]


# -- cancel ----------------------------------------------------------------------------


def test_a_job_cancelled_while_it_waits_for_the_gate_leaves_the_line_and_never_runs(processes, gh):
    worker(processes)
    _, url = processes.api(env={"BACKEND_ROLE": "api", **GATE_ENV})
    acc = account(gh)
    # Given a job holding the account's gate and another one parked behind it
    holder = gh.job_handlers.submit(GATED_USER_A, account_id=acc, payload={"seconds": 1.5})[0].id
    wait_until(lambda: gh.jobs.get(holder).started_at, what="the holder to start")
    waiter = gh.job_handlers.submit(GATED_USER_B, account_id=acc, payload={"seconds": 0.1})[0].id
    wait_until(
        lambda: (gh.jobs.get(waiter).progress or {}).get("phase") == "waiting-account", what="it to wait"
    )
    gate = f"{url}/v1/admin/accounts/{acc}/gate"
    assert httpx.get(gate, headers=ADMIN).json()["waiting"] == [str(waiter)]

    # When the waiting one is cancelled
    response = httpx.post(f"{url}/v1/jobs/{waiter}/cancel", headers=ADMIN)

    # Then it has failed as cancelled and is out of the gate's line
    assert response.status_code == 200, response.text
    polled = status(url, str(waiter))
    assert (polled["state"], polled["error"]["code"]) == ("failed", "cancelled")
    assert polled["progress"]["phase"] == "failed" and polled["progress"]["message"] == CANCELLED_TEXT
    assert httpx.get(gate, headers=ADMIN).json()["waiting"] == []

    # … and it never runs: the holder finishes and the gate is free, its stale message is consumed
    wait_until(lambda: done(gh, holder), timeout=20, what="the holder to finish")
    assert gh.jobs.get(holder).state == "completed"
    wait_until(lambda: gh.gate.inspect(str(acc)).holder is None, timeout=5, what="the gate to be released")
    wait_until(
        lambda: str(waiter) not in gh.dispatcher.queued_job_ids({GATED_USER_B.queue}),
        timeout=10,
        what="the cancelled job's parked message to be consumed",
    )
    row = gh.jobs.get(waiter)
    assert (row.state, row.error["code"], row.started_at) == ("failed", "cancelled", None)
    assert str(waiter) not in segments(gh)
    # … and a finished job is not cancelled
    assert_problem(httpx.post(f"{url}/v1/jobs/{holder}/cancel", headers=ADMIN), 409, "JOB_FINISHED")
