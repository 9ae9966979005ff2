"""The job store's conditional updates against real PostgreSQL."""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor

from sqlmodel import Session

from gatehouse.models import Account
from tests.support.processes import wait_until


def account(gh) -> uuid.UUID:
    with Session(gh.engine) as s:
        row = Account(name="acc")
        s.add(row)
        s.commit()
        return row.id


def create(gh, account_id, type_="import-user-feeds"):
    return gh.jobs.create(type=type_, queue="q", tier="user", account_id=account_id, max_attempts=5)


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
    gh.jobs.finish(claim, state="completed", progress={"phase": "completed"}, result={})
    again, created = create(gh, acc, "import-user-feeds")
    assert created and again.id != feeds.id


def test_a_delivery_claims_once_and_a_stale_delivery_never(gh):
    job, _ = create(gh, account(gh))
    claim = gh.jobs.claim(job.id, 1, 60_000)
    assert claim is not None and claim.claims == 1
    assert gh.jobs.claim(job.id, 1, 60_000) is None  # duplicate of the running delivery

    moved = gh.jobs.reschedule(claim, eta_ms=0, progress={"phase": "retrying"}, consume_attempt=True)
    assert moved.delivery == 2
    assert gh.jobs.claim(job.id, 1, 60_000) is None  # the superseded delivery
    second = gh.jobs.claim(job.id, 2, 60_000)
    assert second is not None and second.job.attempt == 2


def test_an_expired_lease_puts_the_job_back_in_line_and_fences_the_old_run(gh):
    job, _ = create(gh, account(gh))
    old = gh.jobs.claim(job.id, 1, 50, worker="w-old")
    assert gh.jobs.claim(job.id, 1, 60_000) is None  # active: no delivery takes it while it runs
    [requeued] = wait_until(lambda: gh.jobs.requeue_orphans(set()), timeout=5, what="the lease to expire")
    assert requeued.delivery == 2 and gh.jobs.get(job.id).state == "waiting"
    new = gh.jobs.claim(job.id, 2, 60_000, worker="w-new")
    assert new.claims == 2 and gh.jobs.get(job.id).worker == "w-new"
    assert gh.jobs.finish(old, state="completed", progress={}, result={"from": "old"}) is False
    assert gh.jobs.renew([old, new], 60_000) == {old.key}  # the old run learns it lost the row
    assert gh.jobs.finish(new, state="completed", progress={}, result={"from": "new"}) is True
    assert gh.jobs.get(job.id).result == {"from": "new"}


def test_the_running_jobs_of_a_dead_worker_go_back_in_line_and_no_others(gh):
    acc = account(gh)
    mine, _ = create(gh, acc, "import-user-feeds")
    theirs, _ = create(gh, acc, "import-user-report")
    gh.jobs.claim(mine.id, 1, 60_000, worker="alive")
    gh.jobs.claim(theirs.id, 1, 60_000, worker="dead")
    assert gh.jobs.running_workers() == {"alive", "dead"}

    [requeued] = gh.jobs.requeue_orphans({"dead"})

    assert requeued.job_id == theirs.id and requeued.delivery == 2
    assert gh.jobs.get(theirs.id).state == "waiting" and gh.jobs.get(theirs.id).worker is None
    assert gh.jobs.get(mine.id).state == "active"
    assert gh.jobs.requeue_orphans({"dead"}) == []  # a second worker finds nothing left to take


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
    gh.jobs.reschedule(claim, eta_ms=2**41, progress={"phase": "waiting-account"}, consume_attempt=False)
    assert gh.jobs.wake(job.id, phase="rate-limited") is None  # only jobs parked in that phase
    woken = gh.jobs.wake(job.id, phase="waiting-account")
    assert woken.delivery == 3
    assert gh.jobs.claim(job.id, 2, 60_000) is None
    assert gh.jobs.claim(job.id, 3, 60_000) is not None
    assert gh.jobs.wake(job.id, phase="waiting-account") is None  # only delayed jobs can be woken
