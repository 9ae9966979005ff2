"""Boot reconciliation: rows written while the broker was unreachable run after a worker starts."""

from __future__ import annotations

from gatehouse.composition import bootstrap
from tests.support.probe import PROBE
from tests.support.probe_client import job, run_counts, submit_probes
from tests.support.processes import free_port, wait_until


def test_rows_accepted_while_redis_was_down_run_once_after_a_worker_starts(processes, gh, settings):
    # Given a producer whose Redis is unreachable: it still accepts jobs (rows, no messages)
    offline = bootstrap(settings.model_copy(update={"redis_url": f"redis://127.0.0.1:{free_port()}/0"}))
    stranded = [offline.job_handlers.submit(PROBE, account_id=None)[0].id for _ in range(10)]
    offline.close()
    assert all(job(gh, i).state == "waiting" for i in stranded)
    assert not gh.dispatcher.queued_job_ids({"probe"})
    # … and jobs queued normally, which must not run twice
    queued = submit_probes(gh, 5)

    # When a worker starts
    processes.start("worker", "gatehouse-worker", "--processes", "2", "--threads", "2")

    # Then all of them run, each exactly once
    everything = stranded + queued
    wait_until(lambda: all(job(gh, i).state == "completed" for i in everything), what="all jobs to complete")
    counts = run_counts(gh)
    assert {str(i) for i in everything} == set(counts)
    assert set(counts.values()) == {1}
