"""Catalog bulk operations (the admin page "Akcje masowe"): start one, watch its counters, list them."""

from __future__ import annotations

import uuid

import falcon

from gatehouse.catalog.bulk import (
    STATUSES,
    TYPES,
    FailureRecord,
    OperationRecord,
    Selection,
    patch_from_json,
)
from gatehouse.composition import Gatehouse
from gatehouse.errors import ValidationFailed
from gatehouse_api.auth import principal, require_admin
from gatehouse_api.body import read_json
from gatehouse_api.openapi import contract, page_params, query
from gatehouse_api.paging import choice, decode_cursor, encode_cursor, page_limit
from gatehouse_api.schemas import (
    BulkCounters,
    BulkFailure,
    BulkFailurePage,
    BulkOperationPage,
    BulkOperationView,
    CreateBulkOperation,
)


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
        request=op.request,
        links={
            "self": f"/v1/admin/catalog/bulk-operations/{op.id}",
            "failures": f"/v1/admin/catalog/bulk-operations/{op.id}/failures",
        },
    ).model_dump(mode="json")


def operation_page(
    gh: Gatehouse,
    *,
    status: str | None,
    type: str | None,
    limit: int,
    cursor: str | None,
    failed_items: bool = True,
) -> dict:
    """A page of operations, newest first (the JSON list and the console's Bulk actions).

    The console's list shows no failed item (an operation's page reads them 50 at a time):
    it leaves them unread, up to 1,000 an operation, so its items' ``failedItems`` are empty.
    """
    ops = gh.bulk.list(
        status=choice(status, "status", STATUSES),
        type=choice(type, "type", TYPES),
        limit=limit + 1,
        before=decode_cursor(cursor) if cursor else None,
        failed_items=failed_items,
    )
    page, more = ops[:limit], len(ops) > limit
    return BulkOperationPage(
        items=[operation_view(o) for o in page], nextCursor=encode_cursor(page[-1]) if more else None
    ).model_dump(mode="json")


def failure_view(f: FailureRecord) -> dict:
    return BulkFailure(
        position=f.position, productId=f.product_id, sku=f.sku, name=f.name, reason=f.reason
    ).model_dump(mode="json")


def failure_page(gh: Gatehouse, op_id: uuid.UUID, *, limit: int, cursor: str | None) -> dict:
    """A page of an operation's failed items with their products (the cursor is the last position)."""
    if cursor is not None and not (cursor.isascii() and cursor.isdigit() and len(cursor) <= 6):
        raise ValidationFailed("cursor is not a cursor returned by this endpoint", field="cursor")
    found = gh.bulk.failures(op_id, limit=limit + 1, after=int(cursor or 0))
    page, more = found[:limit], len(found) > limit
    return BulkFailurePage(
        items=[failure_view(f) for f in page], nextCursor=str(page[-1].position) if more else None
    ).model_dump(mode="json")


class BulkOperations:
    def __init__(self, gh: Gatehouse) -> None:
        self.gh = gh

    @contract(
        "Patch many products: up to BULK_SYNC_THRESHOLD at once (200), more queued (202)",
        [
            (200, BulkOperationView, "small enough: applied at once (and recorded)"),
            (202, BulkOperationView, "queued; watch its counters"),
        ],
        (400, 401, 403, 413, 415, 422),
        body=(CreateBulkOperation, True),
    )
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

    @contract(
        "List bulk operations, newest first",
        (200, BulkOperationPage, "a page of operations"),
        (401, 403, 422),
        params=page_params(query("status", enum=list(STATUSES)), query("type", enum=list(TYPES))),
    )
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        require_admin(req)
        resp.media = operation_page(
            self.gh,
            status=req.get_param("status"),
            type=req.get_param("type"),
            limit=page_limit(req.get_param("limit")),
            cursor=req.get_param("cursor"),
        )


class BulkOperation:
    def __init__(self, gh: Gatehouse) -> None:
        self.gh = gh

    @contract(
        "Read a bulk operation with its live counters",
        (200, BulkOperationView, "the operation"),
        (401, 403, 404),
    )
    def on_get(self, req: falcon.Request, resp: falcon.Response, operation_id: uuid.UUID) -> None:
        require_admin(req)
        resp.media = operation_view(self.gh.bulk.get(operation_id))


class BulkFailures:
    def __init__(self, gh: Gatehouse) -> None:
        self.gh = gh

    @contract(
        "Page through a bulk operation's failed items (the first 1,000) with each product's SKU and name",
        (200, BulkFailurePage, "a page of failed items, in the order they failed"),
        (401, 403, 404, 422),
        params=page_params(),
    )
    def on_get(self, req: falcon.Request, resp: falcon.Response, operation_id: uuid.UUID) -> None:
        require_admin(req)
        resp.media = failure_page(
            self.gh, operation_id, limit=page_limit(req.get_param("limit")), cursor=req.get_param("cursor")
        )
