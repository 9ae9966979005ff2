"""Graceful shutdown with real processes: in-flight work finishes, queued work stays queued."""

from __future__ import annotations

import signal

import pytest

from tests.support.probe_client import job, run_counts, submit_probes
from tests.support.processes import Proc, wait_until


def start_worker(processes):
    return processes.start("worker", "gatehouse-worker", "--processes", "1", "--threads", "1")


def start_all_in_one(processes):
    api, _ = processes.api(env={"BACKEND_ROLE": "all", "API_WORKERS": "1", "INPROCESS_CONSUMER_THREADS": "1"})
    return api


def to_top(proc: Proc, sig: int) -> None:
    proc.signal(sig)  # Kubernetes, docker stop, a terminal's kill PID


def to_group(proc: Proc, sig: int) -> None:
    proc.signal_group(sig)  # systemd KillMode=control-group, `timeout`, Procfile runners, Ctrl-C


@pytest.mark.parametrize(
    ("start", "send"),
    [(start_worker, to_top), (start_worker, to_group), (start_all_in_one, to_top)],
    ids=["worker", "worker-group", "api-role-all"],
)
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_lets_the_running_job_finish_and_keeps_the_next_one_queued(
    processes, gh, settings, start, send, sig
):
    # Given a process with one consumer thread, running a 2 s job with a second one queued behind it
    proc = start(processes)
    [running] = submit_probes(gh, 1, seconds=2)
    wait_until(lambda: job(gh, running).started_at is not None, what="the first job to start")
    [queued] = submit_probes(gh, 1, seconds=0)

    # When it is told to stop while the job runs
    send(proc, sig)

    # Then it exits 0 within the shutdown timeout …
    assert proc.wait(timeout=settings.shutdown_timeout_ms / 1000 + 5) == 0, proc.log()
    # … the running job's effect is committed …
    assert job(gh, running).state == "completed"
    assert run_counts(gh)[str(running)] == 1
    # … and the queued job was neither started nor lost: it is still waiting, with its message in Redis
    assert job(gh, queued).state == "waiting"
    assert job(gh, queued).started_at is None
    assert str(queued) not in run_counts(gh)
    assert str(queued) in gh.dispatcher.queued_job_ids({"probe"})


@pytest.mark.parametrize("send", [to_top, to_group], ids=["top", "group"])
def test_a_second_ctrl_c_kills_the_worker_without_waiting_for_its_job(processes, gh, send):
    # Given a worker running a job far longer than this test waits
    proc = start_worker(processes)
    [running] = submit_probes(gh, 1, seconds=60)
    wait_until(lambda: job(gh, running).started_at is not None, what="the job to start")

    # When Ctrl-C comes twice (the second once the graceful stop is under way)
    send(proc, signal.SIGINT)
    wait_until(lambda: "Stopping worker process" in proc.log(), what="the graceful stop to begin")
    send(proc, signal.SIGINT)

    # Then it stops now, with exit status 1, and the job is left to the lease and dead-worker recovery
    assert proc.wait(timeout=10) == 1, proc.log()
    assert "Killing worker process" in proc.log()
    assert job(gh, running).state == "active"
