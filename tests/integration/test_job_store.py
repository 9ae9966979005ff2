"""The job store's conditional updates against real PostgreSQL."""

from __future__ import annotations

import json
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
from sqlmodel import Session

from gatehouse.job_types import IMPORT_USER_FEEDS, IMPORT_USER_REPORT, REGISTRY
from gatehouse.models import Account
from tests.support.processes import wait_until


def account(gh) -> uuid.UUID:
    with Session(gh.engine) as s:
        row = Account(name="acc")
        s.add(row)
        s.commit()
        return row.id


def create(gh, account_id, type_="import-user-feeds"):
    with gh.uow.autocommit() as tx:
        return gh.jobs.create(tx, REGISTRY[type_], account_id=account_id)


def write(gh, change):
    """``change(tx)`` in an autocommit unit of work; returns what it returned and the messages it
    recorded there (the unit of work sends them when the block ends)."""
    with gh.uow.autocommit() as tx:
        result = change(tx)
        recorded = list(tx.messages)
    return result, recorded


def finish(gh, claim, **outcome) -> bool:
    return write(gh, lambda tx: gh.jobs.finish(tx, claim, **outcome))[0]


def queued(gh, job_id, queue=IMPORT_USER_FEEDS.queue) -> list[int]:
    """The numbers of the job's messages in the broker (queued or delayed: it keeps each in a hash)."""
    numbers = []
    for name in (queue, f"{queue}.DQ"):
        for _, raw in gh.redis.hscan_iter(f"{gh.broker.namespace}:{name}.msgs"):
            m = json.loads(raw)
            if m["message_id"] == str(job_id):
                numbers.append(m["args"][1])
    return sorted(numbers)


def test_concurrent_creates_of_one_account_and_type_make_one_live_job(gh):
    acc = account(gh)
    with ThreadPoolExecutor(16) as pool:
        results = list(pool.map(lambda _: create(gh, acc), range(32)))
    assert sum(created for _, created in results) == 1
    assert len({job.id for job, _ in results}) == 1


def test_other_types_and_finished_jobs_do_not_block_creation(gh):
    acc = account(gh)
    feeds, _ = create(gh, acc, "import-user-feeds")
    report, created = create(gh, acc, "import-user-report")
    assert created and report.id != feeds.id
    claim = gh.jobs.claim(feeds.id, 1, 60_000)
    finish(gh, claim, state="completed", progress={"phase": "completed"}, result={})
    again, created = create(gh, acc, "import-user-feeds")
    assert created and again.id != feeds.id


def test_a_created_job_is_sent_after_its_write_and_a_live_duplicate_is_not(gh):
    acc = account(gh)
    (job, created), recorded = write(gh, lambda tx: gh.jobs.create(tx, IMPORT_USER_FEEDS, account_id=acc))
    assert created and [(m.job_id, m.number) for m in recorded] == [(job.id, 1)]
    assert queued(gh, job.id) == [1]
    (same, created), recorded = write(gh, lambda tx: gh.jobs.create(tx, IMPORT_USER_FEEDS, account_id=acc))
    assert (same.id, created, recorded) == (job.id, False, [])
    assert queued(gh, job.id) == [1]
    # … and a creation in a transaction that rolls back leaves neither a row nor a message
    with pytest.raises(RuntimeError), gh.uow.begin() as tx:
        other, _ = gh.jobs.create(tx, IMPORT_USER_REPORT, account_id=acc)
        raise RuntimeError("rolled back")
    assert gh.jobs.get(other.id) is None and queued(gh, other.id, IMPORT_USER_REPORT.queue) == []


def test_a_delivery_claims_once_and_a_stale_delivery_never(gh):
    job, _ = create(gh, account(gh))
    claim = gh.jobs.claim(job.id, 1, 60_000)
    assert claim is not None and claim.claims == 1
    assert gh.jobs.claim(job.id, 1, 60_000) is None  # duplicate of the running message

    moved, [message] = write(
        gh,
        lambda tx: gh.jobs.reschedule(
            tx, claim, eta_ms=0, progress={"phase": "retrying"}, consume_attempt=True
        ),
    )
    assert moved and (message.job_id, message.number) == (job.id, 2)
    assert gh.jobs.claim(job.id, 1, 60_000) is None  # the superseded message
    second = gh.jobs.claim(job.id, 2, 60_000)
    assert second is not None and second.job.attempt == 2


def test_an_expired_lease_puts_the_job_back_in_line_and_fences_the_old_run(gh):
    job, _ = create(gh, account(gh))
    old = gh.jobs.claim(job.id, 1, 50, worker="w-old")
    assert gh.jobs.claim(job.id, 1, 60_000) is None  # active: no message takes it while it runs
    gh.broker.flush(IMPORT_USER_FEEDS.queue)  # the message died with its run

    def requeue():
        count, recorded = write(gh, lambda tx: gh.jobs.requeue_orphans(tx, set()))
        return (count, recorded) if count else None

    count, [requeued] = wait_until(requeue, timeout=5, what="the lease to expire")
    assert count == 1 and requeued.number == 2 and gh.jobs.get(job.id).state == "waiting"
    assert queued(gh, job.id) == [2]
    new = gh.jobs.claim(job.id, 2, 60_000, worker="w-new")
    assert new.claims == 2 and gh.jobs.get(job.id).worker == "w-new"
    assert finish(gh, old, state="completed", progress={}, result={"from": "old"}) is False
    assert gh.jobs.renew([old, new], 60_000).lost == {old.key}  # the old run learns it lost the row
    assert finish(gh, new, state="completed", progress={}, result={"from": "new"}) is True
    assert gh.jobs.get(job.id).result == {"from": "new"}


def test_the_running_jobs_of_a_dead_worker_go_back_in_line_and_no_others(gh):
    acc = account(gh)
    mine, _ = create(gh, acc, "import-user-feeds")
    theirs, _ = create(gh, acc, "import-user-report")
    gh.jobs.claim(mine.id, 1, 60_000, worker="alive")
    gh.jobs.claim(theirs.id, 1, 60_000, worker="dead")
    assert gh.jobs.running_workers() == {"alive", "dead"}

    count, [requeued] = write(gh, lambda tx: gh.jobs.requeue_orphans(tx, {"dead"}))

    assert count == 1 and requeued.job_id == theirs.id and requeued.number == 2
    assert gh.jobs.get(theirs.id).state == "waiting" and gh.jobs.get(theirs.id).worker is None
    assert gh.jobs.get(mine.id).state == "active"
    # a second worker finds nothing left to take
    assert write(gh, lambda tx: gh.jobs.requeue_orphans(tx, {"dead"})) == (0, [])


def test_reconciliation_sends_a_requeued_job_once_however_short_its_grace(gh, sql):
    job, _ = create(gh, account(gh))
    gh.broker.flush(IMPORT_USER_FEEDS.queue)  # the message died with its worker
    gh.jobs.claim(job.id, 1, 60_000, worker="w-gone")
    sql("UPDATE jobs SET lease_until = now() - interval '1 second' WHERE id = :id", id=job.id)

    # Requeued (its lease ran out), and then waiting and settled: still one message
    assert gh.job_handlers.reconcile(grace_ms=0) == 1
    assert queued(gh, job.id) == [2]
    assert gh.redis.llen(f"{gh.broker.namespace}:{IMPORT_USER_FEEDS.queue}") == 1


def test_a_claim_without_admission_records_the_start_in_the_same_statement(gh):
    job, _ = create(gh, account(gh))
    claim = gh.jobs.claim(job.id, 1, 60_000, start=True)
    assert claim.job.progress["phase"] == "running"
    row = gh.jobs.get(job.id)
    assert (row.state, row.started_at is not None, row.progress) == ("active", True, claim.job.progress)
    # … while a claim without start leaves both to the admission that follows it
    other, _ = create(gh, account(gh))
    assert gh.jobs.claim(other.id, 1, 60_000).job.progress is None
    assert gh.jobs.get(other.id).started_at is None


def test_wake_makes_a_delayed_job_due_under_a_new_delivery(gh):
    job, _ = create(gh, account(gh))
    claim = gh.jobs.claim(job.id, 1, 60_000)
    write(
        gh,
        lambda tx: gh.jobs.reschedule(
            tx, claim, eta_ms=2**41, progress={"phase": "waiting-account"}, consume_attempt=False
        ),
    )
    # only jobs parked in that phase
    assert write(gh, lambda tx: gh.jobs.wake(tx, job.id, phase="rate-limited")) == (False, [])
    woken, [message] = write(gh, lambda tx: gh.jobs.wake(tx, job.id, phase="waiting-account"))
    assert woken and message.number == 3
    assert gh.jobs.claim(job.id, 2, 60_000) is None
    assert gh.jobs.claim(job.id, 3, 60_000) is not None
    # only delayed jobs can be woken
    assert write(gh, lambda tx: gh.jobs.wake(tx, job.id, phase="waiting-account")) == (False, [])
