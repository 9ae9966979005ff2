"""N ≥ 2 consumers never double-process, even when the broker delivers a message twice."""

from __future__ import annotations

from gatehouse.jobs import message_of
from tests.support.probe_client import job, run_counts, submit_probes
from tests.support.processes import wait_until

JOBS = 500


def test_500_jobs_with_duplicated_messages_run_exactly_once_on_two_workers(processes, gh):
    # Given two worker deployments (three consumer processes in all)
    processes.start("worker-a", "gatehouse-worker", "--processes", "2", "--threads", "4")
    processes.start("worker-b", "gatehouse-worker", "--processes", "1", "--threads", "4")

    # When 500 jobs are queued and every message is sent again (and some a third time)
    ids = submit_probes(gh, JOBS)
    for n, job_id in enumerate(ids):
        message = message_of(job(gh, job_id))
        gh.dispatcher.send(message)
        if n % 5 == 0:
            gh.dispatcher.send(message)

    # Then every job completes and its effect happened exactly once
    wait_until(lambda: len(run_counts(gh)) == JOBS, timeout=120, what="all jobs to run")
    wait_until(
        lambda: not gh.dispatcher.queued_job_ids({"probe"}), timeout=60, what="the duplicates to drain"
    )
    counts = run_counts(gh)
    assert set(counts) == {str(i) for i in ids}
    assert set(counts.values()) == {1}
    assert all(job(gh, i).state == "completed" for i in ids)
