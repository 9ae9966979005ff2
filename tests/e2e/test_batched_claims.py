"""Claims and outcomes batched across a worker process's threads (gatehouse_worker.batches), with a kill.

A worker killed with claim and finish batches in flight loses no job, and no job
whose outcome was written runs again: only the runs the kill cut short are run
again, once, by the recovery of a dead worker's jobs.
"""

from __future__ import annotations

from collections import Counter

from tests.support.probe_client import job, runs, submit_probes
from tests.support.processes import wait_until

JOBS = 600


def test_a_worker_killed_with_batches_in_flight_loses_nothing_and_reruns_only_what_it_cut_short(
    processes, gh
):
    # Given a busy worker (2 processes x 8 threads: claims and outcomes go in batches) and a survivor
    doomed = processes.start("doomed", "gatehouse-worker", "--processes", "2", "--threads", "8")
    ids = submit_probes(gh, JOBS, seconds=0.005)
    wait_until(lambda: len(runs(gh)) >= JOBS // 5, timeout=60, what="the doomed worker to be busy")

    # When it is killed mid-stream, then another worker takes over
    doomed_pids = doomed.tree()
    doomed.kill_tree()
    processes.start("survivor", "gatehouse-worker", "--processes", "1", "--threads", "8")

    # Then every job completes
    wait_until(
        lambda: all(job(gh, i).state == "completed" for i in ids), timeout=120, what="every job to complete"
    )
    done = runs(gh)
    counts = Counter(r["job"] for r in done)
    assert set(counts) == {str(i) for i in ids}
    # … each ran once, except those the kill cut short between their body and their outcome: those
    # ran once on the killed worker and once more, after recovery, under a second claim
    again = {j for j, n in counts.items() if n > 1}
    assert max(counts.values()) <= 2
    for j in again:
        first, second = sorted((r for r in done if r["job"] == j), key=lambda r: r["start"])
        assert first["pid"] in doomed_pids and second["pid"] not in doomed_pids
        assert job(gh, j).claims == 2
    # … and every job the killed worker ran to the end was written there, under its only claim
    ran_there = [r["job"] for r in done if r["pid"] in doomed_pids and r["job"] not in again]
    assert ran_there, "the kill came before the worker had run anything"
    assert all(job(gh, j).claims == 1 for j in ran_there)
    print(f"{len(again)} run(s) cut short by the kill ran again; {JOBS - len(again)} ran once")
