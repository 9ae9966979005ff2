"""maintenance:prune, hourly: deletes what outlived its retention (gatehouse.retention).
Its result is the rows it deleted per table; a run requeued after a crash starts over,
and finds only what the dead run had not deleted yet.

maintenance:bulk-jobs: an operator's bulk retry or cancel (JobHandlers.run_bulk).
"""

from __future__ import annotations

from typing import Any

from gatehouse.handlers import JobHandlers
from gatehouse.job_types import MAINTENANCE_BULK_JOBS, MAINTENANCE_PRUNE
from gatehouse.retention import RetentionHandlers
from gatehouse_worker.runtime import JobContext, job


@job(MAINTENANCE_PRUNE)
def prune(ctx: JobContext, retention: RetentionHandlers) -> dict[str, Any]:
    # Between batches: a run that lost its row stops (its batches so far are committed).
    return retention.prune(between_batches=ctx.ensure_held).result()


@job(MAINTENANCE_BULK_JOBS)
def bulk_jobs(ctx: JobContext, job_handlers: JobHandlers) -> dict[str, Any]:
    # Each batch's checkpoint also stops a run that lost its row or was cancelled.
    return job_handlers.run_bulk(ctx.payload, ctx.checkpoint, ctx.save_checkpoint)
