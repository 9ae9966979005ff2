"""What a real worker logs for normal gate traffic: nothing an operator must act on.

A job parked behind its account's gate, the hand-off that wakes it, its old
delayed copy arriving afterwards and a duplicate of a finished job's message
are all normal: they log at DEBUG/INFO with their reason, never as a WARNING
(and never as Dramatiq's "Message … was skipped", which it logs as one).
WARNING is for what needs a human.
"""

from __future__ import annotations

import re
import uuid

from gatehouse.jobs import message_of
from tests.support.accounts import bare_account
from tests.support.probe import GATED_USER_A, GATED_USER_B, RUNS_KEY
from tests.support.probe_client import submit_probes
from tests.support.processes import wait_until

GATE_ENV = {"GATE_LEASE_MS": "2000", "GATE_HEARTBEAT_MS": "300", "GATE_POLL_DELAY_MS": "300"}
# A level as the worker's log format writes it: "[…] [gatehouse_worker.pipeline] [WARNING] …".
WARNING_OR_WORSE = re.compile(r"\[(WARNING|ERROR|CRITICAL)\]| (WARNING|ERROR|CRITICAL) ")


def done(gh, *ids) -> bool:
    return all(gh.jobs.get(i).state in ("completed", "failed") for i in ids)


def gate_traffic(processes, gh, *worker_args: str):
    """A park, a hand-off, an old delayed copy and two stale duplicates; returns (worker log, ids)."""
    worker = processes.start(
        "worker", "gatehouse-worker", "--processes", "1", "--threads", "4", *worker_args,
        env={**GATE_ENV, "LOG_LEVEL": "INFO"},
    )  # fmt: skip
    acc = bare_account(gh, f"acc-{uuid.uuid4().hex[:6]}")  # no WB behind this worker: no token check

    # Given one job holding its account's gate long enough for another to park behind it more than once
    holder = gh.job_handlers.submit(GATED_USER_A, account_id=acc, payload={"seconds": 1.2})[0].id
    wait_until(lambda: gh.jobs.get(holder).started_at, timeout=20, what="the holder to start")
    waiter = gh.job_handlers.submit(GATED_USER_B, account_id=acc, payload={"seconds": 0.1})[0].id
    wait_until(
        lambda: (gh.jobs.get(waiter).progress or {}).get("phase") == "waiting-account",
        timeout=10,
        interval=0.01,
        what="the second job to park behind the gate",
    )
    wait_until(lambda: done(gh, holder, waiter), timeout=20, what="both jobs to finish")
    assert gh.jobs.get(holder).state == gh.jobs.get(waiter).state == "completed"
    # The waiter parked (it started only after the holder let go), and each body ran once
    assert gh.jobs.get(waiter).started_at >= gh.jobs.get(holder).finished_at
    assert len(gh.redis.lrange(RUNS_KEY, 0, -1)) == 2

    # When the broker delivers each finished job's message once more (a stale duplicate)
    for job_id in (holder, waiter):
        gh.dispatcher.send(message_of(gh.jobs.get(job_id)))
    # … and every message, the waiter's old delayed copy too, has been consumed and acked
    wait_until(
        lambda: not gh.dispatcher.queued_job_ids({"probe"}),
        timeout=10,
        what="the duplicates and the old delayed copy to be consumed",
    )
    assert len(gh.redis.lrange(RUNS_KEY, 0, -1)) == 2, "a stale message ran a body again"
    assert gh.jobs.get(holder).state == gh.jobs.get(waiter).state == "completed"
    return worker.log(), holder, waiter


def assert_nothing_loud(log: str) -> None:
    assert "Worker process is ready for action" in log, log  # the log is the worker's, and live
    assert "was skipped" not in log, log
    loud = [line for line in log.splitlines() if WARNING_OR_WORSE.search(line)]
    assert not loud, "\n".join(loud)


def test_parking_hand_off_and_stale_deliveries_log_no_warning(processes, gh):
    log, _, _ = gate_traffic(processes, gh)

    # Then the operator's log (INFO) has no "was skipped" and no line at WARNING or above
    assert_nothing_loud(log)


def test_parking_and_stale_deliveries_are_logged_at_debug_with_their_reason(processes, gh):
    log, holder, waiter = gate_traffic(processes, gh, "--verbose")

    # Then the waiting job says whom it waits for, each stale message says why it is dropped …
    assert re.search(rf"\[DEBUG\] job {waiter} waits for account \S+ \(held by \S*{holder}\)", log), log
    for job_id in (holder, waiter):
        assert re.search(rf"\[DEBUG\] message \d+ of job {job_id} is stale or a duplicate; dropped", log), log
    # … and still nothing of it is a warning
    assert_nothing_loud(log)


def test_log_level_sets_the_level_of_the_consumer_processes(processes, gh):
    one = ("--processes", "1", "--threads", "2")
    # WARNING: the worker boots and runs jobs (alone, so these are its), and its consumer process logs
    # nothing at INFO or DEBUG — not even dramatiq's "ready for action". Its parent, dramatiq's
    # supervisor, set up its own logging before ours: it may say that it boots.
    quiet = processes.start("worker-warning", "gatehouse-worker", *one, env={"LOG_LEVEL": "WARNING"})
    ids = submit_probes(gh, 4)
    wait_until(lambda: all(gh.jobs.get(i).state == "completed" for i in ids), timeout=30, what="the jobs")
    log = quiet.log()
    assert not [
        line
        for line in log.splitlines()
        if re.search(r"\[(INFO|DEBUG)\]", line) and "MainProcess" not in line
    ], log

    # DEBUG: the consumer process logs its debug lines (without --verbose)
    chatty = processes.start("worker-debug", "gatehouse-worker", *one, env={"LOG_LEVEL": "debug"})
    wait_until(
        lambda: re.search(r"\[dramatiq\.worker\.ConsumerThread\(\S+\)\] \[DEBUG\]", chatty.log()),
        timeout=30,
        what="the debug worker's consumer threads to say they run",
    )
