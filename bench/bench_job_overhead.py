"""Job-row overhead: Gatehouse jobs (claim, progress, outcome in PostgreSQL) vs bare Dramatiq messages.

Both run trivial bodies on the same Redis broker with the same in-process
worker (8 threads); the ratio is what the durable job rows cost.
"""

from __future__ import annotations

import threading
import time

from dramatiq import Actor
from dramatiq.brokers.redis import RedisBroker
from redis import Redis

from bench.support import bench_settings, running_worker
from gatehouse.job_types import JobType
from gatehouse_worker import runtime
from gatehouse_worker.wiring import build

N = 2000
NOOP = JobType("bench-noop", queue="bench")


@runtime.job(NOOP)
def noop(ctx: runtime.JobContext) -> None:
    return None


def bare_dramatiq(settings) -> float:
    broker = RedisBroker(client=Redis.from_url(settings.redis_url), namespace="bench-bare", middleware=[])
    done = threading.Semaphore(0)
    actor = Actor(
        lambda: done.release(), broker=broker, actor_name="bare", queue_name="bare", priority=0, options={}
    )
    with running_worker(broker):
        start = time.perf_counter()
        for _ in range(N):
            actor.send()
        for _ in range(N):
            done.acquire()
        return time.perf_counter() - start


def gatehouse_jobs(settings) -> float:
    gh = build(settings)
    with running_worker(gh.broker):
        start = time.perf_counter()
        for _ in range(N):
            gh.submit(NOOP, account_id=None)
        with gh.engine.connect() as conn:
            from sqlalchemy import text

            while conn.execute(text("SELECT count(*) FROM jobs WHERE state = 'completed'")).scalar() < N:
                time.sleep(0.02)
                conn.rollback()
        return time.perf_counter() - start


def main() -> None:
    with bench_settings() as settings:
        bare = bare_dramatiq(settings)
        rows = gatehouse_jobs(settings)
    print(f"bare dramatiq : {N / bare:8.0f} jobs/s")
    print(f"gatehouse jobs: {N / rows:8.0f} jobs/s (row written before enqueue, claimed, completed)")
    print(f"ratio gatehouse/bare throughput: {bare / rows:.2f}")


if __name__ == "__main__":
    main()
