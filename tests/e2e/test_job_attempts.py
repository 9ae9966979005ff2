"""The attempt records (job_attempts) a real worker writes through the job store, run by run."""

from __future__ import annotations

from tests.support.probe import FLAKY, PROBE
from tests.support.probe_client import job
from tests.support.processes import wait_until


def test_each_run_is_recorded_retry_then_completed_and_a_dead_workers_run_is_lost(processes, gh):
    worker = processes.start("worker", "gatehouse-worker", "--processes", "1", "--threads", "2")
    # Given a job that fails once (WB down) and then completes, and one that runs for a minute
    flaky = gh.job_handlers.submit(FLAKY, account_id=None, payload={"succeed_on": 2})[0].id
    long = gh.job_handlers.submit(PROBE, account_id=None, payload={"seconds": 60})[0].id

    # Then the flaky job has two records: attempt 1 retry (with WB's error), attempt 2 completed
    wait_until(lambda: job(gh, flaky).state == "completed", timeout=30, what="the flaky job to complete")
    first, second = gh.jobs.attempts(flaky)
    assert (first.attempt, first.outcome, first.error_code) == (1, "retry", "wb-unavailable")
    assert "503" in first.error_message
    assert (second.attempt, second.outcome, second.error_code) == (2, "completed", None)
    for run in (first, second):
        assert run.worker and run.started_at <= run.finished_at
    assert first.finished_at <= second.started_at

    # When the worker running the long job dies, its run stays open …
    running = wait_until(lambda: gh.jobs.attempts(long), timeout=20, what="the long job to start")
    assert running[0].outcome is None and running[0].finished_at is None
    worker.kill_tree()
    worker.wait(10)
    # … until recovery requeues the job: the run is lost, its end unknown
    assert gh.job_handlers.requeue_orphans({running[0].worker}) == 1
    (lost,) = gh.jobs.attempts(long)
    assert (lost.outcome, lost.finished_at, lost.worker) == ("lost", None, running[0].worker)
    assert job(gh, long).state == "waiting"
