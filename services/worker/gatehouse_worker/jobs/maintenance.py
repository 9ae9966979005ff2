"""maintenance:prune, hourly: deletes what outlived its retention (gatehouse.retention).

Its result is the rows it deleted per table; a run requeued after a crash starts over,
and finds only what the dead run had not deleted yet.
"""

from __future__ import annotations

from typing import Any

from gatehouse.job_types import MAINTENANCE_PRUNE
from gatehouse.retention import RetentionHandlers
from gatehouse_worker.runtime import JobContext, job


@job(MAINTENANCE_PRUNE)
def prune(ctx: JobContext, retention: RetentionHandlers) -> dict[str, Any]:
    # Between batches: a run that lost its row stops (its batches so far are committed).
    return retention.prune(between_batches=ctx.ensure_held).result()
