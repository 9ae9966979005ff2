"""Catalog bulk operations: the batches of one operation until it is done (gatehouse.catalog.handlers)."""

from __future__ import annotations

import uuid
from typing import Any

from gatehouse import logs
from gatehouse.catalog.handlers import CatalogHandlers
from gatehouse.job_types import CATALOG_BULK_OPERATION
from gatehouse_worker.runtime import JobContext, job


@job(CATALOG_BULK_OPERATION)
def bulk_operation(ctx: JobContext, catalog: CatalogHandlers) -> dict[str, Any]:
    operation_id = uuid.UUID(ctx.payload["operationId"])
    with logs.bound(operation_id=operation_id):
        done = catalog.run_bulk_operation(
            operation_id,
            last_attempt=ctx.job.attempt >= ctx.job.max_attempts,
            between_batches=ctx.ensure_held,
        )
    return {"status": done.status, "processed": done.processed, "failed": done.failed}
