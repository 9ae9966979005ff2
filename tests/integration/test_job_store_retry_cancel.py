"""An operator's retry and cancel of a job against real PostgreSQL and Redis, in this process (no worker).

Each is one conditional statement of the job store (with its audit row); the composition adds
the message (retry) and the gate line (cancel). Runs are played with the store's own calls.
"""

from __future__ import annotations

import json
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
from sqlmodel import Session

from gatehouse import progress as P
from gatehouse.errors import Conflict, NotFound
from gatehouse.gate import owner
from gatehouse.job_types import CART_ABANDONMENT_SWEEP, IMPORT_USER_FEEDS, IMPORT_USER_REPORT
from gatehouse.models import Account

WB_DOWN = {"code": "wb-unavailable", "message": "WB failed on GET /ping (503)"}


def account(gh) -> uuid.UUID:
    with Session(gh.engine) as s:
        row = Account(name="acc")
        s.add(row)
        s.commit()
        return row.id


def failed_job(gh, account_id: uuid.UUID | None, job_type=IMPORT_USER_FEEDS) -> uuid.UUID:
    """A job that ran two attempts and failed for good."""
    job, created = gh.job_handlers.submit(job_type, account_id=account_id)
    assert created
    first = gh.jobs.claim(job.id, 1, 60_000, start=True)
    gh.jobs.save_checkpoint(first, {"rrdId": 42})
    with gh.uow.autocommit() as tx:
        assert gh.jobs.reschedule(tx, first, eta_ms=0, progress={"phase": "retrying"}, consume_attempt=True)
        [retry] = tx.messages
    second = gh.jobs.claim(job.id, retry.number, 60_000, start=True)
    failed = P.stored(P.FAILED, reason=WB_DOWN["code"])
    with gh.uow.autocommit() as tx:
        assert gh.jobs.finish(tx, second, state="failed", progress=failed, error=WB_DOWN)
    gh.broker.flush(job_type.queue)  # the runs' messages are spent
    return job.id


def deliveries(gh, job_id: uuid.UUID, queue: str) -> list[int]:
    """The delivery numbers of the job's messages on the queue (the broker keeps each in a hash;
    a message's arguments are the job id and its number)."""
    messages = (json.loads(raw) for _, raw in gh.redis.hscan_iter(f"{gh.broker.namespace}:{queue}.msgs"))
    return [m["args"][1] for m in messages if m["message_id"] == str(job_id)]


def finish(gh, claim, **outcome) -> bool:
    with gh.uow.autocommit() as tx:
        return gh.jobs.finish(tx, claim, **outcome)


def audit(sql, job_id: uuid.UUID) -> list[tuple]:
    return [
        tuple(r)
        for r in sql(
            "SELECT actor, action, entity, before, after FROM audit_log WHERE entity_id = :id ORDER BY id",
            id=str(job_id),
        )
    ]


# -- retry -----------------------------------------------------------------------------


def test_retry_puts_a_failed_job_back_in_line_with_fresh_attempts_and_a_new_message(gh, sql):
    job_id = failed_job(gh, account(gh))
    sql("UPDATE jobs SET max_attempts = 2 WHERE id = :id", id=job_id)  # as created under an older policy
    before = gh.jobs.get(job_id)
    assert (before.state, before.attempt, before.message_number) == ("failed", 2, 2)

    retried = gh.job_handlers.retry(job_id, actor="admin")

    # Then the row is as if just created, under a new message, its checkpoint kept
    assert (retried.state, retried.attempt, retried.max_attempts, retried.message_number) == (
        "waiting",
        1,
        5,
        3,
    )
    assert (retried.progress, retried.result, retried.error) == (None, None, None)
    assert (retried.finished_at, retried.resume_at, retried.lease_until, retried.worker) == (None,) * 4
    assert retried.checkpoint == {"rrdId": 42}
    assert gh.jobs.get(job_id) == retried
    # … its message carries that number, and only that one claims it: attempt 1 of 5
    assert deliveries(gh, job_id, IMPORT_USER_FEEDS.queue) == [3]
    assert gh.jobs.claim(job_id, 2, 60_000) is None
    claim = gh.jobs.claim(job_id, 3, 60_000)
    assert (claim.job.attempt, claim.job.max_attempts) == (1, 5)
    # … and the operator's change is audited
    assert audit(sql, job_id) == [
        (
            "admin",
            "job.retry",
            "job",
            {"state": "failed", "error": WB_DOWN},
            {"state": "waiting", "error": None},
        )
    ]


def test_retry_refuses_a_job_that_is_not_failed(gh, sql):
    acc = account(gh)
    waiting, _ = gh.job_handlers.submit(IMPORT_USER_FEEDS, account_id=acc)
    with pytest.raises(Conflict) as refused:
        gh.job_handlers.retry(waiting.id, actor="admin")
    assert refused.value.code == "JOB_NOT_FAILED" and "waiting" in refused.value.detail

    claim = gh.jobs.claim(waiting.id, 1, 60_000, start=True)
    with pytest.raises(Conflict, match="active") as refused:
        gh.job_handlers.retry(waiting.id, actor="admin")
    finish(gh, claim, state="completed", progress=P.stored(P.COMPLETED), result={})
    with pytest.raises(Conflict, match="completed") as refused:
        gh.job_handlers.retry(waiting.id, actor="admin")
    assert refused.value.code == "JOB_NOT_FAILED"
    with pytest.raises(NotFound):
        gh.job_handlers.retry(uuid.uuid4(), actor="admin")
    assert gh.jobs.get(waiting.id).message_number == 1 and audit(sql, waiting.id) == []


def test_retry_while_its_account_has_a_live_job_of_its_type_is_refused_naming_that_job(gh, sql):
    acc = account(gh)
    job_id = failed_job(gh, acc)
    live, created = gh.job_handlers.submit(IMPORT_USER_FEEDS, account_id=acc)
    assert created

    with pytest.raises(Conflict) as refused:
        gh.job_handlers.retry(job_id, actor="admin")

    assert refused.value.code == "JOB_ALREADY_LIVE" and str(live.id) in refused.value.detail
    row = gh.jobs.get(job_id)
    assert (row.state, row.message_number, row.error) == ("failed", 2, WB_DOWN)
    assert audit(sql, job_id) == []
    # … another type of the same account is no obstacle, and once the live one ends the retry goes
    gh.job_handlers.submit(IMPORT_USER_REPORT, account_id=acc)
    claim = gh.jobs.claim(live.id, 1, 60_000, start=True)
    finish(gh, claim, state="completed", progress=P.stored(P.COMPLETED), result={})
    assert gh.job_handlers.retry(job_id, actor="admin").state == "waiting"


def test_a_system_job_is_retried_only_while_no_other_of_its_type_is_live(gh):
    job_id = failed_job(gh, None, CART_ABANDONMENT_SWEEP)
    live, created = gh.job_handlers.submit(CART_ABANDONMENT_SWEEP, account_id=None)
    assert created

    with pytest.raises(Conflict) as refused:
        gh.job_handlers.retry(job_id, actor="admin")

    assert refused.value.code == "JOB_ALREADY_LIVE" and str(live.id) in refused.value.detail
    assert "system job" in refused.value.detail


def test_concurrent_retries_make_one_live_job(gh):
    acc = account(gh)
    # Two failed jobs of one account and type, each retried by eight operators at once
    jobs = [failed_job(gh, acc)]
    jobs.append(failed_job(gh, acc))

    def retry(job_id):
        try:
            return gh.job_handlers.retry(job_id, actor="admin").id
        except Conflict as exc:
            return exc.code

    with ThreadPoolExecutor(16) as pool:
        outcomes = list(pool.map(retry, jobs * 8))

    # Then exactly one retry went through; the rest were told why not
    assert len([o for o in outcomes if isinstance(o, uuid.UUID)]) == 1
    assert {o for o in outcomes if isinstance(o, str)} <= {"JOB_NOT_FAILED", "JOB_ALREADY_LIVE"}
    assert sorted(gh.jobs.get(j).state for j in jobs) == ["failed", "waiting"]


# -- cancel ----------------------------------------------------------------------------


def test_cancel_ends_a_waiting_job_failed_and_its_message_claims_nothing(gh, sql):
    job, _ = gh.job_handlers.submit(IMPORT_USER_FEEDS, account_id=account(gh))
    assert deliveries(gh, job.id, IMPORT_USER_FEEDS.queue) == [1]

    cancelled, _ = gh.job_handlers.cancel(job.id, actor="admin")

    assert cancelled.state == "failed" and cancelled.finished_at is not None
    assert cancelled.error == {"code": "cancelled", "message": "cancelled by an operator (admin)"}
    assert cancelled.progress == P.stored(P.FAILED, reason=P.CANCELLED)
    assert gh.jobs.get(job.id) == cancelled
    # … the message still queued is stale: it claims nothing
    assert gh.jobs.claim(job.id, 1, 60_000) is None
    assert audit(sql, job.id) == [
        ("admin", "job.cancel", "job", {"state": "waiting"}, {"state": "failed", "error": cancelled.error})
    ]
    # … and the status poll says so in Russian
    shown = P.render(cancelled.progress, job_type=cancelled.type, attempt=cancelled.attempt, max_attempts=5)
    assert shown["phase"] == "failed"
    assert shown["message"] == "Не получилось: задача отменена оператором"


def test_cancel_ends_a_delayed_job_and_takes_it_out_of_its_accounts_gate_line(gh, sql):
    acc = account(gh)
    holder, _ = gh.job_handlers.submit(IMPORT_USER_FEEDS, account_id=acc)
    waiter, _ = gh.job_handlers.submit(IMPORT_USER_REPORT, account_id=acc)
    gate = dict(lease_ms=60_000, wanted_ttl_ms=60_000, waiting_ttl_ms=60_000, first_wait_ms=1)
    assert gh.gate.acquire(str(acc), owner(holder.queue, holder.id), tier="user", **gate).proceed
    # Given the second job parked on the gate (busy), delayed in phase waiting-account
    assert not gh.gate.acquire(str(acc), owner(waiter.queue, waiter.id), tier="user", **gate).proceed
    claim = gh.jobs.claim(waiter.id, 1, 60_000)
    with gh.uow.autocommit() as tx:
        gh.jobs.reschedule(
            tx, claim, eta_ms=2**41, progress=P.stored(P.WAITING_ACCOUNT), consume_attempt=False
        )
        [parked] = tx.messages
    assert gh.gate.inspect(str(acc)).waiting_owners == (owner(waiter.queue, waiter.id),)
    assert gh.gate.inspect(str(acc)).wanted == owner(waiter.queue, waiter.id)  # a user job wants it next

    cancelled, _ = gh.job_handlers.cancel(waiter.id, actor="8d0c5b1e-0000-4000-8000-000000000000")

    assert (cancelled.state, cancelled.resume_at, cancelled.error["code"]) == ("failed", None, "cancelled")
    assert gh.gate.inspect(str(acc)).waiting_owners == ()
    assert gh.gate.inspect(str(acc)).wanted is None  # scheduled jobs need not keep off for it
    assert gh.gate.inspect(str(acc)).holder == owner(holder.queue, holder.id)
    assert gh.jobs.claim(waiter.id, parked.number, 60_000) is None
    assert audit(sql, waiter.id)[0][:4] == (
        "8d0c5b1e-0000-4000-8000-000000000000",
        "job.cancel",
        "job",
        {"state": "delayed"},
    )


def test_cancel_asks_a_running_job_to_stop_and_refuses_a_finished_one(gh, sql):
    acc = account(gh)
    job, _ = gh.job_handlers.submit(IMPORT_USER_FEEDS, account_id=acc)
    claim = gh.jobs.claim(job.id, 1, 60_000, start=True)

    # A running job is asked to stop: the flag its lease renewal reads, audited; it stays active
    stopping, asked = gh.job_handlers.cancel(job.id, actor="admin")
    assert asked and stopping.state == "active" and stopping.cancel_requested_by == "admin"
    assert gh.jobs.renew([claim], 60_000).cancel == {claim.key}
    assert audit(sql, job.id)[0][1] == "job.cancel-request"

    finish(gh, claim, state="completed", progress=P.stored(P.COMPLETED), result={})
    with pytest.raises(Conflict) as refused:
        gh.job_handlers.cancel(job.id, actor="admin")
    assert refused.value.code == "JOB_FINISHED" and "completed" in refused.value.detail
    with pytest.raises(Conflict) as refused:
        gh.job_handlers.cancel(failed_job(gh, acc), actor="admin")
    assert refused.value.code == "JOB_FINISHED" and "failed" in refused.value.detail
    with pytest.raises(NotFound):
        gh.job_handlers.cancel(uuid.uuid4(), actor="admin")
    assert gh.jobs.get(job.id).state == "completed" and len(audit(sql, job.id)) == 1  # the request only


def test_a_cancelled_job_retried_runs_under_a_delivery_its_old_message_cannot_claim(gh):
    job, _ = gh.job_handlers.submit(IMPORT_USER_FEEDS, account_id=account(gh))
    gh.job_handlers.cancel(job.id, actor="admin")

    retried = gh.job_handlers.retry(job.id, actor="admin")

    assert (retried.state, retried.message_number, retried.error) == ("waiting", 2, None)
    assert gh.jobs.claim(job.id, 1, 60_000) is None  # the cancelled run's message
    assert gh.jobs.claim(job.id, 2, 60_000) is not None


def test_a_job_cancelled_between_attempts_is_shown_cancelled_without_a_count_of_tries(gh):
    job, _ = gh.job_handlers.submit(IMPORT_USER_FEEDS, account_id=account(gh))
    claim = gh.jobs.claim(job.id, 1, 60_000, start=True)
    progress = P.stored(P.RETRYING, reason=WB_DOWN["code"])
    with gh.uow.autocommit() as tx:
        gh.jobs.reschedule(tx, claim, eta_ms=2**41, progress=progress, consume_attempt=True, error=WB_DOWN)

    cancelled, _ = gh.job_handlers.cancel(job.id, actor="admin")

    # attempt 2 was only due: "после 2 попыток" would count one that never ran
    assert (cancelled.attempt, cancelled.resume_at) == (2, None)
    shown = P.render(cancelled.progress, job_type=cancelled.type, attempt=2, max_attempts=5)
    assert shown["message"] == "Не получилось: задача отменена оператором"
