"""Worker processes: who is alive, and putting the runs of the dead back in line.

Each worker process (a dramatiq process, or an API process hosting consumers)
has a name recorded on every row it claims and a liveness key in Redis that
its lease keeper refreshes every WORKER_HEARTBEAT_MS and that lives
WORKER_DEAD_AFTER_MS. Any live worker looks, on its own tick, for running rows
whose worker's key is gone and requeues them — no scheduler, no lease expiry
and no broker redelivery needed.
"""

from __future__ import annotations

import os
import socket
import uuid

from redis import Redis

from gatehouse.dispatch import Dispatcher
from gatehouse.jobs import JobStore


def process_name() -> str:
    """A name unique to this process start: host, pid and a random tail (pids are reused)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def liveness_key(worker: str) -> str:
    return f"gatehouse:worker:{worker}:alive"


class Liveness:
    def __init__(self, redis: Redis, *, ttl_ms: int) -> None:
        self.redis = redis
        self.ttl_ms = ttl_ms

    def beat(self, worker: str) -> None:
        self.redis.set(liveness_key(worker), 1, px=self.ttl_ms)

    def leave(self, worker: str) -> None:
        self.redis.delete(liveness_key(worker))

    def missing(self, workers: set[str]) -> set[str]:
        """Of these workers, those whose liveness key is gone."""
        names = sorted(workers)
        pipe = self.redis.pipeline(transaction=False)
        for name in names:
            pipe.exists(liveness_key(name))
        return {name for name, alive in zip(names, pipe.execute(), strict=True) if not alive}


class DeadWorkers:
    """Two strikes: a worker is dead when its key was missing at two looks in a row.

    One look is not enough: right after Redis lost its data (a restart) every
    key is gone until each worker's next beat, and those workers are alive.
    """

    def __init__(self, liveness: Liveness, me: str) -> None:
        self.liveness = liveness
        self.me = me
        self._suspects: set[str] = set()

    def look(self, running: set[str]) -> set[str]:
        missing = self.liveness.missing(running - {self.me})
        dead, self._suspects = missing & self._suspects, missing
        return dead


def requeue_orphans(jobs: JobStore, dispatcher: Dispatcher, dead: set[str]) -> int:
    """Running jobs of dead workers and runs whose lease ran out: back in line, each re-sent now.

    The row is written first; if the send fails, reconciliation re-sends it.
    """
    deliveries = jobs.requeue_orphans(dead)
    for delivery in deliveries:
        dispatcher.send(delivery)
    return len(deliveries)
