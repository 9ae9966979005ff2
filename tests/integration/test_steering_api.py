"""Steering through the falcon app on real PostgreSQL and Redis: queue and account holds, bulk retry
and cancel, a running job's cancel, the jobs search; each change audited, bad input a named 422."""

from __future__ import annotations

import uuid

import pytest
from falcon import testing

from gatehouse import progress as P
from gatehouse.job_types import MAINTENANCE_BULK_JOBS, SYNC_INCREMENTAL
from gatehouse_api.app import create_app
from tests.integration.test_api_contract import ADMIN, FEEDS, assert_problem, create_account, imports
from tests.support.accounts import forget_account_checks

pytestmark = pytest.mark.usefixtures("clean")


@pytest.fixture
def client(gh):
    return testing.TestClient(create_app(gh))


def audited(sql, entity_id: str) -> list[tuple]:
    rows = sql("SELECT actor, action FROM audit_log WHERE entity_id = :id ORDER BY id", id=entity_id)
    return [tuple(r) for r in rows]


def fail(gh, job_id: uuid.UUID, number: int, code: str) -> None:
    claim = gh.jobs.claim(job_id, number, 60_000, start=True)
    error = {"code": code, "message": code}
    with gh.uow.autocommit() as tx:
        assert gh.jobs.finish(
            tx, claim, state="failed", progress=P.stored(P.FAILED, reason=code), error=error
        )


def test_a_queue_is_paused_and_resumed_listed_with_its_depth_and_audited(client, gh, sql):
    account = create_account(client)
    forget_account_checks(gh)
    client.simulate_post(imports(account), json=FEEDS, headers=ADMIN)

    listed = client.simulate_get("/v1/admin/queues", headers=ADMIN)
    assert listed.status_code == 200, listed.text
    queues = {q["queue"]: q for q in listed.json["items"]}
    assert {"maintenance", "schedules", "wb-user", "wb-scheduled", "notifications.email"} <= set(queues)
    assert queues["wb-user"]["depth"] == {"waiting": 1, "active": 0, "delayed": 0}
    assert queues["wb-user"]["oldestAgeMs"]["waiting"] >= 0 and queues["wb-user"]["paused"] is False

    paused = client.simulate_post("/v1/admin/queues/wb-user/pause", headers=ADMIN)
    assert paused.status_code == 200, paused.text
    assert paused.json["paused"] is True and paused.json["pausedBy"] == "admin"
    assert client.simulate_post("/v1/admin/queues/wb-user/pause", headers=ADMIN).json["paused"] is True
    queues = {q["queue"]: q for q in client.simulate_get("/v1/admin/queues", headers=ADMIN).json["items"]}
    assert queues["wb-user"]["paused"] is True and queues["wb-scheduled"]["paused"] is False
    assert gh.holds.queue_paused("wb-user")

    resumed = client.simulate_post("/v1/admin/queues/wb-user/resume", headers=ADMIN)
    assert resumed.status_code == 200 and resumed.json["paused"] is False
    assert not gh.holds.queue_paused("wb-user")
    # Pausing twice wrote one row: one pause, one resume in the audit log
    assert audited(sql, "wb-user") == [("admin", "queue.pause"), ("admin", "queue.resume")]

    # A module that is off holds its queues in the same answer
    gh.module_handlers.set_module("webhooks", enabled=False, by="admin")
    queues = {q["queue"]: q for q in client.simulate_get("/v1/admin/queues", headers=ADMIN).json["items"]}
    assert queues["webhook.deliver"]["paused"] is True and queues["webhook.deliver"]["module"] == "webhooks"

    assert_problem(client.simulate_post("/v1/admin/queues/nope/pause", headers=ADMIN), 404, "QUEUE_NOT_FOUND")
    assert_problem(client.simulate_post("/v1/admin/queues/wb-user/resume"), 401, "UNAUTHORIZED")


def test_an_account_is_paused_and_resumed(client, gh, sql):
    account = create_account(client)

    paused = client.simulate_post(f"/v1/admin/accounts/{account}/pause", headers=ADMIN)
    assert paused.status_code == 200, paused.text
    assert paused.json["accountId"] == account and paused.json["paused"] is True
    assert client.simulate_get(f"/v1/accounts/{account}", headers=ADMIN).json["paused"] is True

    resumed = client.simulate_post(f"/v1/admin/accounts/{account}/resume", headers=ADMIN)
    assert resumed.status_code == 200 and resumed.json["paused"] is False
    assert client.simulate_get(f"/v1/accounts/{account}", headers=ADMIN).json["paused"] is False
    assert audited(sql, account) == [("admin", "account.pause"), ("admin", "account.resume")]

    missing = f"/v1/admin/accounts/{uuid.uuid4()}/pause"
    assert_problem(client.simulate_post(missing, headers=ADMIN), 404, "NOT_FOUND")


def test_bulk_retry_and_cancel_count_queue_one_job_and_name_a_bad_field(client, gh, sql):
    accounts = [create_account(client, f"Shop {n}") for n in range(3)]
    forget_account_checks(gh)
    jobs = [client.simulate_post(imports(a), json=FEEDS, headers=ADMIN).json["jobId"] for a in accounts]
    fail(gh, uuid.UUID(jobs[0]), 1, "wb-unauthorized")
    fail(gh, uuid.UUID(jobs[1]), 1, "wb-unavailable")

    def post(action: str, body: dict):
        return client.simulate_post(f"/v1/admin/jobs/{action}", json=body, headers=ADMIN)

    assert post("retry", {"dryRun": True}).json == {"matched": 2}
    dry = post(
        "retry", {"filter": {"errorCode": "wb-unauthorized", "type": "import-user-feeds"}, "dryRun": True}
    )
    assert dry.status_code == 200 and dry.json == {"matched": 1}
    assert post("cancel", {"filter": {"accountId": accounts[2]}, "dryRun": True}).json == {"matched": 1}

    queued = post("retry", {"filter": {"errorCode": "wb-unauthorized"}})
    assert queued.status_code == 202, queued.text
    assert (
        queued.json["matched"] == 1 and queued.headers["location"] == f"/v1/jobs/{queued.json['operationId']}"
    )
    operation = gh.jobs.require(uuid.UUID(queued.json["operationId"]))
    assert (operation.type, operation.queue, operation.state) == (
        MAINTENANCE_BULK_JOBS.name,
        "maintenance",
        "waiting",
    )

    # Its body (as the worker runs it) retries the match, audited with the requester
    result = gh.job_handlers.run_bulk(operation.payload, {}, lambda checkpoint: None)
    assert result == {"action": "retry", "matched": 1, "done": 1, "skipped": 0}
    assert gh.jobs.require(uuid.UUID(jobs[0])).state == "waiting"
    assert gh.jobs.require(uuid.UUID(jobs[1])).state == "failed"
    assert audited(sql, jobs[0]) == [("admin", "job.retry")]

    cancel = post("cancel", {"filter": {"accountId": accounts[2], "state": "waiting"}})
    operation = gh.jobs.require(uuid.UUID(cancel.json["operationId"]))
    gh.job_handlers.run_bulk(operation.payload, {}, lambda checkpoint: None)
    cancelled = gh.jobs.require(uuid.UUID(jobs[2]))
    assert (cancelled.state, cancelled.error["code"]) == ("failed", "cancelled")

    assert_problem(post("retry", {"filter": {"state": "waiting"}}), 422, "VALIDATION_ERROR", "filter.state")
    assert_problem(post("cancel", {"filter": {"type": "nope"}}), 422, "VALIDATION_ERROR", "filter.type")
    assert_problem(post("retry", {"filter": {"accountId": "x"}}), 422, "VALIDATION_ERROR", "filter.accountId")
    finished = {"filter": {"finishedAfter": "2026-01-01T00:00:00Z"}}
    assert_problem(post("cancel", finished), 422, "VALIDATION_ERROR", "filter.finishedAfter")
    assert_problem(post("retry", {"filter": {"colour": "red"}}), 422, "VALIDATION_ERROR", "filter.colour")


def test_cancelling_a_running_job_answers_202_and_flags_it(client, gh):
    account = create_account(client)
    job_id = client.simulate_post(imports(account), json=FEEDS, headers=ADMIN).json["jobId"]
    claim = gh.jobs.claim(uuid.UUID(job_id), 1, 60_000, start=True)

    response = client.simulate_post(f"/v1/jobs/{job_id}/cancel", headers=ADMIN)

    assert response.status_code == 202, response.text
    assert response.json["state"] == "active" and response.json["cancelRequestedAt"] is not None
    assert gh.jobs.renew([claim], 60_000).cancel == {claim.key}


def test_the_jobs_search_finds_an_id_prefix_an_account_name_and_an_error_code(client, gh):
    shop, other = create_account(client, "Ромашка Shop"), create_account(client, "Other")
    forget_account_checks(gh)
    mine = client.simulate_post(imports(shop), json=FEEDS, headers=ADMIN).json["jobId"]
    theirs = client.simulate_post(imports(other), json=FEEDS, headers=ADMIN).json["jobId"]
    fail(gh, uuid.UUID(theirs), 1, "wb-forbidden")
    gh.job_handlers.submit(SYNC_INCREMENTAL, account_id=uuid.UUID(other))

    def found(q: str, **filters: str) -> list[str]:
        response = client.simulate_get("/v1/admin/jobs", params={"q": q, **filters}, headers=ADMIN)
        assert response.status_code == 200, response.text
        return [j["jobId"] for j in response.json["items"]]

    assert found(mine) == [mine]
    assert found(mine[:6].upper()) == [mine]
    assert found("рОмАшКа") == [mine]
    assert found("wb-forbidden") == [theirs]
    assert found("other", type="import-user-feeds") == [theirs]  # combined with the filters
    assert found("no such thing") == []
    assert_problem(
        client.simulate_get("/v1/admin/jobs", params={"q": "x" * 201}, headers=ADMIN),
        422,
        "VALIDATION_ERROR",
        "q",
    )
