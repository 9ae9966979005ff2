"""The per-account gate: its overhead, its hand-off latency, and its makespan under contention.

All three run with the seed's timings (lease 90 s, heartbeat 30 s, poll 15 s)
on real worker processes (``gatehouse-worker --processes 2 --threads 4``,
job types from ``bench.gate_jobs``), against the DATABASE_URL/REDIS_URL
servers. The workers are started once and are alive (both liveness keys) and
warmed up before anything is timed:

- overhead: trivial jobs on 1,000 accounts (no contention), gated vs ungated,
  5 pairs in alternating order; the rows and their messages are prepared
  first (untimed: the messages in a Redis pipeline), then the pipeline is
  sent in one round trip and the clock runs from that send to the last
  row's finished_at; the ratio is the median of the pairs' gated/ungated;
- hand-off: a holder's body ending to its parked waiter's body starting
  (marks in Redis), p50/p95 over 200 hand-offs, against the 15 s poll the
  seed relies on; split at the holder's finished_at and the waiter's
  started_at (row times);
- contention: 4 accounts × 5 jobs × 0.5 s, makespan vs the ideal 2.5 s and vs
  dramatiq's ConcurrentRateLimiter(limit=1) on the same workload (that one
  in-process, 8 threads, after the worker processes stopped).
"""

from __future__ import annotations

import statistics
import threading
import time
import uuid

import psycopg
from dramatiq import Actor
from dramatiq.brokers.redis import RedisBroker
from dramatiq.middleware import Retries
from dramatiq.rate_limits import ConcurrentRateLimiter
from dramatiq.rate_limits.backends import RedisBackend
from redis import Redis

from bench.gate_jobs import CONTENDED, GATED, HOLDER, JOB_S, JOBS_PER_ACCOUNT, UNGATED, WAITER, mark_key
from bench.support import Result, bench_settings, percentile, running_worker, send_pipelined, worker_processes
from gatehouse.composition import Components, bootstrap
from gatehouse.events import EventBus
from gatehouse.job_types import JobType
from gatehouse.jobs import JobMessage
from gatehouse.uow import UnitOfWork

PROCESSES, THREADS = 2, 4
JOB_MODULES = "gatehouse_worker.jobs,bench.gate_jobs"
ACCOUNTS, PAIRS, WARMUP = 1_000, 5, 300
# Two holders and two waiters at a time fit in one process's 4 threads: wherever dramatiq's
# prefetch puts a waiter, a thread is free to park it while the holders run.
HANDOFFS, HANDOFF_BATCH = 200, 2
CONTENDED_ACCOUNTS = 4

LIVE_LEFT = "SELECT EXISTS (SELECT 1 FROM jobs WHERE state IN ('waiting', 'active', 'delayed'))"


class Rows:
    """The benchmark's own connection to the jobs table (autocommit: each read sees the latest rows)."""

    def __init__(self, gh: Components) -> None:
        self.conn = psycopg.connect(gh.settings.libpq_url, autocommit=True)

    def accounts(self, n: int) -> list[uuid.UUID]:
        ids = [uuid.uuid4() for _ in range(n)]
        with self.conn.cursor() as cur:
            cur.executemany("INSERT INTO accounts (id, name) VALUES (%s, 'bench')", [(i,) for i in ids])
        return ids

    def reset(self, *, vacuum: bool = False) -> None:
        self.conn.execute("DELETE FROM jobs")
        if vacuum:  # every throughput run starts on the same table, not on the dead rows of the last
            self.conn.execute("VACUUM ANALYZE jobs")

    def wait_settled(self, timeout_s: float = 120) -> None:
        deadline = time.monotonic() + timeout_s
        while self.conn.execute(LIVE_LEFT).fetchone()[0]:
            if time.monotonic() > deadline:
                raise RuntimeError(f"jobs still live after {timeout_s} s")
            time.sleep(0.01)

    def states(self) -> dict[str, int]:
        return dict(self.conn.execute("SELECT state, count(*) FROM jobs GROUP BY state").fetchall())

    def last_finished(self) -> float:
        return self.conn.execute("SELECT extract(epoch FROM max(finished_at))::float FROM jobs").fetchone()[0]

    def times(self, job_type: JobType) -> dict[uuid.UUID, tuple[float | None, float | None, int]]:
        """account → (started_at, finished_at, message_number) of its job of this type."""
        rows = self.conn.execute(
            "SELECT account_id, extract(epoch FROM started_at)::float, extract(epoch FROM finished_at)::float,"
            " message_number FROM jobs WHERE type = %s",
            (job_type.name,),
        ).fetchall()
        return {a: (s, f, d) for a, s, f, d in rows}

    def close(self) -> None:
        self.conn.close()


def throughput(gh: Components, rows: Rows, job_type: JobType, ids: list[uuid.UUID]) -> tuple[float, float]:
    """Consumer throughput of running workers: rows first (untimed), then every message at once.

    Returns (jobs/s from the first send to the last finished_at, seconds the sends took).
    """
    rows.reset(vacuum=True)
    # A unit of work that keeps the messages of the rows it writes instead of sending them.
    messages: list[JobMessage] = []
    held = UnitOfWork(gh.engine, gh.statements, EventBus(), messages.extend)
    with held.autocommit() as tx:
        for account_id in ids:
            gh.jobs.create(tx, job_type, account_id=account_id)
    start = send_pipelined(gh, job_type.queue, messages)
    sent = time.time() - start
    rows.wait_settled()
    states = rows.states()
    if states != {"completed": len(ids)}:
        raise RuntimeError(f"{job_type.name}: not all jobs completed: {states}")
    return len(ids) / (rows.last_finished() - start), sent


def wait_marks(gh: Components, what: str, ids: list[uuid.UUID], timeout_s: float = 10) -> list[float]:
    deadline = time.monotonic() + timeout_s
    while True:
        values = gh.redis.mget([mark_key(what, a) for a in ids])
        if all(v is not None for v in values):
            return [float(v) for v in values]
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"no {what!r} mark after {timeout_s} s for {sum(v is None for v in values)} jobs"
            )
        time.sleep(0.005)


def handoffs(gh: Components, rows: Rows) -> tuple[list[tuple[float, float, float]], int]:
    """Per hand-off: (body end → holder finished_at, → waiter started_at, → waiter body start), seconds.

    Also returns how many waiters were left out: those that found the gate already free (never
    parked, so no hand-off to time). A waiter parked but not woken by the release counts, with
    the poll's latency.
    """
    samples: list[tuple[float, float, float]] = []
    unparked = 0
    while len(samples) < HANDOFFS:
        if unparked > HANDOFFS:
            raise RuntimeError(f"{unparked} waiters were never parked behind their holder")
        rows.reset()
        batch = rows.accounts(HANDOFF_BATCH)
        for account_id in batch:
            gh.job_handlers.submit(HOLDER, account_id=account_id)
        wait_marks(gh, "holding", batch)  # the holders have the gates
        for account_id in batch:
            gh.job_handlers.submit(WAITER, account_id=account_id)
        rows.wait_settled(timeout_s=2 * gh.settings.gate_poll_delay_ms / 1000 + 30)
        released, running = wait_marks(gh, "released", batch), wait_marks(gh, "running", batch)
        holders, waiters = rows.times(HOLDER), rows.times(WAITER)
        for account_id, end, run in zip(batch, released, running, strict=True):
            finished, (started, _, number) = holders[account_id][1], waiters[account_id]
            if number == 1:  # 1 at creation; 2 when parked on the gate; 3 when woken by the release
                unparked += 1
                continue
            samples.append((finished - end, started - finished, run - started))
    return samples[:HANDOFFS], unparked


def gated_makespan(gh: Components, rows: Rows) -> float:
    rows.reset()
    ids = rows.accounts(CONTENDED_ACCOUNTS)
    start = time.time()
    for job_type in CONTENDED:
        for account_id in ids:
            gh.job_handlers.submit(job_type, account_id=account_id)
    rows.wait_settled()
    return rows.last_finished() - start


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


def main() -> list[Result]:
    with bench_settings() as settings:
        gh = bootstrap(settings)
        rows = Rows(gh)
        try:
            ids = rows.accounts(ACCOUNTS)
            with worker_processes(settings, processes=PROCESSES, threads=THREADS, job_modules=JOB_MODULES):
                for job_type in (UNGATED, GATED):  # warm-up: pools, scripts, caches of both processes
                    throughput(gh, rows, job_type, ids[:WARMUP])
                # Alternate (ungated first, then gated first, …) so drift favours neither;
                # the ratio is the median of the pairs.
                runs = []
                for i in range(PAIRS):
                    order = (UNGATED, GATED) if i % 2 == 0 else (GATED, UNGATED)
                    measured = {t.name: throughput(gh, rows, t, ids) for t in order}
                    runs.append((measured[UNGATED.name], measured[GATED.name]))
                samples, unparked = handoffs(gh, rows)
                makespan = gated_makespan(gh, rows)
            limiter = rate_limiter_makespan(settings)
        finally:
            rows.close()
            gh.close()

    ungated, gated = (statistics.median(run[i][0] for run in runs) for i in range(2))
    send_ms = max(max(u[1], g[1]) for u, g in runs) * 1000
    ratios = sorted(g[0] / u[0] for u, g in runs)
    latencies = [sum(s) for s in samples]
    p50, p95 = statistics.median(latencies), percentile(latencies, 95)
    parts = [statistics.median(s[i] for s in samples) * 1000 for i in range(3)]
    ideal = JOBS_PER_ACCOUNT * JOB_S
    print(
        f"workers    : gatehouse-worker --processes {PROCESSES} --threads {THREADS}, "
        f"idle poll {settings.worker_idle_poll_ms} ms, gate poll {settings.gate_poll_delay_ms} ms"
    )
    print(
        f"overhead   : ungated {ungated:7.0f} jobs/s, gated {gated:7.0f} jobs/s on {ACCOUNTS} accounts "
        f"(all messages sent within {send_ms:.0f} ms)"
    )
    print(
        f"             ratio gated/ungated throughput: {statistics.median(ratios):.2f} "
        f"(pairs {', '.join(f'{r:.2f}' for r in ratios)}; target >= 0.9)"
    )
    print(
        f"hand-off   : p50 {p50 * 1000:.0f} ms, p95 {p95 * 1000:.0f} ms, max {max(latencies) * 1000:.0f} ms "
        f"over {len(latencies)} hand-offs"
        + (f" ({unparked} waiters never parked, left out)" if unparked else "")
    )
    print(
        f"             medians: body end → holder row finished {parts[0]:.1f} ms → waiter started "
        f"{parts[1]:.1f} ms → waiter body {parts[2]:.1f} ms"
    )
    print(
        f"             ratio p95 / {settings.gate_poll_delay_ms / 1000:.0f} s poll: "
        f"{p95 / (settings.gate_poll_delay_ms / 1000):.4f} (target p95 <= 150 ms)"
    )
    print(
        f"contention : gate makespan {makespan:.2f} s, ideal {ideal:.2f} s, ConcurrentRateLimiter {limiter:.2f} s"
    )
    print(
        f"             ratio gate/ideal: {makespan / ideal:.2f} (target <= 1.2); limiter/gate: {limiter / makespan:.1f}"
    )
    name = "bench_gate"
    return [
        Result(name, "gated/ungated throughput", statistics.median(ratios), 0.9),
        Result(name, "hand-off p95", p95 * 1000, 150, "ms", higher_is_better=False),
        Result(name, "contention makespan gate/ideal", makespan / ideal, 1.2, higher_is_better=False),
        Result(name, "ConcurrentRateLimiter/gate makespan", limiter / makespan),
    ]


if __name__ == "__main__":
    main()
