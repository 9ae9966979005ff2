"""The per-account gate: its overhead, its hand-off latency, and its makespan under contention.

All three run with the seed's timings (lease 90 s, heartbeat 30 s, poll 15 s)
on an in-process worker, against the DATABASE_URL/REDIS_URL servers:

- overhead: trivial jobs on 1,000 accounts (no contention), gated vs ungated;
- hand-off: a release to the next waiting job running, p50/p95 over 200
  hand-offs, against the 15 s poll the seed relies on;
- contention: 4 accounts × 5 jobs × 0.5 s, makespan vs the ideal 2.5 s and vs
  dramatiq's ConcurrentRateLimiter(limit=1) on the same workload.
"""

from __future__ import annotations

import statistics
import threading
import time
import uuid

from dramatiq import Actor
from dramatiq.brokers.redis import RedisBroker
from dramatiq.middleware import Retries
from dramatiq.rate_limits import ConcurrentRateLimiter
from dramatiq.rate_limits.backends import RedisBackend
from redis import Redis
from sqlalchemy import text

from bench.support import bench_settings, percentile, running_worker
from gatehouse.job_types import JobType
from gatehouse_worker import runtime
from gatehouse_worker.wiring import build

ACCOUNTS = 1_000
HANDOFFS, HANDOFF_BATCH = 200, 4
CONTENDED_ACCOUNTS, JOBS_PER_ACCOUNT, JOB_S = 4, 5, 0.5

GATED = JobType("bench-gated", queue="bench", gate={"tier": "user"})
UNGATED = JobType("bench-ungated", queue="bench")
HOLDER = JobType("bench-holder", queue="bench", gate={"tier": "user"})
WAITER = JobType("bench-waiter", queue="bench", gate={"tier": "user"})
CONTENDED = [
    JobType(f"bench-contended-{i}", queue="bench", gate={"tier": "user"}) for i in range(JOBS_PER_ACCOUNT)
]
marks: dict[str, float] = {}


@runtime.job(GATED)
@runtime.job(UNGATED)
def trivial(ctx: runtime.JobContext) -> None:
    return None


@runtime.job(HOLDER)
def hold(ctx: runtime.JobContext) -> None:
    time.sleep(0.3)
    marks[f"released:{ctx.job.account_id}"] = time.time()  # the body's end: the gate is released right after


@runtime.job(WAITER)
def wait(ctx: runtime.JobContext) -> None:
    marks[f"running:{ctx.job.account_id}"] = time.time()


def work(ctx: runtime.JobContext) -> None:
    time.sleep(JOB_S)


for _type in CONTENDED:
    runtime.job(_type)(work)


def accounts(gh, n: int) -> list[uuid.UUID]:
    ids = [uuid.uuid4() for _ in range(n)]
    with gh.engine.begin() as conn:
        conn.execute(text("INSERT INTO accounts (id, name) VALUES (:id, 'bench')"), [{"id": i} for i in ids])
    return ids


def wait_completed(gh, count: int) -> None:
    with gh.engine.connect() as conn:
        while conn.execute(text("SELECT count(*) FROM jobs WHERE state = 'completed'")).scalar() < count:
            conn.rollback()
            time.sleep(0.01)


def reset(gh) -> None:
    with gh.engine.begin() as conn:
        conn.execute(text("DELETE FROM jobs"))


def throughput(gh, job_type: JobType, ids: list[uuid.UUID]) -> float:
    """Consumer throughput: the jobs are queued first, then one worker drains them."""
    reset(gh)
    for account_id in ids:
        gh.submit(job_type, account_id=account_id)
    with running_worker(gh.broker, threads=8):
        start = time.perf_counter()
        wait_completed(gh, len(ids))
        return len(ids) / (time.perf_counter() - start)


def handoffs(gh) -> list[float]:
    latencies: list[float] = []
    for _ in range(HANDOFFS // HANDOFF_BATCH):
        reset(gh)
        batch = accounts(gh, HANDOFF_BATCH)
        for account_id in batch:
            gh.submit(HOLDER, account_id=account_id)
        time.sleep(0.05)  # the holders have the gates
        for account_id in batch:
            gh.submit(WAITER, account_id=account_id)
        wait_completed(gh, 2 * HANDOFF_BATCH)
        latencies += [marks[f"running:{a}"] - marks[f"released:{a}"] for a in batch]
    return latencies


def gated_makespan(gh) -> float:
    reset(gh)
    ids = accounts(gh, CONTENDED_ACCOUNTS)
    start = time.perf_counter()
    for job_type in CONTENDED:
        for account_id in ids:
            gh.submit(job_type, account_id=account_id)
    wait_completed(gh, CONTENDED_ACCOUNTS * JOBS_PER_ACCOUNT)
    return time.perf_counter() - start


def rate_limiter_makespan(settings) -> float:
    """The same workload with dramatiq's own mutex: a held key raises and burns a retry."""
    client = Redis.from_url(settings.redis_url)
    broker = RedisBroker(client=client, namespace="bench-limiter", middleware=[Retries(min_backoff=1000)])
    backend = RedisBackend(client=client)
    done = threading.Semaphore(0)

    limiters = {
        f"acc{a}": ConcurrentRateLimiter(backend, f"bench-acc{a}", limit=1) for a in range(CONTENDED_ACCOUNTS)
    }

    def job(account: str) -> None:
        with limiters[account].acquire():
            time.sleep(JOB_S)
        done.release()

    actor = Actor(job, broker=broker, actor_name="limited", queue_name="limited", priority=0, options={})
    with running_worker(broker, threads=8):
        start = time.perf_counter()
        for a in range(CONTENDED_ACCOUNTS):
            for _ in range(JOBS_PER_ACCOUNT):
                actor.send(f"acc{a}")
        for _ in range(CONTENDED_ACCOUNTS * JOBS_PER_ACCOUNT):
            done.acquire()
        return time.perf_counter() - start


def main() -> None:
    with bench_settings() as settings:
        gh = build(settings)
        ids = accounts(gh, ACCOUNTS)
        # Alternate, so warm-up and drift favour neither; the ratio is the median of the pairs.
        runs = [(throughput(gh, UNGATED, ids), throughput(gh, GATED, ids)) for _ in range(5)]
        ungated, gated = statistics.median(u for u, _ in runs), statistics.median(g for _, g in runs)
        ratios = sorted(g / u for u, g in runs)
        with running_worker(gh.broker, threads=8):
            latencies = handoffs(gh)
            makespan = gated_makespan(gh)
        limiter = rate_limiter_makespan(settings)
        gh.close()

    ideal = JOBS_PER_ACCOUNT * JOB_S
    p50, p95 = statistics.median(latencies), percentile(latencies, 95)
    print(f"overhead   : ungated {ungated:7.0f} jobs/s, gated {gated:7.0f} jobs/s on {ACCOUNTS} accounts")
    print(
        f"             ratio gated/ungated throughput: {statistics.median(ratios):.2f} "
        f"(pairs {ratios[0]:.2f}–{ratios[-1]:.2f}; target >= 0.85)"
    )
    print(f"hand-off   : p50 {p50 * 1000:.0f} ms, p95 {p95 * 1000:.0f} ms over {len(latencies)} hand-offs")
    print(
        f"             ratio p95 / 15 s poll: {p95 / (settings.gate_poll_delay_ms / 1000):.3f} (target p95 <= 1 s)"
    )
    print(
        f"contention : gate makespan {makespan:.2f} s, ideal {ideal:.2f} s, ConcurrentRateLimiter {limiter:.2f} s"
    )
    print(
        f"             ratio gate/ideal: {makespan / ideal:.2f} (target <= 1.2); limiter/gate: {limiter / makespan:.1f}"
    )


if __name__ == "__main__":
    main()
