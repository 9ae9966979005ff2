"""The catalog's use cases: products and attributes, search re-indexes, bulk operations.

Each opens one unit of work (gatehouse.uow): the change, its audit rows, its
events' outbox rows and the rows of the jobs it starts commit together, and
those jobs' messages are sent after the commit.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from gatehouse.audit import ADMIN_ACTOR
from gatehouse.catalog.bulk import BulkStore, OperationRecord, Preview, Reindex, Selection
from gatehouse.catalog.rules import NewProduct, ProductPatch, check_patch
from gatehouse.catalog.store import CatalogStore
from gatehouse.catalog.tables import AttributeRecord, ProductRecord
from gatehouse.errors import error_info
from gatehouse.events import Event
from gatehouse.uow import Tx, UnitOfWork


class CatalogHandlers:
    def __init__(
        self, uow: UnitOfWork, catalog: CatalogStore, bulk: BulkStore, *, sync_threshold: int, batch_size: int
    ) -> None:
        self.uow, self.catalog, self.bulk = uow, catalog, bulk
        self.sync_threshold, self.batch_size = sync_threshold, batch_size

    # -- products and attributes ---------------------------------------------------------

    def create_product(self, product: NewProduct) -> ProductRecord:
        with self.uow.begin() as tx:
            return self.catalog.create_product(tx, product)

    def create_products(self, products: list[NewProduct]) -> int:
        """All or nothing: every product is created, or none (409 on a taken sku)."""
        with self.uow.begin() as tx:
            return self.catalog.create_products(tx, products)

    def patch_product(self, product_id: uuid.UUID, patch: ProductPatch, *, actor: str) -> ProductRecord:
        """The change, its audit row and its ``catalog.product.updated`` event commit together."""
        with self.uow.begin() as tx:
            product, changed = self.catalog.patch_product(tx, product_id, patch, actor=actor)
            if changed:
                tx.publish(
                    Event("catalog.product.updated", {"productIds": [str(product_id)], "actor": actor})
                )
        return product

    def create_attribute(self, code: str, label: str, searchable: bool) -> AttributeRecord:
        with self.uow.begin() as tx:
            return self.catalog.create_attribute(tx, code, label, searchable)

    def patch_attribute(
        self,
        code: str,
        *,
        label: str | None = None,
        searchable: bool | None = None,
        actor: str,
        requester: uuid.UUID | None = None,
    ) -> tuple[AttributeRecord, Reindex | None]:
        """Edit an attribute; a ``searchable`` flip queues a search re-index in the same transaction
        (or joins the live one). Returns the attribute and the re-index (None unless it flipped)."""
        with self.uow.begin() as tx:
            attribute, changed = self.catalog.update_attribute(
                tx, code, label=label, searchable=searchable, actor=actor
            )
            reindex = None
            if "searchable" in changed:
                reindex = self.bulk.start_reindex(tx, requester=requester, reason="attribute.searchable")
        return attribute, reindex

    # -- search re-index and bulk operations -------------------------------------------------

    def start_reindex(self, *, requester: uuid.UUID | None, reason: str = "requested") -> Reindex:
        """Queue a ``search_reindex`` over every product, or return the one already live."""
        with self.uow.begin() as tx:
            return self.bulk.start_reindex(tx, requester=requester, reason=reason)

    def create_bulk_operation(
        self,
        selection: Selection,
        patch: ProductPatch,
        request: dict[str, Any],
        *,
        requester: uuid.UUID | None,
        actor: str,
    ) -> OperationRecord:
        """Record the operation and run or queue it (``_run_or_queue``)."""
        check_patch(patch)
        with self.uow.begin() as tx:
            op = self.bulk.insert(tx, selection, patch, request, requester=requester)
            return self._run_or_queue(tx, op, patch, actor)

    def preview_bulk_operation(self, selection: Selection, patch: ProductPatch) -> Preview:
        """A dry run of ``create_bulk_operation``: what it would change, nothing written, any size."""
        check_patch(patch)
        return self.bulk.preview(selection, patch)

    def revert_bulk_operation(
        self, op_id: uuid.UUID, *, requester: uuid.UUID | None, actor: str
    ) -> OperationRecord:
        """A new bulk operation that restores what a finished one's audit rows recorded before it,
        product by product (one edited since is a failed item, changed-since); run like any other."""
        with self.uow.begin() as tx:
            op = self.bulk.insert_revert(tx, op_id, requester=requester)
            return self._run_or_queue(tx, op, None, actor)

    def _run_or_queue(
        self, tx: Tx, op: OperationRecord, patch: ProductPatch | None, actor: str
    ) -> OperationRecord:
        """Up to BULK_SYNC_THRESHOLD products the operation (``patch`` None: a revert) runs here, in its
        creating transaction; more: its job runs it (status ``pending`` until then)."""
        if op.total <= self.sync_threshold:
            return self.bulk.run_whole(tx, op, patch, actor=actor)
        self.bulk.queue(tx, op.id)
        return op

    def run_bulk_operation(
        self, op_id: uuid.UUID, *, last_attempt: bool, between_batches: Callable[[], None]
    ) -> OperationRecord:
        """Its batches until it is done, each one transaction, audited as its requester (the job body).
        An error on the last attempt fails the operation (its event, its requester told), then is raised."""
        actor = str(self.bulk.get(op_id).requester or ADMIN_ACTOR)
        try:
            while True:
                with self.uow.begin() as tx:
                    batch = self.bulk.run_batch(tx, op_id, self.batch_size, actor=actor)
                if batch is None:
                    break
                between_batches()  # a run that lost its row stops between batches
        except Exception as exc:
            if last_attempt:
                with self.uow.begin() as tx:
                    self.bulk.fail(tx, op_id, error_info(exc))
            raise
        return self.bulk.get(op_id)
