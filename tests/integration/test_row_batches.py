"""Batched claims and outcomes (JobStore.claim_many / finish_many, gatehouse_worker.batches) on real PostgreSQL."""

from __future__ import annotations

import threading
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

from gatehouse import progress as P
from gatehouse.jobs import Outcome
from gatehouse_worker.batches import RowBatches
from tests.support.probe_client import job, submit_probes


def test_one_batch_claims_each_row_once_for_its_current_message_only(gh):
    a, b, c = submit_probes(gh, 3)
    gh.jobs.claim(c, 1, 60_000)  # already running: no message claims it
    claims = gh.jobs.claim_many(
        [(a, 1, True), (a, 1, True), (b, 2, True), (b, 1, False), (c, 1, True), (uuid.uuid4(), 1, True)],
        60_000,
        worker="w",
    )
    assert [claim is not None for claim in claims] == [True, False, False, True, False, False]
    # the duplicate of a's message is a no-op; a is claimed once, started (no gate); b is only claimed
    assert job(gh, a).claims == 1 and job(gh, a).progress == P.stored(P.RUNNING) and job(gh, a).worker == "w"
    assert job(gh, b).claims == 1 and job(gh, b).progress is None and job(gh, b).started_at is None
    assert claims[0].job.id == a and claims[3].job.id == b


def test_one_batch_of_outcomes_writes_only_the_runs_that_still_hold_their_rows(gh):
    a, b = submit_probes(gh, 2)
    mine_a, mine_b = gh.jobs.claim_many([(a, 1, True), (b, 1, True)], 60_000, worker="w")
    with gh.uow.autocommit() as tx:  # b was requeued and claimed again: the first run lost it
        gh.jobs.reschedule(tx, mine_b, eta_ms=0, progress={}, consume_attempt=False)
    gh.jobs.claim(b, 2, 60_000)
    done = gh.jobs.finish_many(
        [
            Outcome(mine_a, "completed", P.stored(P.COMPLETED), result={"n": 1}),
            Outcome(mine_b, "failed", P.stored(P.FAILED), error={"code": "x", "message": "x"}),
        ]
    )
    assert done == [True, False]
    assert (job(gh, a).state, job(gh, a).result) == ("completed", {"n": 1})
    assert (job(gh, b).state, job(gh, b).error) == ("active", None)


def test_threads_claiming_duplicated_messages_through_the_batcher_claim_each_job_once(gh):
    ids = submit_probes(gh, 100)
    rows = RowBatches(gh.jobs, worker="w", lease_ms=60_000)
    start = threading.Barrier(16)

    def deliver(job_id: uuid.UUID):
        return rows.claim(job_id, 1, start=True)

    def consumer(n: int) -> list:
        start.wait()
        # every message delivered 8 times over 16 threads: the batches carry duplicates
        return [deliver(job_id) for job_id in ids[n % 4 :: 4] + ids[(n + 1) % 4 :: 4]]

    with ThreadPoolExecutor(16) as pool:
        claims = [c for batch in pool.map(consumer, range(16)) for c in batch if c is not None]
    assert Counter(c.job.id for c in claims) == Counter(ids)
    assert all(job(gh, i).claims == 1 for i in ids)

    finished = ThreadPoolExecutor(16).map(
        lambda c: rows.finish(Outcome(c, "completed", P.stored(P.COMPLETED), result={})), claims
    )
    assert all(finished)
    assert {job(gh, i).state for i in ids} == {"completed"}
    assert not any(rows.finish(Outcome(c, "completed", P.stored(P.COMPLETED))) for c in claims[:5])
