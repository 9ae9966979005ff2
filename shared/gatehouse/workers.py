"""Worker processes: who is alive, and putting the runs of the dead back in line.

Each worker process (a dramatiq process, or an API process hosting consumers)
has a name recorded on every row it claims and a liveness key in Redis that
its lease keeper refreshes every WORKER_HEARTBEAT_MS and that lives
WORKER_DEAD_AFTER_MS. Any live worker looks, on its own tick, for running rows
whose worker's key is gone and requeues them — no scheduler, no lease expiry
and no broker redelivery needed.

The key's value says what the process is (``WorkerBeat``: its threads, its
queues, when it started) and every beat also stamps the process in one sorted
set (``workers_key``), so the operations overview lists the live workers with
one range read and one MGET instead of scanning the keyspace. Both keys start
with the deployment's prefix (``BROKER_NAMESPACE``): a deployment sees only its
own workers.
"""

from __future__ import annotations

import json
import os
import socket
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime

from redis import Redis


def process_name() -> str:
    """A name unique to this process start: host, pid and a random tail (pids are reused)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


# A member whose last beat is older than this many of its key's lifetimes leaves the set.
FORGET_AFTER_TTLS = 10


def workers_key(prefix: str) -> str:
    """Every worker that beat lately, scored by its last beat (ms); its liveness key says whether it still lives."""
    return f"{prefix}:workers"


def liveness_key(prefix: str, worker: str) -> str:
    return f"{prefix}:worker:{worker}:alive"


@dataclass(frozen=True)
class WorkerBeat:
    """What a live worker process says about itself in its liveness key."""

    threads: int | None = None
    queues: tuple[str, ...] = field(default=())
    started_at: datetime | None = None

    def dumps(self) -> str:
        return json.dumps(
            {
                "threads": self.threads,
                "queues": list(self.queues),
                "startedAt": self.started_at.isoformat() if self.started_at else None,
            }
        )

    @classmethod
    def loads(cls, raw: bytes | str) -> WorkerBeat:
        """A key's value; one that is not our JSON (an older worker wrote ``1``) says nothing."""
        try:
            data = json.loads(raw)
        except ValueError:
            return cls()
        if not isinstance(data, dict):
            return cls()
        started = data.get("startedAt")
        threads = data.get("threads")
        return cls(
            threads=threads if isinstance(threads, int) else None,
            queues=tuple(q for q in data.get("queues") or () if isinstance(q, str)),
            started_at=datetime.fromisoformat(started) if isinstance(started, str) else None,
        )


class Liveness:
    def __init__(self, redis: Redis, *, prefix: str, ttl_ms: int) -> None:
        self.redis = redis
        self.prefix = prefix
        self.workers_key = workers_key(prefix)
        self.ttl_ms = ttl_ms

    def key(self, worker: str) -> str:
        return liveness_key(self.prefix, worker)

    def beat(self, worker: str, info: WorkerBeat | None = None) -> None:
        """The key (alive for ttl_ms more) and the stamp in the set of workers: one round trip."""
        now_ms = int(time.time() * 1000)
        pipe = self.redis.pipeline(transaction=False)
        pipe.set(self.key(worker), (info or WorkerBeat()).dumps(), px=self.ttl_ms)
        pipe.zadd(self.workers_key, {worker: now_ms})
        pipe.zremrangebyscore(self.workers_key, "-inf", now_ms - FORGET_AFTER_TTLS * self.ttl_ms)
        pipe.execute()

    def leave(self, worker: str) -> None:
        pipe = self.redis.pipeline(transaction=False)
        pipe.delete(self.key(worker))
        pipe.zrem(self.workers_key, worker)
        pipe.execute()

    def alive(self) -> dict[str, WorkerBeat]:
        """Every worker whose liveness key is there, with what it said: two round trips, no scan."""
        names = [n.decode() for n in self.redis.zrange(self.workers_key, 0, -1)]
        if not names:
            return {}
        values = self.redis.mget([self.key(n) for n in names])
        return {n: WorkerBeat.loads(v) for n, v in zip(names, values, strict=True) if v is not None}

    def missing(self, workers: set[str]) -> set[str]:
        """Of these workers, those whose liveness key is gone."""
        names = sorted(workers)
        pipe = self.redis.pipeline(transaction=False)
        for name in names:
            pipe.exists(self.key(name))
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
