"""The job types of bench_gate, loaded into real worker processes with JOB_MODULES=…,bench.gate_jobs.

The benchmark imports this module to submit them; the worker processes import
it (PYTHONPATH = the repo root) to run them. A body that records a moment
writes it to the worker's Redis (its ``redis`` collaborator) under
``mark_key(what, accountId)`` (epoch seconds), since it runs in another process
than the benchmark that reads it.
"""

from __future__ import annotations

import time

from redis import Redis

from gatehouse.gate import USER_GATE
from gatehouse.job_types import JobType, register
from gatehouse_worker.runtime import JobContext, job

QUEUE = "bench"
HOLD_S = 0.3  # a holder keeps its account's gate this long, so its waiter is parked before the release
JOB_S = 0.5  # one contended job's body
JOBS_PER_ACCOUNT = 5  # contended job types: one live job per (account, type), so five per account


def _type(name: str, *, gated: bool) -> JobType:
    return register(JobType(name, queue=QUEUE, gate=USER_GATE if gated else None))


GATED = _type("bench-gated", gated=True)
UNGATED = _type("bench-ungated", gated=False)
HOLDER = _type("bench-holder", gated=True)
WAITER = _type("bench-waiter", gated=True)
CONTENDED = [_type(f"bench-contended-{i}", gated=True) for i in range(JOBS_PER_ACCOUNT)]


def mark_key(what: str, account_id: object) -> str:
    return f"bench:mark:{what}:{account_id}"


def _mark(ctx: JobContext, redis: Redis, what: str) -> None:
    redis.set(mark_key(what, ctx.job.account_id), repr(time.time()), ex=3600)


@job(GATED)
@job(UNGATED)
def trivial(ctx: JobContext) -> None:
    return None


@job(HOLDER)
def hold(ctx: JobContext, redis: Redis) -> None:
    _mark(ctx, redis, "holding")
    time.sleep(HOLD_S)
    _mark(ctx, redis, "released")  # the body's end: the pipeline completes the row, then releases the gate


@job(WAITER)
def wait(ctx: JobContext, redis: Redis) -> None:
    _mark(ctx, redis, "running")


def work(ctx: JobContext) -> None:
    time.sleep(JOB_S)


for _contended in CONTENDED:
    job(_contended)(work)
