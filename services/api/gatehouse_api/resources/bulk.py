"""Catalog bulk operations (the admin page "Akcje masowe"): start one, watch its counters, list them."""

from __future__ import annotations

import uuid

import falcon

from gatehouse.catalog.bulk import (
    STATUSES,
    TYPES,
    BulkStore,
    FailureRecord,
    OperationRecord,
    Selection,
    patch_from_json,
)
from gatehouse.catalog.handlers import CatalogHandlers
from gatehouse.errors import ValidationFailed
from gatehouse_api.auth import principal, require_admin
from gatehouse_api.body import read_json
from gatehouse_api.openapi import contract, page_params, query
from gatehouse_api.paging import choice, decode_cursor, encode_cursor, page_limit
from gatehouse_api.schemas import (
    BulkCounters,
    BulkCreated,
    BulkFailure,
    BulkFailurePage,
    BulkOperationPage,
    BulkOperationView,
    BulkPreview,
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
        revertOf=op.revert_of,
        links={
            "self": f"/v1/admin/catalog/bulk-operations/{op.id}",
            "failures": f"/v1/admin/catalog/bulk-operations/{op.id}/failures",
            "revert": f"/v1/admin/catalog/bulk-operations/{op.id}/revert",
        },
    ).model_dump(mode="json")


def failure_view(f: FailureRecord) -> dict:
    return BulkFailure(
        position=f.position, productId=f.product_id, sku=f.sku, name=f.name, reason=f.reason
    ).model_dump(mode="json")


class BulkViews:
    """Bulk operations as the API and the console show them (the read side of gatehouse.catalog.bulk)."""

    def __init__(self, bulk: BulkStore) -> None:
        self.bulk = bulk

    def get(self, op_id: uuid.UUID) -> dict:
        return operation_view(self.bulk.get(op_id))

    def page(
        self,
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
        ops = self.bulk.list(
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

    def failures(self, op_id: uuid.UUID, *, limit: int, cursor: str | None) -> dict:
        """A page of an operation's failed items with their products (the cursor is the last position)."""
        if cursor is not None and not (cursor.isascii() and cursor.isdigit() and len(cursor) <= 6):
            raise ValidationFailed("cursor is not a cursor returned by this endpoint", field="cursor")
        found = self.bulk.failures(op_id, limit=limit + 1, after=int(cursor or 0))
        page, more = found[:limit], len(found) > limit
        return BulkFailurePage(
            items=[failure_view(f) for f in page], nextCursor=str(page[-1].position) if more else None
        ).model_dump(mode="json")


def started(resp: falcon.Response, op: OperationRecord) -> None:
    """The answer to a new operation: applied at once (200), or queued (202) for its job."""
    if op.status == "pending":
        resp.status = 202
    resp.location = f"/v1/admin/catalog/bulk-operations/{op.id}"
    resp.media = operation_view(op)


class BulkOperations:
    def __init__(self, views: BulkViews, handlers: CatalogHandlers, *, max_body_bytes: int) -> None:
        self.views, self.handlers, self.max_body_bytes = views, handlers, max_body_bytes

    @contract(
        "Patch many products: up to BULK_SYNC_THRESHOLD at once (200), more queued (202); "
        "dryRun: what it would change (200), nothing written",
        [
            (200, BulkCreated, "small enough: applied at once (and recorded); dryRun: a BulkPreview"),
            (202, BulkOperationView, "queued; watch its counters"),
        ],
        (400, 401, 403, 413, 415, 422),
        body=(CreateBulkOperation, True),
    )
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        """Up to BULK_SYNC_THRESHOLD products: applied now (200); more: queued (202); dryRun: a preview (200)."""
        require_admin(req)
        body = read_json(req, CreateBulkOperation, max_bytes=self.max_body_bytes)
        if (body.productIds is None) == (body.filter is None):
            raise ValidationFailed("send exactly one of productIds and filter", field="productIds")
        if body.filter is not None:
            f = body.filter
            selection = Selection(status=f.status, sku_prefix=f.skuPrefix, attributes=f.attributes)
        else:
            selection = Selection(product_ids=tuple(body.productIds))
        request = body.model_dump(mode="json", exclude_none=True, exclude={"dryRun"})
        patch = patch_from_json(request["patch"])
        if body.dryRun:
            preview = self.handlers.preview_bulk_operation(selection, patch)
            resp.media = BulkPreview(
                matched=preview.matched, wouldChange=preview.would_change, sample=preview.sample
            ).model_dump(mode="json")
            return
        caller = principal(req)
        started(
            resp,
            self.handlers.create_bulk_operation(
                selection, patch, request, requester=caller.user_id, actor=caller.actor
            ),
        )

    @contract(
        "List bulk operations, newest first",
        (200, BulkOperationPage, "a page of operations"),
        (401, 403, 422),
        params=page_params(query("status", enum=list(STATUSES)), query("type", enum=list(TYPES))),
    )
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        require_admin(req)
        resp.media = self.views.page(
            status=req.get_param("status"),
            type=req.get_param("type"),
            limit=page_limit(req.get_param("limit")),
            cursor=req.get_param("cursor"),
        )


class BulkOperation:
    def __init__(self, views: BulkViews) -> None:
        self.views = views

    @contract(
        "Read a bulk operation with its live counters",
        (200, BulkOperationView, "the operation"),
        (401, 403, 404),
    )
    def on_get(self, req: falcon.Request, resp: falcon.Response, operation_id: uuid.UUID) -> None:
        require_admin(req)
        resp.media = self.views.get(operation_id)


class BulkFailures:
    def __init__(self, views: BulkViews) -> None:
        self.views = views

    @contract(
        "Page through a bulk operation's failed items (the first 1,000) with each product's SKU and name",
        (200, BulkFailurePage, "a page of failed items, in the order they failed"),
        (401, 403, 404, 422),
        params=page_params(),
    )
    def on_get(self, req: falcon.Request, resp: falcon.Response, operation_id: uuid.UUID) -> None:
        require_admin(req)
        resp.media = self.views.failures(
            operation_id, limit=page_limit(req.get_param("limit")), cursor=req.get_param("cursor")
        )


class BulkRevert:
    def __init__(self, handlers: CatalogHandlers) -> None:
        self.handlers = handlers

    @contract(
        "Revert a finished bulk update: a new operation restores, product by product, the values its "
        "audit rows recorded before it; a product edited since is a failed item (changed-since)",
        [
            (200, BulkOperationView, "small enough: reverted at once (and recorded)"),
            (202, BulkOperationView, "queued; watch its counters"),
        ],
        (401, 403, 404, 409),
        notes={409: "the operation is pending or running (`code` OPERATION_NOT_FINISHED)"},
    )
    def on_post(self, req: falcon.Request, resp: falcon.Response, operation_id: uuid.UUID) -> None:
        require_admin(req)
        caller = principal(req)
        started(
            resp,
            self.handlers.revert_bulk_operation(operation_id, requester=caller.user_id, actor=caller.actor),
        )
