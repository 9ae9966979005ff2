"""Dead-worker recovery with real processes and the default leases: no scheduler, no lease expiry.

A worker killed mid-job has its job running again on a live worker within
20 s (the liveness key lives WORKER_DEAD_AFTER_MS = 10 s), while the job's
row lease (90 s), its gate lease (90 s) and Dramatiq's own redelivery (60 s
plus a 1-in-1000 draw) would all have been far too slow. A worker that is only
paused for less than that keeps its job.
"""

from __future__ import annotations

import os
import signal
import time
import uuid

import pytest

from tests.support.probe import GATED_USER_A, PROBE
from tests.support.probe_client import job, run_counts
from tests.support.processes import wait_until

# The production leases and timeouts (the fixtures' FAST values would hide the point).
DEFAULTS = {
    "JOB_LEASE_MS": "90000",
    "JOB_HEARTBEAT_MS": "30000",
    "GATE_LEASE_MS": "90000",
    "GATE_HEARTBEAT_MS": "30000",
    "BROKER_HEARTBEAT_TIMEOUT_MS": "60000",
    "BROKER_MAINTENANCE_CHANCE": "1000",
}
RECOVERY_TARGET_S = 20


def worker(processes, name: str):
    return processes.start(name, "gatehouse-worker", "--processes", "1", "--threads", "2", env=DEFAULTS)


def live_workers(gh) -> int:
    return len(list(gh.redis.scan_iter(gh.liveness.key("*"))))


def submit(gh, job_type, seconds: float) -> uuid.UUID:
    account_id = (
        gh.account_handlers.create_account(f"acc-{uuid.uuid4().hex[:6]}", "token").id
        if job_type.gate
        else None
    )
    return gh.job_handlers.submit(job_type, account_id=account_id, payload={"seconds": seconds})[0].id


@pytest.mark.parametrize("job_type", [PROBE, GATED_USER_A], ids=["plain", "gated"])
def test_a_killed_workers_job_runs_again_within_20_s_without_a_scheduler(processes, gh, job_type):
    # Given a job running on worker A, and a second worker B alive beside it
    doomed = worker(processes, "doomed")
    job_id = submit(gh, job_type, seconds=60)
    first = wait_until(lambda: job(gh, job_id).worker, timeout=20, what="worker A to run the job")
    worker(processes, "survivor")
    wait_until(lambda: live_workers(gh) == 2, timeout=20, what="worker B to be alive")

    # When A dies without a chance to clean up
    doomed.kill_tree()
    killed = time.monotonic()

    # Then B runs the job again within 20 s: same job, a new claim, B's name on the row
    rerun = wait_until(
        lambda: (row := job(gh, job_id)).claims == 2 and row.state == "active" and row,
        timeout=RECOVERY_TARGET_S,
        interval=0.05,
        what="the job to run again",
    )
    recovered_in = time.monotonic() - killed
    print(f"recovered in {recovered_in:.1f} s")
    assert rerun.worker != first and rerun.attempt == 1  # a crash costs no attempt
    assert rerun.started_at is not None
    if job_type.gate:  # the dead run's gate lease (90 s) did not stand in the way: same owner
        assert gh.gate.inspect(str(rerun.account_id)).holder.endswith(str(job_id))


def test_a_worker_paused_for_less_than_its_heartbeat_keeps_its_job(processes, gh):
    # Given a 6 s job on worker A, and a worker B that would take it over if A looked dead
    paused = worker(processes, "paused")
    job_id = submit(gh, PROBE, seconds=6)
    wait_until(lambda: job(gh, job_id).worker, timeout=20, what="worker A to run the job")
    worker(processes, "bystander")
    wait_until(lambda: live_workers(gh) == 2, timeout=20, what="worker B to be alive")

    # When A is frozen for 4 s (a long GC pause, SIGSTOP) — less than WORKER_DEAD_AFTER_MS
    frozen = paused.tree()
    for pid in frozen:
        os.kill(pid, signal.SIGSTOP)
    time.sleep(4)  # the pause itself is the condition under test, not a synchronisation
    for pid in frozen:
        os.kill(pid, signal.SIGCONT)

    # Then A finishes it: one claim, one run
    wait_until(lambda: job(gh, job_id).state == "completed", timeout=30, what="the job to complete")
    assert job(gh, job_id).claims == 1
    assert run_counts(gh)[str(job_id)] == 1
