"""Catalog bulk operations (the admin page "Akcje masowe"): start one, watch its counters, list them."""

from __future__ import annotations

import uuid

import falcon

from gatehouse.catalog.bulk import STATUSES, TYPES, OperationRecord, Selection, patch_from_json
from gatehouse.composition import Gatehouse
from gatehouse.errors import ValidationFailed
from gatehouse_api.auth import principal, require_admin
from gatehouse_api.body import read_json
from gatehouse_api.paging import choice, decode_cursor, encode_cursor, page_limit
from gatehouse_api.schemas import BulkCounters, BulkOperationPage, BulkOperationView, CreateBulkOperation


def operation_view(op: OperationRecord) -> dict:
    return BulkOperationView(
        operationId=op.id,
        type=op.type,
        status=op.status,
        requester=op.requester,
        counters=BulkCounters(
            total=op.total, processed=op.processed, succeeded=op.succeeded, failed=op.failed
        ),
        failedItems=op.failed_items,
        createdAt=op.created_at,
        startedAt=op.started_at,
        finishedAt=op.finished_at,
        error=op.error,
        links={"self": f"/v1/admin/catalog/bulk-operations/{op.id}"},
    ).model_dump(mode="json")


class BulkOperations:
    def __init__(self, gh: Gatehouse) -> None:
        self.gh = gh

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        """Up to BULK_SYNC_THRESHOLD products: applied now (200); more: queued (202)."""
        require_admin(req)
        body = read_json(req, CreateBulkOperation, max_bytes=self.gh.settings.catalog_batch_max_body_bytes)
        if (body.productIds is None) == (body.filter is None):
            raise ValidationFailed("send exactly one of productIds and filter", field="productIds")
        if body.filter is not None:
            f = body.filter
            selection = Selection(status=f.status, sku_prefix=f.skuPrefix, attributes=f.attributes)
        else:
            selection = Selection(product_ids=tuple(body.productIds))
        request = body.model_dump(mode="json", exclude_none=True)
        caller = principal(req)
        op, deliveries = self.gh.bulk.create(
            selection,
            patch_from_json(request["patch"]),
            request,
            requester=caller.user_id,
            actor=caller.actor,
            sync_threshold=self.gh.settings.bulk_sync_threshold,
        )
        self.gh.events.send(deliveries)
        if op.status == "pending":  # queued: its job runs it
            resp.status = 202
        resp.location = f"/v1/admin/catalog/bulk-operations/{op.id}"
        resp.media = operation_view(op)

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        require_admin(req)
        status = choice(req.get_param("status"), "status", STATUSES)
        op_type = choice(req.get_param("type"), "type", TYPES)
        limit = page_limit(req.get_param("limit"))
        cursor = req.get_param("cursor")
        ops = self.gh.bulk.list(
            status=status, type=op_type, limit=limit + 1, before=decode_cursor(cursor) if cursor else None
        )
        page, more = ops[:limit], len(ops) > limit
        resp.media = BulkOperationPage(
            items=[operation_view(o) for o in page], nextCursor=encode_cursor(page[-1]) if more else None
        ).model_dump(mode="json")


class BulkOperation:
    def __init__(self, gh: Gatehouse) -> None:
        self.gh = gh

    def on_get(self, req: falcon.Request, resp: falcon.Response, operation_id: uuid.UUID) -> None:
        require_admin(req)
        resp.media = operation_view(self.gh.bulk.get(operation_id))
