"""The producer path and reconciliation against real PostgreSQL and Redis."""

from __future__ import annotations

from gatehouse.composition import bootstrap
from tests.support.probe import PROBE
from tests.support.probe_client import job
from tests.support.processes import free_port


def test_submit_writes_the_row_then_enqueues_one_message(gh):
    created, is_new = gh.job_handlers.submit(PROBE, account_id=None)
    assert is_new and created.state == "waiting"
    assert gh.dispatcher.queued_job_ids({"probe"}) == {str(created.id)}


def test_submit_with_redis_down_keeps_the_row_and_reconciliation_enqueues_it(gh, settings):
    offline = bootstrap(settings.model_copy(update={"redis_url": f"redis://127.0.0.1:{free_port()}/0"}))
    accepted, _ = offline.job_handlers.submit(PROBE, account_id=None)
    offline.close()
    assert job(gh, accepted.id).state == "waiting"
    assert gh.dispatcher.queued_job_ids({"probe"}) == set()

    assert gh.job_handlers.reconcile(grace_ms=0) == 1
    assert gh.dispatcher.queued_job_ids({"probe"}) == {str(accepted.id)}
    # A second pass finds the message and sends nothing.
    assert gh.job_handlers.reconcile(grace_ms=0) == 0


def test_reconciliation_leaves_young_rows_to_their_producer(gh, settings):
    offline = bootstrap(settings.model_copy(update={"redis_url": f"redis://127.0.0.1:{free_port()}/0"}))
    offline.job_handlers.submit(PROBE, account_id=None)
    offline.close()
    assert gh.job_handlers.reconcile(grace_ms=60_000) == 0


def test_reconciliation_resends_an_active_job_whose_worker_died(gh, sql):
    accepted, _ = gh.job_handlers.submit(PROBE, account_id=None)
    gh.broker.flush("probe")  # the message died with its worker
    gh.jobs.claim(accepted.id, 1, 1)
    sql("UPDATE jobs SET lease_until = now() - interval '1 second' WHERE id = :id", id=accepted.id)

    assert gh.job_handlers.reconcile(grace_ms=60_000) == 1
    # … back in line under a new message, which is on the queue; the dead run's message is stale
    assert gh.dispatcher.queued_job_ids({"probe"}) == {str(accepted.id)}
    assert gh.jobs.claim(accepted.id, 1, 60_000) is None
    assert gh.jobs.claim(accepted.id, 2, 60_000) is not None


def test_reconciliation_does_not_resend_jobs_that_finished_while_it_looked_for_their_messages(gh):
    """The race seen at worker boot: rows still waiting when reconciliation read them, their messages
    consumed and acked by a running worker before it scanned the broker. Nothing is owed them."""
    jobs = [gh.job_handlers.submit(PROBE, account_id=None)[0] for _ in range(20)]
    scan = gh.job_handlers.dispatcher.queued_job_ids

    def scan_after_the_workers_finished(queues):
        for accepted in jobs:  # a running worker takes and finishes each, then acks its message
            claim = gh.jobs.claim(accepted.id, accepted.message_number, 60_000, start=True)
            with gh.uow.autocommit() as tx:
                assert gh.jobs.finish(tx, claim, state="completed", progress={"phase": "completed"})
        gh.broker.flush("probe")
        return scan(queues)

    gh.job_handlers.dispatcher.queued_job_ids = scan_after_the_workers_finished
    assert gh.job_handlers.reconcile(grace_ms=0) == 0
    assert scan({"probe"}) == set()
