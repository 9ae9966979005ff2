"""Probe jobs: loaded into real worker processes with JOB_MODULES=…,tests.support.probe.

Each run appends ``{"job", "pid", "start", "end"}`` to the Redis list
``probe:runs`` (in the job's own Redis), so tests can assert on what ran,
where, when and how often.
"""

from __future__ import annotations

import json
import os
import time

from gatehouse.job_types import JobType, register
from gatehouse.wb.errors import WbRateLimited
from gatehouse_worker.runtime import JobContext, job

PROBE = register(JobType("probe", queue="probe"))
RUNS_KEY = "probe:runs"


@job(PROBE)
def probe(ctx: JobContext) -> dict:
    start = time.time()
    time.sleep(float(ctx.payload.get("seconds", 0)))
    if ctx.payload.get("fail"):
        raise RuntimeError(ctx.payload["fail"])
    ctx.gatehouse.redis.rpush(
        RUNS_KEY,
        json.dumps({"job": str(ctx.job.id), "pid": os.getpid(), "start": start, "end": time.time()}),
    )
    return {"slept": ctx.payload.get("seconds", 0)}


# Fails with a WB 429 on every attempt below payload["succeed_on"] (default: never succeeds).
FLAKY = register(JobType("probe-flaky", queue="probe", retries=True))
ATTEMPTS_KEY = "probe:attempts"


@job(FLAKY)
def probe_flaky(ctx: JobContext) -> dict:
    ctx.gatehouse.redis.rpush(ATTEMPTS_KEY, json.dumps({"attempt": ctx.job.attempt, "at": time.time()}))
    if ctx.job.attempt < int(ctx.payload.get("succeed_on", 10**6)):
        raise WbRateLimited("too many requests", retry_after_s=1)
    return {"attempt": ctx.job.attempt}
