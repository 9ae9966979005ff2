"""The worker's liveness endpoint (for Kubernetes) fails when its consumers stop; a pool consumes only its --queues."""

from __future__ import annotations

import os
import signal

import httpx

from gatehouse import job_types as jt
from tests.support.probe_client import job, submit_probes
from tests.support.processes import free_port, wait_until


def status(url: str) -> int | None:
    try:
        return httpx.get(f"{url}/healthz", timeout=2).status_code
    except httpx.HTTPError:
        return None


def test_healthz_is_ok_while_consumers_run_and_fails_when_one_process_hangs(processes, gh):
    # A job of another queue, queued first: a pool started with --queues never takes it
    other, _ = gh.job_handlers.submit(jt.MAINTENANCE_PRUNE, account_id=None)
    port = free_port()
    worker = processes.start(
        "worker",
        "gatehouse-worker",
        "--processes",
        "2",
        "--threads",
        "2",
        "--queues",
        "probe",
        env={"WORKER_HEALTH_PORT": str(port), "WORKER_LIVENESS_TIMEOUT_MS": "1500"},
    )
    url = f"http://127.0.0.1:{port}"
    wait_until(lambda: status(url) == 200, timeout=30, what="the worker to report healthy")
    assert httpx.get(f"{url}/healthz").json()["processes"] == 2

    # Metrics of all worker processes are served there too
    ids = submit_probes(gh, 4)
    wait_until(lambda: all(job(gh, i).state == "completed" for i in ids), what="jobs to complete")
    assert job(gh, other.id).state == "waiting"
    assert (
        'gatehouse_job_runs_total{outcome="completed",type="probe"} 4.0' in httpx.get(f"{url}/metrics").text
    )

    # When one worker process stops (hung), liveness fails
    children = sorted(worker.tree() - {worker.pid})
    stuck = next(p for p in children if _is_worker_process(p))
    os.kill(stuck, signal.SIGSTOP)
    try:
        wait_until(lambda: status(url) == 503, timeout=10, what="liveness to fail")
    finally:
        os.kill(stuck, signal.SIGCONT)


def _is_worker_process(pid: int) -> bool:
    # The fork serving /healthz has no liveness file; worker processes do.
    from pathlib import Path

    return any(Path("/tmp").glob(f"gatehouse-worker-*/alive/{pid}"))
