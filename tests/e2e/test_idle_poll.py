"""Idle consumers poll their queues at WORKER_IDLE_POLL_MS, the quiet queues' at WORKER_QUIET_POLL_MS.

What is counted is what reaches Redis: the broker's fetch calls of a real
``gatehouse-worker`` on this test's Redis database, read with MONITOR.
"""

from __future__ import annotations

import time
from collections import Counter

import redis

from gatehouse_worker.wiring import QUIET_QUEUES
from tests.support.processes import wait_until

WATCH_S = 3.0


def fetches(redis_url: str, db: int, seconds: float) -> Counter[str]:
    """Fetch calls per queue (a delay queue counts as its queue) on database ``db`` during ``seconds``."""
    counted: Counter[str] = Counter()
    client = redis.Redis.from_url(redis_url)
    try:
        with client.monitor() as monitor:
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline:
                seen = monitor.next_command()
                args = seen["command"].split()
                # EVALSHA <sha> 1 <namespace> fetch <now> <queue> …: the dispatch script's fetch
                if seen["db"] == db and args[:1] == ["EVALSHA"] and args[4:5] == ["fetch"]:
                    counted[args[6].removesuffix(".DQ")] += 1
    finally:
        client.close()
    return counted


def test_quiet_queues_are_polled_ten_times_less_often(processes, gh, settings):
    processes.start(
        "worker",
        "gatehouse-worker",
        "--processes",
        "1",
        "--threads",
        "1",
        env={"WORKER_IDLE_POLL_MS": "100", "WORKER_QUIET_POLL_MS": "1000"},
    )
    wait_until(lambda: any(gh.redis.scan_iter(gh.liveness.key("*"))), timeout=30, what="the worker to boot")
    time.sleep(1.5)  # not synchronisation: lets every consumer's backoff grow to its ceiling first
    db = gh.redis.connection_pool.connection_kwargs["db"]
    counted = fetches(settings.redis_url, db, WATCH_S)

    # A queue and its delay queue: two consumers, each polling every 50–100 ms (dramatiq's jitter)
    for queue in ("wb-user", "wb-scheduled", "webhook.deliver", "catalog.bulk-operation"):
        assert counted[queue] >= 2 * WATCH_S / 0.1 * 0.8, (queue, counted)
    # …and at 500–1000 ms on a quiet queue
    assert {"schedules", "maintenance", "notifications.email", "carts.sweep"} <= QUIET_QUEUES
    for queue in QUIET_QUEUES:
        assert 1 <= counted[queue] <= 2 * WATCH_S / 0.5 + 2, (queue, counted)
