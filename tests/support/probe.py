"""Probe jobs: loaded into real worker processes with JOB_MODULES=…,tests.support.probe.

Each run appends ``{"job", "pid", "start", "end"}`` to the Redis list
``probe:runs`` (in the job's own Redis), so tests can assert on what ran,
where, when and how often.
"""

from __future__ import annotations

import json
import os
import time

from redis import Redis

from gatehouse.errors import JobPaused
from gatehouse.gate import GateSpec
from gatehouse.job_types import WB_USER_RETRY, JobType, register
from gatehouse.wb.errors import WbUnavailable
from gatehouse_worker.runtime import JobContext, job

PROBE = register(JobType("probe", queue="probe"))
RUNS_KEY = "probe:runs"


@job(PROBE)
def probe(ctx: JobContext, redis: Redis) -> dict:
    start = time.time()
    time.sleep(float(ctx.payload.get("seconds", 0)))
    if ctx.payload.get("fail"):
        raise RuntimeError(ctx.payload["fail"])
    redis.rpush(
        RUNS_KEY,
        json.dumps({"job": str(ctx.job.id), "pid": os.getpid(), "start": start, "end": time.time()}),
    )
    return {"slept": ctx.payload.get("seconds", 0)}


# Fails as if WB were down on every attempt below payload["succeed_on"] (default: never succeeds).
FLAKY = register(JobType("probe-flaky", queue="probe", retry=WB_USER_RETRY))
ATTEMPTS_KEY = "probe:attempts"


@job(FLAKY)
def probe_flaky(ctx: JobContext, redis: Redis) -> dict:
    redis.rpush(ATTEMPTS_KEY, json.dumps({"attempt": ctx.job.attempt, "at": time.time()}))
    if ctx.job.attempt < int(ctx.payload.get("succeed_on", 10**6)):
        raise WbUnavailable("WB failed on GET /ping (503: service unavailable)")
    return {"attempt": ctx.job.attempt}


# Gated probes: one per tier and letter, so one account may have several live at once.
# Each run appends {"job", "account", "start", "end", "paused"} to probe:runs; with
# payload "pause_once_ms" the first run stops half way with a WB rate-limit pause.
def _gated(name: str, tier: str, max_wait_ms: int | None = None) -> JobType:
    return register(JobType(name, queue="probe", tier=tier, gate=GateSpec(tier, max_wait_ms)))


GATED_USER_A = _gated("probe-user-a", "user")
GATED_USER_B = _gated("probe-user-b", "user")
GATED_SCHED_A = _gated("probe-sched-a", "scheduled", max_wait_ms=60_000)
GATED_SCHED_B = _gated("probe-sched-b", "scheduled", max_wait_ms=60_000)


def gated_probe(ctx: JobContext, redis: Redis) -> dict:
    job_id = str(ctx.job.id)
    start = time.time()
    seconds = float(ctx.payload.get("seconds", 0))
    pause_ms = ctx.payload.get("pause_once_ms")
    if pause_ms and redis.set(f"probe:paused:{job_id}", 1, nx=True):
        time.sleep(seconds / 2)
        _segment(ctx, redis, start, paused=True)
        raise JobPaused(
            "WB asked to wait",
            resume_at_ms=int(time.time() * 1000) + pause_ms,
            phase="rate-limited",
            reason="wb-429",
        )
    deadline = start + seconds
    while time.time() < deadline:  # a long body checks its lease like a real one does before each WB call
        ctx.ensure_held()
        time.sleep(min(0.05, max(0, deadline - time.time())))
    _segment(ctx, redis, start, paused=False)
    return {"ran": seconds}


def _segment(ctx: JobContext, redis: Redis, start: float, *, paused: bool) -> None:
    redis.rpush(
        RUNS_KEY,
        json.dumps(
            {"job": str(ctx.job.id), "account": str(ctx.job.account_id), "pid": os.getpid(),
             "start": start, "end": time.time(), "paused": paused}
        ),
    )  # fmt: skip


for _type in (GATED_USER_A, GATED_USER_B, GATED_SCHED_A, GATED_SCHED_B):
    job(_type)(gated_probe)


# A body that never reaches a cooperative point: pure Python, for ever. Gated (a user job), with a
# run time limit of its own, so the backstop of the time limits (the interrupt) is what stops it.
SPIN = register(JobType("probe-spin", queue="probe", gate=GateSpec("user", None), run_time_limit_ms=1_000))


@job(SPIN)
def probe_spin(ctx: JobContext) -> dict:
    n = 0
    while True:
        n += 1
