"""Graceful shutdown with real processes: in-flight work finishes, queued work stays queued."""

from __future__ import annotations

import signal

import pytest

from tests.support.probe_client import job, run_counts, submit_probes
from tests.support.processes import wait_until


def start_worker(processes):
    return processes.start("worker", "gatehouse-worker", "--processes", "1", "--threads", "1")


def start_all_in_one(processes):
    api, _ = processes.api(env={"BACKEND_ROLE": "all", "API_WORKERS": "1", "INPROCESS_CONSUMER_THREADS": "1"})
    return api


@pytest.mark.parametrize("start", [start_worker, start_all_in_one], ids=["worker", "api-role-all"])
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_lets_the_running_job_finish_and_keeps_the_next_one_queued(
    processes, gh, settings, start, sig
):
    # Given a process with one consumer thread, running a 2 s job with a second one queued behind it
    proc = start(processes)
    [running] = submit_probes(gh, 1, seconds=2)
    wait_until(lambda: job(gh, running).started_at is not None, what="the first job to start")
    [queued] = submit_probes(gh, 1, seconds=0)

    # When it is told to stop while the job runs
    proc.signal(sig)

    # Then it exits 0 within the shutdown timeout …
    assert proc.wait(timeout=settings.shutdown_timeout_ms / 1000 + 5) == 0
    # … the running job's effect is committed …
    assert job(gh, running).state == "completed"
    assert run_counts(gh)[str(running)] == 1
    # … and the queued job was neither started nor lost: it is still waiting, with its message in Redis
    assert job(gh, queued).state == "waiting"
    assert job(gh, queued).started_at is None
    assert str(queued) not in run_counts(gh)
    assert str(queued) in gh.dispatcher.queued_job_ids({"probe"})
