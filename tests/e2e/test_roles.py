"""BACKEND_ROLE with real processes: who serves HTTP, who consumes."""

from __future__ import annotations

import httpx

from tests.support.probe_client import job, runs, submit_probes
from tests.support.processes import wait_until


def all_completed(gh, ids):
    return all(job(gh, i).state == "completed" for i in ids)


def test_api_role_serves_http_and_leaves_the_queue_to_workers(processes, gh):
    # Given an API process with BACKEND_ROLE=api that is up and answering
    api, url = processes.api(env={"BACKEND_ROLE": "api"})
    assert httpx.get(f"{url}/healthz").status_code == 200

    # When jobs are queued and only afterwards a worker starts
    ids = submit_probes(gh, 6)
    worker = processes.start("worker", "gatehouse-worker", "--processes", "1", "--threads", "2")
    wait_until(lambda: all_completed(gh, ids), what="the worker to run the jobs")

    # Then every job ran in the worker, none in the API process
    pids = {r["pid"] for r in runs(gh)}
    assert pids <= worker.tree()
    assert not pids & api.tree()


def test_worker_role_consumes_and_opens_no_port(processes, gh):
    worker = processes.start("worker", "gatehouse-worker", "--processes", "2", "--threads", "2")
    ids = submit_probes(gh, 6)
    wait_until(lambda: all_completed(gh, ids), what="the worker to run the jobs")

    assert {r["pid"] for r in runs(gh)} <= worker.tree()
    assert worker.listening_ports() == set()


def test_all_role_serves_http_and_consumes_in_process(processes, gh):
    api, url = processes.api(env={"BACKEND_ROLE": "all"})
    ids = submit_probes(gh, 6)
    wait_until(lambda: all_completed(gh, ids), what="the API's in-process consumers to run the jobs")

    assert httpx.get(f"{url}/readyz").status_code == 200
    assert {r["pid"] for r in runs(gh)} <= api.tree()


def test_unknown_role_exits_non_zero_naming_the_allowed_values(processes):
    proc = processes.start("api", "gatehouse-api", env={"BACKEND_ROLE": "scheduler"})
    assert proc.wait(timeout=20) != 0
    log = proc.log()
    assert "BACKEND_ROLE" in log
    assert "all, api, worker" in log
