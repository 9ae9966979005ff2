"""Gatehouse's trivial job (JOB_MODULES=…,bench.peers.gatehouse_noop): the full pipeline, an empty body."""

from __future__ import annotations

from gatehouse.job_types import JobType
from gatehouse_worker import runtime

NOOP = JobType("bench-peers-noop", queue="bench-peers")


@runtime.job(NOOP)
def noop(ctx: runtime.JobContext) -> None:
    return None
