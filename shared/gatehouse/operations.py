"""The operator's overview: per queue and per worker, what waits, runs and failed right now.

Read-only snapshots, one code path for the console's overview and
GET /v1/admin/overview:

- ``job_counts``: ONE grouped statement over the jobs table gives, per queue,
  its ready (waiting), delayed and running rows and the failed of the last 24 h,
  and per worker its running rows. The live rows come from the partial index
  ``jobs_live_by_state``, the recent failed ones from ``jobs_failed_by_finished``
  (``finished_at WHERE state = 'failed'``), so the completed rows — nearly all
  of the table — are never read.
- ``dead_letters``: the size of Dramatiq's dead-letter set of every queue (the
  Redis broker's ``{namespace}:{queue}.XQ``: messages whose actor raised), one
  pipelined round trip; ``dead_deliveries``: the webhook deliveries whose
  attempts ran out (``webhook_deliveries.status = 'dead'``), the dead letters
  of ``webhook.deliver``, kept in PostgreSQL with their attempts and replayable.
- ``workers``: the live worker processes from their liveness keys
  (gatehouse.workers: threads, queues, start) with their running rows as
  ``busy`` and the jobs themselves (``running_jobs``: what each one is doing); a worker that still has running rows but no key is listed as not
  alive (the next live worker's tick requeues its jobs).

``Operations.snapshot`` puts them together for every queue of the job registry (zero
counts too), marks the held queues as paused (gatehouse.pauses), and reads only
the stores the caller found answering (the API's readiness checks), so the
overview still renders, with what it can know, while a store is down.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from dramatiq.common import xq_name
from redis import Redis
from sqlalchemy import Connection, Engine, text

from gatehouse.job_types import WEBHOOK_QUEUE
from gatehouse.models import ACTIVE, LIVE_STATES
from gatehouse.modules import module_of_queue
from gatehouse.pauses import Holds, Pause, job_queues
from gatehouse.workers import Liveness, WorkerBeat

FAILED_WINDOW = "24 hours"
# Each branch written as its partial index's predicate and read from that index alone: one
# statement whose WHERE ORs the two was a parallel sequential scan of the whole table (0.85-1.1 s
# at 100,000 accounts, bench_fleet_reads), the OR hiding the indexes from the planner's estimate.
JOB_COUNTS = f"""
SELECT queue,
       CASE WHEN state = 'active' THEN worker END AS worker,
       count(*) FILTER (WHERE state = 'waiting') AS ready,
       count(*) FILTER (WHERE state = 'delayed') AS delayed,
       count(*) FILTER (WHERE state = 'active') AS running,
       0 AS failed
  FROM jobs
 WHERE state IN {LIVE_STATES}
 GROUP BY 1, 2
UNION ALL
SELECT queue, NULL, 0, 0, 0, count(*)
  FROM jobs
 WHERE state = 'failed' AND finished_at > now() - interval '{FAILED_WINDOW}'
 GROUP BY 1
"""
# GET /v1/admin/queues: each queue's live rows by state and the oldest of each (jobs_live_by_state).
# The live rows per queue and state, in one grouped read (GET /v1/admin/queues and the scrape's gauges,
# gatehouse.live_metrics): how many, the oldest's creation, and how long the oldest has been due in
# seconds (waiting or delayed: since its eta or creation; active: since it started).
QUEUE_DEPTHS = f"""
SELECT queue, state, count(*) AS n, min(created_at) AS oldest,
       greatest(0, extract(epoch FROM now() - min(
           CASE state WHEN '{ACTIVE}' THEN started_at ELSE coalesce(resume_at, created_at) END
       )))::float8 AS oldest_due_s
  FROM jobs WHERE state IN {LIVE_STATES} GROUP BY 1, 2"""
DEAD_DELIVERIES = "SELECT count(*) FROM webhook_deliveries WHERE status = 'dead'"
# What each worker runs right now: its active rows, longest-running first (index jobs_active_by_worker).
RUNNING_JOBS = """
SELECT worker, id, type, account_id, started_at FROM jobs
 WHERE state = 'active' AND worker IS NOT NULL
 ORDER BY started_at NULLS LAST LIMIT :limit"""
RUNNING_SHOWN = 500  # at most this many running jobs are listed (the counts stay exact)


@dataclass(frozen=True)
class QueueCounts:
    ready: int = 0
    delayed: int = 0
    running: int = 0
    failed_24h: int = 0


@dataclass(frozen=True)
class JobCounts:
    queues: dict[str, QueueCounts]
    busy: dict[str, int]  # worker process -> its running rows


def job_counts(conn: Connection) -> JobCounts:
    queues: dict[str, list[int]] = {}
    busy: dict[str, int] = {}
    for row in conn.execute(text(JOB_COUNTS)):
        sums = queues.setdefault(row.queue, [0, 0, 0, 0])
        for i, n in enumerate((row.ready, row.delayed, row.running, row.failed)):
            sums[i] += n
        if row.worker is not None:
            busy[row.worker] = busy.get(row.worker, 0) + row.running
    return JobCounts({q: QueueCounts(*sums) for q, sums in queues.items()}, busy)


@dataclass(frozen=True)
class RunningJob:
    id: uuid.UUID
    type: str
    account_id: uuid.UUID | None
    started_at: datetime | None


def running_jobs(conn: Connection) -> dict[str, list[RunningJob]]:
    """Worker process -> the jobs it runs (up to RUNNING_SHOWN in all)."""
    running: dict[str, list[RunningJob]] = {}
    for row in conn.execute(text(RUNNING_JOBS), {"limit": RUNNING_SHOWN}):
        running.setdefault(row.worker, []).append(
            RunningJob(row.id, row.type, row.account_id, row.started_at)
        )
    return running


def dead_deliveries(conn: Connection) -> int:
    return conn.execute(text(DEAD_DELIVERIES)).scalar_one()


def dead_letters(redis: Redis, namespace: str, queues: Iterable[str]) -> dict[str, int]:
    """Messages in each queue's Dramatiq dead-letter set (one pipelined round trip)."""
    names = list(queues)
    pipe = redis.pipeline(transaction=False)
    for queue in names:
        pipe.zcard(f"{namespace}:{xq_name(queue)}")
    return dict(zip(names, pipe.execute(), strict=True))


def queue_names(seen: Iterable[str] = ()) -> list[str]:
    """Every queue of the job registry, and any other that has rows (a job type of a test, say)."""
    return sorted(set(job_queues()) | set(seen))


@dataclass(frozen=True)
class Depth:
    count: int = 0
    oldest: datetime | None = None  # the oldest row's creation


@dataclass(frozen=True)
class QueueState:
    """A queue as GET /v1/admin/queues shows it: held or not, and its live rows by state."""

    name: str
    module: str | None
    pause: Pause | None  # None: consumed
    depth: dict[str, Depth]  # waiting, active, delayed


def queue_depths(conn: Connection) -> dict[str, dict[str, Depth]]:
    depths: dict[str, dict[str, Depth]] = {}
    for row in conn.execute(text(QUEUE_DEPTHS)):
        depths.setdefault(row.queue, {})[row.state] = Depth(row.n, row.oldest)
    return depths


@dataclass(frozen=True)
class QueueSnapshot:
    name: str
    module: str | None  # the module that owns it (gatehouse.modules), None: the core's
    paused: bool | None  # held (gatehouse.pauses), so its consumers are paused; None: PostgreSQL is down
    counts: QueueCounts | None  # None: PostgreSQL did not answer
    dead_letters: int | None  # Dramatiq's dead-letter set; None: Redis did not answer
    dead_deliveries: int | None = None  # webhook.deliver only: dead webhook deliveries
    pause: Pause | None = None  # who holds it and since when (a module that is off: its switch)


@dataclass(frozen=True)
class WorkerSnapshot:
    name: str
    alive: bool
    busy: int | None  # its running job rows; None: PostgreSQL did not answer
    beat: WorkerBeat = field(default_factory=WorkerBeat)
    jobs: tuple[RunningJob, ...] = ()  # what it runs (longest first)


@dataclass(frozen=True)
class Snapshot:
    at: datetime
    stores: dict[str, str]  # store -> "ok" or "down: …" (the readiness checks' outcome)
    queues: list[QueueSnapshot]
    workers: list[WorkerSnapshot] | None  # None: Redis did not answer (no liveness to read)


def workers(
    alive: dict[str, WorkerBeat],
    busy: dict[str, int] | None,
    running: dict[str, list[RunningJob]] | None = None,
) -> list[WorkerSnapshot]:
    """The live workers, and the ones that still hold running rows without a liveness key."""
    names = sorted(set(alive) | set(busy or ()))
    running = running or {}
    return [
        WorkerSnapshot(
            name=name,
            alive=name in alive,
            busy=None if busy is None else busy.get(name, 0),
            beat=alive.get(name, WorkerBeat()),
            jobs=tuple(running.get(name, ())),
        )
        for name in names
    ]


class Operations:
    """The overview's reads: PostgreSQL, the broker's dead letters, the workers' liveness, the holds."""

    def __init__(
        self, engine: Engine, redis: Redis, namespace: str, holds: Holds, liveness: Liveness
    ) -> None:
        self.engine, self.redis, self.namespace = engine, redis, namespace
        self.holds, self.liveness = holds, liveness

    def queues(self) -> list[QueueState]:
        """Every queue, held or not, with its live rows by state (one grouped statement)."""
        with self.engine.connect() as conn:
            depths = queue_depths(conn)
        held = self.holds.paused_queues()
        return [
            QueueState(
                name=name,
                module=module.name if (module := module_of_queue(name)) else None,
                pause=held.get(name),
                depth={state: depths.get(name, {}).get(state, Depth()) for state in LIVE_STATES},
            )
            for name in queue_names(depths)
        ]

    def snapshot(self, stores: dict[str, str]) -> Snapshot:
        """The overview, reading only the stores ``stores`` says answer (the rest shows as unknown)."""
        pg, redis = stores.get("postgresql") == "ok", stores.get("redis") == "ok"
        counts: JobCounts | None = None
        dead_webhooks: int | None = None
        running: dict[str, list[RunningJob]] | None = None
        if pg:
            with self.engine.connect() as conn:
                counts = job_counts(conn)
                dead_webhooks = dead_deliveries(conn)
                running = running_jobs(conn)
        names = queue_names(counts.queues if counts else ())
        held = self.holds.paused_queues() if pg else {}
        dead = dead_letters(self.redis, self.namespace, names) if redis else None
        queues = [
            QueueSnapshot(
                name=name,
                module=module.name if (module := module_of_queue(name)) else None,
                paused=name in held if pg else None,
                pause=held.get(name),
                counts=counts.queues.get(name, QueueCounts()) if counts else None,
                dead_letters=dead[name] if dead is not None else None,
                dead_deliveries=dead_webhooks if name == WEBHOOK_QUEUE else None,
            )
            for name in names
        ]
        alive = self.liveness.alive() if redis else None
        return Snapshot(
            at=datetime.now(UTC),
            stores=dict(stores),
            queues=queues,
            workers=workers(alive, counts.busy if counts else None, running) if alive is not None else None,
        )
