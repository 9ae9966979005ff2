"""Job-row overhead: Gatehouse jobs vs the floor (the same unavoidable SQL in raw psycopg) vs bare Dramatiq.

All three run trivial bodies on the same Redis broker with the same in-process
worker (8 threads), in this process, one after the other, alternating over
several rounds:

- bare: Dramatiq messages, nothing else;
- floor: bare Dramatiq plus the SQL a durable job cannot do without, in raw
  psycopg on the same ``jobs`` table: the producer's INSERT … ON CONFLICT …
  RETURNING before the enqueue, the consumer's claim UPDATE and completion
  UPDATE; its broker consumes the same queues as Gatehouse's (an idle queue
  costs a poll), without middleware;
- gatehouse: ``JobHandlers.submit`` and the job pipeline (claim, lease keeper,
  decision, fenced completion), on the ungated path.

``gatehouse/floor`` is what Gatehouse's own code costs on top of the SQL;
``floor/bare`` what durability itself costs.
"""

from __future__ import annotations

import statistics
import threading
import time
import uuid

import psycopg
from dramatiq import Actor
from dramatiq.brokers.redis import RedisBroker
from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool
from redis import Redis

from bench.support import Result, bench_settings, running_worker
from gatehouse.job_types import JobType
from gatehouse_worker import runtime
from gatehouse_worker.wiring import build

N = 2000
ROUNDS = 3
NOOP = JobType("bench-noop", queue="bench")

FLOOR_INSERT = """
INSERT INTO jobs (id, type, queue, tier, account_id, max_attempts, payload)
VALUES (%s, 'bench-floor', 'floor', 'user', NULL, 1, %s)
ON CONFLICT (account_id, type) WHERE state IN ('waiting', 'active', 'delayed') DO NOTHING
RETURNING id, message_number"""
FLOOR_CLAIM = """
UPDATE jobs SET state = 'active', claims = claims + 1, updated_at = now()
WHERE id = %s AND message_number = %s AND state IN ('waiting', 'delayed') RETURNING claims"""
LIVE_LEFT = "SELECT EXISTS (SELECT 1 FROM jobs WHERE state IN ('waiting', 'active', 'delayed'))"
FLOOR_DONE = """
UPDATE jobs SET state = 'completed', finished_at = now(), updated_at = now()
WHERE id = %s AND claims = %s AND state = 'active'"""


@runtime.job(NOOP)
def noop(ctx: runtime.JobContext) -> None:
    return None


def drain(broker, send, n: int, done: threading.Semaphore) -> float:
    with running_worker(broker):
        start = time.perf_counter()
        for _ in range(n):
            send()
        for _ in range(n):
            done.acquire()
        return n / (time.perf_counter() - start)


def bare_dramatiq(settings) -> float:
    broker = RedisBroker(client=Redis.from_url(settings.redis_url), namespace="bench-bare", middleware=[])
    done = threading.Semaphore(0)
    actor = Actor(
        lambda: done.release(), broker=broker, actor_name="bare", queue_name="bare", priority=0, options={}
    )
    rate = drain(broker, actor.send, N, done)
    broker.close()
    return rate


def floor(settings, queues: set[str]) -> float:
    pool = ConnectionPool(settings.libpq_url, min_size=1, max_size=10, kwargs={"autocommit": True}, open=True)
    broker = RedisBroker(client=Redis.from_url(settings.redis_url), namespace="bench-floor", middleware=[])
    for queue in queues:  # the same queues as Gatehouse's worker consumes (each polled when idle)
        broker.declare_queue(queue)
    done = threading.Semaphore(0)

    def consume(job_id: str, number: int) -> None:
        with pool.connection() as conn:
            claims = conn.execute(FLOOR_CLAIM, (job_id, number)).fetchone()[0]
        with pool.connection() as conn:
            conn.execute(FLOOR_DONE, (job_id, claims))
        done.release()

    actor = Actor(consume, broker=broker, actor_name="floor", queue_name="floor", priority=0, options={})

    def produce() -> None:
        with pool.connection() as conn:
            job_id, number = conn.execute(FLOOR_INSERT, (uuid.uuid4(), Jsonb({}))).fetchone()
        actor.send_with_options(args=(str(job_id), number), message_id=str(job_id))

    rate = drain(broker, produce, N, done)
    broker.close()
    pool.close()
    return rate


def gatehouse_jobs(gh) -> float:
    # The body runs inside the pipeline and the completion is its last write, so wait
    # for the rows, not the bodies: until no live row is left (the partial index of live
    # rows answers that without scanning the finished ones; 100 polls a second cost next to nothing).
    with running_worker(gh.broker), psycopg.connect(gh.settings.libpq_url, autocommit=True) as conn:
        start = time.perf_counter()
        for _ in range(N):
            gh.job_handlers.submit(NOOP, account_id=None)
        while conn.execute(LIVE_LEFT).fetchone()[0]:
            time.sleep(0.01)
        return N / (time.perf_counter() - start)


def main() -> list[Result]:
    with bench_settings() as settings:
        gh = build(settings)
        # Alternate, so warm-up and drift favour none; each figure is the median of its rounds.
        queues = gh.broker.get_declared_queues()
        rounds = [
            (bare_dramatiq(settings), floor(settings, queues), gatehouse_jobs(gh)) for _ in range(ROUNDS)
        ]
        gh.close()
    bare, flo, ours = (statistics.median(r[i] for r in rounds) for i in range(3))
    pairs = sorted(g / f for _, f, g in rounds)
    print(f"bare dramatiq : {bare:8.0f} jobs/s")
    print(
        f"floor         : {flo:8.0f} jobs/s (raw psycopg: INSERT … RETURNING, claim UPDATE, completion UPDATE)"
    )
    print(f"gatehouse jobs: {ours:8.0f} jobs/s (row written before enqueue, claimed and started, completed)")
    print(f"ratio gatehouse/floor: {ours / flo:.2f} (rounds {pairs[0]:.2f}–{pairs[-1]:.2f}; target >= 0.8)")
    print(f"ratio floor/bare     : {flo / bare:.2f}")
    name = "bench_job_overhead"
    return [
        Result(name, "gatehouse/floor throughput", ours / flo, 0.8),
        Result(name, "floor/bare throughput", flo / bare),
        Result(name, "gatehouse jobs", ours, unit="jobs/s"),
    ]


if __name__ == "__main__":
    main()
