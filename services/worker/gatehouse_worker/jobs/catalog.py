"""Catalog bulk operations: the batches of one operation until it is done (gatehouse.catalog.bulk)."""

from __future__ import annotations

import uuid
from typing import Any

from gatehouse.audit import ADMIN_ACTOR
from gatehouse.job_types import CATALOG_BULK_OPERATION
from gatehouse_worker.runtime import JobContext, job


@job(CATALOG_BULK_OPERATION)
def bulk_operation(ctx: JobContext) -> dict[str, Any]:
    bulk, op_id = ctx.gatehouse.bulk, uuid.UUID(ctx.payload["operationId"])
    actor = str(bulk.get(op_id).requester or ADMIN_ACTOR)
    try:
        while (
            batch := bulk.run_batch(op_id, ctx.gatehouse.settings.bulk_batch_size, actor=actor)
        ) is not None:
            ctx.gatehouse.events.send(batch.deliveries)
            ctx.ensure_held()  # a run that lost its row stops between batches
    except Exception as exc:
        if ctx.job.attempt >= ctx.job.max_attempts:  # no attempt left: the operation cannot go on
            ctx.gatehouse.events.send(
                bulk.fail(op_id, {"code": getattr(exc, "code", type(exc).__name__), "message": str(exc)})
            )
        raise
    done = bulk.get(op_id)
    return {"status": done.status, "processed": done.processed, "failed": done.failed}
