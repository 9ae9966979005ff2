"""Catalog bulk operations ("Akcje masowe"): one patch over many products, in batches.

An operation's row (``catalog_bulk_operations``) holds the selection (product
ids, resolved when it is created), the patch, its seed status
(``pending|running|completed|failed``), its counters and the first failed items.
Above the synchronous threshold it runs as a job of the one job runtime: the
job row is written in the same transaction as the operation row (same id), and
the job's body calls ``run_batch`` until the operation is done.

A batch is one transaction: it locks the operation row, takes the next ids
after the operation's ``cursor``, patches those products, writes their audit
rows and moves the counters and the cursor. A crash leaves whole batches; a
second run of the same operation (a redelivery, a requeue) waits for the lock
and continues after the cursor, so no product is patched twice and the
counters stay exact.

A ``search_reindex`` operation is the same row and the same job; ``run_batch``
dispatches on the type. Its product ids are every product when it starts; each
batch rebuilds their documents in the shadow table (``search_documents_build``),
and the batch that ends it swaps the shadow into the live index
(``search_documents``) in the same transaction (``gatehouse.search.documents``).
An edit made while it builds is not lost: while a re-index is live every edit
writes its documents into the shadow too (it checks after locking its products),
and a re-index batch locks its products FOR SHARE first (an edit in flight
commits before the batch reads the row), so the shadow never holds an older
document than the last edit; the swap adds any product missing from the
shadow (created after the operation listed its products). One live re-index at
a time: a partial unique index (``catalog_bulk_operations_one_live_reindex``).
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any

from psycopg.types.json import Jsonb
from sqlalchemy import ARRAY, CheckConstraint, Column, Connection, DateTime, Engine, Index, Uuid, text
from sqlalchemy.dialects.postgresql import JSONB
from sqlmodel import Field, SQLModel

from gatehouse.catalog import rules
from gatehouse.catalog.rules import Price, ProductPatch
from gatehouse.catalog.store import CatalogStore
from gatehouse.errors import NotFound, ValidationFailed
from gatehouse.events import Event, EventBus, on_connection
from gatehouse.jobs import SQL_CREATE, Delivery
from gatehouse.notifications import notify
from gatehouse.paging import newest_first
from gatehouse.search import documents

TYPES = ("product_bulk_update", "search_reindex")
STATUSES = ("pending", "running", "completed", "failed")
LIVE = ("pending", "running")
FAILED_ITEMS_KEPT = 1_000


class BulkOperation(SQLModel, table=True):
    __tablename__ = "catalog_bulk_operations"
    __table_args__ = (
        CheckConstraint(f"type IN {TYPES}", name="catalog_bulk_operations_type_valid"),
        CheckConstraint(f"status IN {STATUSES}", name="catalog_bulk_operations_status_valid"),
        Index("catalog_bulk_operations_by_created", "created_at", "id"),
        # One live re-index at a time: a second one conflicts while one is pending or running.
        Index(
            "catalog_bulk_operations_one_live_reindex",
            "type",
            unique=True,
            postgresql_where=text("type = 'search_reindex' AND status IN ('pending', 'running')"),
        ),
    )

    id: uuid.UUID = Field(primary_key=True)
    type: str
    status: str = Field(default="pending", sa_column_kwargs={"server_default": "pending"})
    # The staff user whose request started it (notified when it ends); None for the admin token.
    requester: uuid.UUID | None = Field(default=None, foreign_key="users.id", ondelete="SET NULL")
    # The request as sent: {"filter": {...}} or nothing for listed ids (they are product_ids, kept
    # once: 20,000 ids read back with every batch would cost more than the batch), and "patch".
    request: dict[str, Any] = Field(sa_column=Column(JSONB, nullable=False))
    product_ids: list[uuid.UUID] = Field(sa_column=Column(ARRAY(Uuid), nullable=False))
    # How many of product_ids are done: the next batch starts after it.
    cursor: int = Field(default=0, sa_column_kwargs={"server_default": "0"})
    total: int
    processed: int = Field(default=0, sa_column_kwargs={"server_default": "0"})
    succeeded: int = Field(default=0, sa_column_kwargs={"server_default": "0"})
    failed: int = Field(default=0, sa_column_kwargs={"server_default": "0"})
    failed_items: list[dict[str, Any]] = Field(
        sa_column=Column(JSONB, nullable=False, server_default=text("'[]'::jsonb"))
    )
    error: dict[str, Any] | None = Field(default=None, sa_column=Column(JSONB, nullable=True))
    created_at: datetime = Field(
        sa_column=Column(DateTime(timezone=True), nullable=False, server_default=text("now()"))
    )
    started_at: datetime | None = Field(
        default=None, sa_column=Column(DateTime(timezone=True), nullable=True)
    )
    finished_at: datetime | None = Field(
        default=None, sa_column=Column(DateTime(timezone=True), nullable=True)
    )


@dataclass(frozen=True)
class OperationRecord:
    id: uuid.UUID
    type: str
    status: str
    requester: uuid.UUID | None
    request: dict[str, Any]
    total: int
    processed: int
    succeeded: int
    failed: int
    failed_items: list[dict[str, Any]]
    error: dict[str, Any] | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None


COLUMNS = ", ".join(f.name for f in fields(OperationRecord))


@dataclass(frozen=True)
class FailureRecord:
    """One failed item of an operation, with the product's SKU and name when it still exists."""

    position: int  # 1-based, in the order the batches met them: the page cursor
    product_id: str
    reason: str
    sku: str | None
    name: str | None


# An operation's kept failed items (at most FAILED_ITEMS_KEPT) from a position on, each with its
# product (gone or never there: NULLs). The array is bounded, so unnesting it is cheap.
FAILURES = text(
    """
    SELECT f.n, f.item->>'productId', coalesce(f.item->>'reason', ''), p.sku, p.name
    FROM catalog_bulk_operations AS o
    CROSS JOIN LATERAL jsonb_array_elements(o.failed_items) WITH ORDINALITY AS f(item, n)
    LEFT JOIN products AS p ON p.id = CAST(f.item->>'productId' AS uuid)
    WHERE o.id = :id AND f.n > :after
    ORDER BY f.n LIMIT :limit
    """
)


@dataclass(frozen=True)
class Selection:
    """Exactly one of: the listed product ids, or a filter over the catalog."""

    product_ids: tuple[uuid.UUID, ...] | None = None
    status: str | None = None
    sku_prefix: str | None = None
    attributes: dict[str, Any] | None = None


def patch_from_json(patch: dict[str, Any]) -> ProductPatch:
    price = patch.get("price")
    return ProductPatch(
        name=patch.get("name"),
        description=patch.get("description"),
        price=Price(price["amount"], price["currency"]) if price else None,
        status=patch.get("status"),
        attributes=patch.get("attributes"),
    )


def _resolve(conn: Connection, selection: Selection) -> list[uuid.UUID]:
    if selection.product_ids is not None:
        # Unknown ids stay: each is counted as a failed item when its batch runs.
        return sorted(set(selection.product_ids))
    where, params = [], {}
    if selection.status:
        where.append("status = :status")
        params["status"] = selection.status
    if selection.sku_prefix:
        where.append("starts_with(sku, :prefix)")
        params["prefix"] = selection.sku_prefix
    if selection.attributes:
        where.append("attributes @> CAST(:attributes AS jsonb)")
        params["attributes"] = json.dumps(selection.attributes)
    sql = "SELECT id FROM products" + (f" WHERE {' AND '.join(where)}" if where else "") + " ORDER BY id"
    return list(conn.execute(text(sql), params).scalars())


INSERT_OPERATION = text(
    f"""
    INSERT INTO catalog_bulk_operations (id, type, requester, request, product_ids, total)
    VALUES (:id, :type, :requester, CAST(:request AS jsonb), :product_ids, :total)
    RETURNING {COLUMNS}
    """
)
# Lock the operation and read only the next batch's ids (arrays are 1-based; an
# operation of 20,000 products must not send all 20,000 ids with every batch).
LOCK = text(
    "SELECT status, cursor, total, product_ids[cursor + 1 : cursor + :size] FROM catalog_bulk_operations "
    "WHERE id = :id FOR UPDATE"
)
ADVANCE = text(
    f"""
    UPDATE catalog_bulk_operations SET
      status = CASE WHEN cursor + :n >= total THEN 'completed' ELSE 'running' END,
      started_at = coalesce(started_at, now()),
      finished_at = CASE WHEN cursor + :n >= total THEN now() END,
      cursor = cursor + :n, processed = processed + :n,
      succeeded = succeeded + :ok, failed = failed + :bad,
      failed_items = CASE WHEN jsonb_array_length(failed_items) >= {FAILED_ITEMS_KEPT} THEN failed_items
        ELSE failed_items || (SELECT coalesce(jsonb_agg(f), '[]'::jsonb)
          FROM (SELECT f FROM jsonb_array_elements(CAST(:failures AS jsonb)) AS f
                LIMIT {FAILED_ITEMS_KEPT} - jsonb_array_length(failed_items)) AS kept) END
    WHERE id = :id
    RETURNING {COLUMNS}
    """
)
# A whole batch of a bulk update in one statement, set-based: lock the batch's products, derive
# each one's new values from the patch (the same patch for all), and for the products it really
# changes write the new row and one audit row with before/after of only the changed fields. The
# rules are gatehouse.catalog.rules.apply's, in SQL (a JSON true is not 1, as there). A product
# that would exceed ATTRIBUTES_MAX attributes is left as it is and reported as a failed item.
PATCH_BATCH = text(
    f"""
    WITH locked AS (
      SELECT p.* FROM products AS p WHERE p.id = ANY(:ids) ORDER BY p.id FOR UPDATE
    ), change AS (
      SELECT o.id, n.*, o.name AS old_name, o.description AS old_description, o.status AS old_status,
        o.price_amount AS old_amount, o.price_currency AS old_currency,
        (SELECT ARRAY[coalesce(jsonb_object_agg(k, coalesce(o.attributes -> k, 'null')), '{{}}'),
                coalesce(jsonb_object_agg(k, coalesce(CAST(:patch_attributes AS jsonb) -> k, 'null')), '{{}}')]
         FROM jsonb_object_keys(CAST(:patch_attributes AS jsonb)) AS k
         WHERE (o.attributes -> k) IS DISTINCT FROM nullif(CAST(:patch_attributes AS jsonb) -> k, 'null'))
          AS attribute_change,
        -- Only a patch that sets attributes can take a product past the limit.
        CAST(:set_attributes AS jsonb) <> '{{}}'
          AND (SELECT count(*) FROM jsonb_object_keys(n.attributes)) > {rules.ATTRIBUTES_MAX} AS too_many
      FROM locked AS o CROSS JOIN LATERAL (SELECT
        coalesce(CAST(:name AS text), o.name) AS name,
        coalesce(CAST(:description AS text), o.description) AS description,
        coalesce(CAST(:price_amount AS bigint), o.price_amount) AS price_amount,
        coalesce(CAST(:price_currency AS text), o.price_currency) AS price_currency,
        coalesce(CAST(:status AS text), o.status) AS status,
        (o.attributes || CAST(:set_attributes AS jsonb)) - CAST(:removed_attributes AS text[]) AS attributes
      ) AS n
    ), changed AS (
      SELECT c.*,
        jsonb_strip_nulls(jsonb_build_object(
          'name', CASE WHEN c.name <> c.old_name THEN to_jsonb(c.old_name) END,
          'description', CASE WHEN c.description <> c.old_description THEN to_jsonb(c.old_description) END,
          'status', CASE WHEN c.status <> c.old_status THEN to_jsonb(c.old_status) END,
          'price', CASE WHEN (c.price_amount, c.price_currency) <> (c.old_amount, c.old_currency)
                   THEN jsonb_build_object('amount', c.old_amount, 'currency', c.old_currency) END))
        || CASE WHEN (c.attribute_change)[1] <> '{{}}' THEN jsonb_build_object('attributes', (c.attribute_change)[1])
                ELSE '{{}}' END AS before,
        jsonb_strip_nulls(jsonb_build_object(
          'name', CASE WHEN c.name <> c.old_name THEN to_jsonb(c.name) END,
          'description', CASE WHEN c.description <> c.old_description THEN to_jsonb(c.description) END,
          'status', CASE WHEN c.status <> c.old_status THEN to_jsonb(c.status) END,
          'price', CASE WHEN (c.price_amount, c.price_currency) <> (c.old_amount, c.old_currency)
                   THEN jsonb_build_object('amount', c.price_amount, 'currency', c.price_currency) END))
        || CASE WHEN (c.attribute_change)[2] <> '{{}}' THEN jsonb_build_object('attributes', (c.attribute_change)[2])
                ELSE '{{}}' END AS after
      FROM change AS c WHERE NOT c.too_many
    ), updated AS (
      UPDATE products AS p SET name = c.name, description = c.description, price_amount = c.price_amount,
        price_currency = c.price_currency, status = c.status, attributes = c.attributes, updated_at = now()
      FROM changed AS c WHERE p.id = c.id AND c.before <> '{{}}'
      RETURNING p.id
    ), audited AS (
      INSERT INTO audit_log (actor, action, entity, entity_id, before, after)
      SELECT :actor, 'product.bulk_update', 'product', c.id::text, c.before, c.after
      FROM changed AS c WHERE c.before <> '{{}}'
    )
    SELECT
      (SELECT coalesce(array_agg(id), '{{}}') FROM updated) AS updated,
      (SELECT coalesce(array_agg(id), '{{}}') FROM locked) AS found,
      (SELECT coalesce(array_agg(id), '{{}}') FROM change WHERE too_many) AS too_many
    """
)


def _advance(conn: Connection, op_id: uuid.UUID, n: int, failures: list[dict[str, Any]]) -> OperationRecord:
    """Move the cursor and counters past a batch of ``n`` (``failures`` among them); the batch's last step."""
    row = conn.execute(
        ADVANCE,
        {
            "id": op_id,
            "n": n,
            "ok": n - len(failures),
            "bad": len(failures),
            "failures": json.dumps(failures),
        },
    ).one()
    return OperationRecord(*row)


INSERT_REINDEX = text(
    f"""
    INSERT INTO catalog_bulk_operations (id, type, requester, request, product_ids, total)
    SELECT :id, 'search_reindex', :requester, CAST(:request AS jsonb), ids, cardinality(ids)
    FROM (SELECT coalesce(array_agg(id ORDER BY id), '{{}}') AS ids FROM products) AS all_products
    ON CONFLICT (type) WHERE type = 'search_reindex' AND status IN ('pending', 'running') DO NOTHING
    RETURNING {COLUMNS}
    """
)
LIVE_REINDEX = text(
    f"SELECT {COLUMNS} FROM catalog_bulk_operations "
    "WHERE type = 'search_reindex' AND status IN ('pending', 'running')"
)


@dataclass(frozen=True)
class Reindex:
    """A re-index asked for: the live operation, whether it was already running, and its job to send."""

    operation: OperationRecord
    already_running: bool
    delivery: Delivery | None = None


@dataclass(frozen=True)
class Batch:
    """A committed batch: the operation after it, and the jobs its commit wrote (send them)."""

    operation: OperationRecord
    deliveries: tuple[Delivery, ...] = ()


def event_of_end(op: OperationRecord) -> Event:
    """``catalog.bulk_operation.completed|failed`` or ``catalog.search_reindex.completed|failed``."""
    kind = "search_reindex" if op.type == "search_reindex" else "bulk_operation"
    return Event(
        f"catalog.{kind}.{'completed' if op.status == 'completed' else 'failed'}",
        {
            "operationId": str(op.id),
            "type": op.type,
            "status": op.status,
            "counters": {
                "total": op.total,
                "processed": op.processed,
                "succeeded": op.succeeded,
                "failed": op.failed,
            },
            "error": op.error,
        },
    )


def _notify_end(conn: Connection, op: OperationRecord) -> Delivery | None:
    """An asynchronous operation ended: tell its requester, in the transaction that ended it."""
    if op.requester is None:
        return None  # started with the admin token: nobody to tell
    ok = op.status == "completed"
    reason = "" if ok else f" Błąd: {(op.error or {}).get('message', 'nieznany')}."
    if op.type == "search_reindex":
        kind = f"catalog.search_reindex.{'completed' if ok else 'failed'}"
        title = "Reindeksacja wyszukiwarki zakończona" if ok else "Reindeksacja wyszukiwarki nie powiodła się"
        counts = f"Produkty: {op.total}, zaindeksowane: {op.succeeded}, błędy: {op.failed}."
    else:
        kind = f"catalog.bulk_operation.{'completed' if ok else 'failed'}"
        title = "Operacja masowa zakończona" if ok else "Operacja masowa nie powiodła się"
        counts = f"Produkty: {op.total}, zmienione: {op.succeeded}, błędy: {op.failed}."
    return notify(
        conn,
        user_id=op.requester,
        kind=kind,
        title=title,
        body=counts + reason,
        link=f"/v1/admin/catalog/bulk-operations/{op.id}",
    ).delivery


class BulkStore:
    def __init__(
        self, engine: Engine, *, queue: str, job_type: str, max_attempts: int, events: EventBus | None = None
    ) -> None:
        self.engine = engine
        self._job = {"queue": queue, "type": job_type, "max_attempts": max_attempts}
        self.events = events or EventBus()

    def _ended(self, conn: Connection, op: OperationRecord, *, notify: bool) -> list[Delivery]:
        """In the transaction that ended ``op``: its event, and (asynchronous ones) its requester's notice."""
        sent = self.events.publish(on_connection(conn), event_of_end(op))
        email = _notify_end(conn, op) if notify else None
        return sent + ([email] if email else [])

    def create(
        self,
        selection: Selection,
        patch: ProductPatch,
        request: dict[str, Any],
        *,
        requester: uuid.UUID | None,
        actor: str,
        sync_threshold: int,
    ) -> tuple[OperationRecord, list[Delivery]]:
        """Record the operation; run it here if it is small, else with its job row.

        Returns the operation and the jobs to enqueue after commit: an asynchronous
        operation's own job, or the events' deliveries of a synchronous one.
        """
        rules.check_patch(patch)
        op_id = uuid.uuid4()
        with self.engine.begin() as conn:
            self._require_attributes(conn, patch)
            ids = _resolve(conn, selection)
            if not ids:
                raise ValidationFailed("the selection matches no product", field="filter")
            op = OperationRecord(
                *conn.execute(
                    INSERT_OPERATION,
                    {
                        "id": op_id,
                        "type": "product_bulk_update",
                        "requester": requester,
                        "request": json.dumps({k: v for k, v in request.items() if k != "productIds"}),
                        "product_ids": ids,
                        "total": len(ids),
                    },
                ).one()
            )
            if len(ids) <= sync_threshold:
                # Small: one transaction for the record and the whole change; nobody to notify.
                done, sent = self._batch(conn, op_id, patch, len(ids), actor)
                return done or op, sent + self._ended(conn, done, notify=False)
            delivery = self._job_row(conn, op_id)
        return op, [delivery]

    def _job_row(self, conn: Connection, op_id: uuid.UUID) -> Delivery:
        job = conn.exec_driver_sql(
            SQL_CREATE,
            {
                "id": op_id,
                "tier": "user",
                "account_id": None,
                "payload": Jsonb({"operationId": str(op_id)}),
                **self._job,
            },
        ).one()
        return Delivery(job.id, job.queue, job.type, job.delivery)

    def start_reindex(self, *, requester: uuid.UUID | None, reason: str = "requested") -> Reindex:
        """Queue a ``search_reindex`` over every product, or return the one already live."""
        with self.engine.begin() as conn:
            return self.start_reindex_in(conn, requester=requester, reason=reason)

    def start_reindex_in(self, conn: Connection, *, requester: uuid.UUID | None, reason: str) -> Reindex:
        """In the caller's transaction (an attribute's searchable flip); send ``delivery`` after commit."""
        while True:
            op_id = uuid.uuid4()
            row = conn.execute(
                INSERT_REINDEX,
                {"id": op_id, "requester": requester, "request": json.dumps({"reason": reason})},
            ).one_or_none()
            if row is not None:
                return Reindex(OperationRecord(*row), False, self._job_row(conn, op_id))
            live = conn.execute(LIVE_REINDEX).one_or_none()
            if live is not None:
                return Reindex(OperationRecord(*live), True)
            # The live one ended between the two statements: try again.

    def run_batch(self, op_id: uuid.UUID, batch_size: int, *, actor: str) -> Batch | None:
        """Process the next batch in one transaction; None when there is nothing left to do.

        The batch that ends the operation also raises its event and notifies its
        requester, in the same transaction (so exactly once); send ``Batch.deliveries``
        after it returns.
        """
        with self.engine.begin() as conn:
            op = conn.execute(
                text("SELECT type, request->'patch' AS patch FROM catalog_bulk_operations WHERE id = :id"),
                {"id": op_id},
            ).one_or_none()
            if op is None:
                raise NotFound(f"bulk operation {op_id} not found")
            if op.type == "search_reindex":
                done, sent = self._reindex_batch(conn, op_id, batch_size), []
            else:
                done, sent = self._batch(conn, op_id, patch_from_json(op.patch), batch_size, actor)
            if done is None:
                return None
            if done.status == "completed":
                sent += self._ended(conn, done, notify=True)
            return Batch(done, tuple(sent))

    def _batch(
        self, conn: Connection, op_id: uuid.UUID, patch: ProductPatch, size: int, actor: str
    ) -> tuple[OperationRecord | None, list[Delivery]]:
        """The next batch of a bulk update, and the deliveries of its ``catalog.product.updated``."""
        status, cursor, total, batch = conn.execute(LOCK, {"id": op_id, "size": size}).one()
        if status not in LIVE or cursor >= total:
            return None, []  # done already: a duplicate or late run
        attrs = patch.attributes or {}
        price = patch.price
        result = conn.execute(
            PATCH_BATCH,
            {
                "ids": list(batch),
                "actor": actor,
                "name": patch.name,
                "description": patch.description,
                "price_amount": price.amount if price else None,
                "price_currency": price.currency if price else None,
                "status": patch.status,
                "set_attributes": json.dumps({k: v for k, v in attrs.items() if v is not None}),
                "removed_attributes": [k for k, v in attrs.items() if v is None],
                "patch_attributes": json.dumps(attrs),
            },
        ).one()
        found, too_many = set(result.found), set(result.too_many)
        failures = [{"productId": str(i), "reason": "product not found"} for i in batch if i not in found] + [
            {"productId": str(i), "reason": f"more than {rules.ATTRIBUTES_MAX} attributes"}
            for i in batch
            if i in too_many
        ]
        documents.refresh_patched(
            conn,
            result.updated,
            fields=[f for f in ("name", "description", "status") if getattr(patch, f) is not None],
            attribute_codes=list(attrs),
        )
        sent = []
        if result.updated:  # one event per batch, with the ids it changed
            sent = self.events.publish(
                on_connection(conn),
                Event(
                    "catalog.product.updated",
                    {
                        "productIds": [str(i) for i in result.updated],
                        "operationId": str(op_id),
                        "actor": actor,
                    },
                ),
            )
        return _advance(conn, op_id, len(batch), failures), sent

    def _reindex_batch(self, conn: Connection, op_id: uuid.UUID, size: int) -> OperationRecord | None:
        """The next products' documents into the shadow; the last batch swaps the shadow in."""
        status, cursor, total, batch = conn.execute(LOCK, {"id": op_id, "size": size}).one()
        if status not in LIVE:
            return None  # done already: a duplicate or late run
        built = documents.build(conn, batch) if batch else set()
        # A product deleted since the operation listed it has no document to build.
        failures = [{"productId": str(i), "reason": "product not found"} for i in batch if i not in built]
        if cursor + len(batch) >= total:
            documents.swap(conn)
        return _advance(conn, op_id, len(batch), failures)

    def fail(self, op_id: uuid.UUID, error: dict[str, Any]) -> list[Delivery]:
        """The operation cannot go on (its job ran out of attempts): its event, its requester told.

        Returns the jobs to send after this returns.
        """
        with self.engine.begin() as conn:
            row = conn.execute(
                text(
                    "UPDATE catalog_bulk_operations SET status = 'failed', error = CAST(:error AS jsonb), "
                    f"finished_at = now() WHERE id = :id AND status IN ('pending', 'running') RETURNING {COLUMNS}"
                ),
                {"id": op_id, "error": json.dumps(error)},
            ).one_or_none()
            return self._ended(conn, OperationRecord(*row), notify=True) if row else []

    def get(self, op_id: uuid.UUID) -> OperationRecord:
        with self.engine.connect() as conn:
            row = conn.execute(
                text(f"SELECT {COLUMNS} FROM catalog_bulk_operations WHERE id = :id"), {"id": op_id}
            ).one_or_none()
        if row is None:
            raise NotFound(f"bulk operation {op_id} not found")
        return OperationRecord(*row)

    def failures(self, op_id: uuid.UUID, *, limit: int = 50, after: int = 0) -> list[FailureRecord]:
        """The operation's failed items after position ``after``, in order, with their products' SKU and name."""
        with self.engine.connect() as conn:
            rows = conn.execute(FAILURES, {"id": op_id, "after": after, "limit": limit}).all()
            known = (
                rows
                or conn.execute(
                    text("SELECT 1 FROM catalog_bulk_operations WHERE id = :id"), {"id": op_id}
                ).first()
            )
            if not known:
                raise NotFound(f"bulk operation {op_id} not found")
        return [FailureRecord(*row) for row in rows]

    def list(
        self,
        *,
        status: str | None = None,
        type: str | None = None,
        limit: int = 50,
        before: tuple[datetime, uuid.UUID] | None = None,
        failed_items: bool = True,
    ) -> list[OperationRecord]:
        """Newest first; without ``failed_items`` each record's list is empty (not read: up to 1,000 each)."""
        columns = COLUMNS if failed_items else COLUMNS.replace("failed_items", "'[]'::jsonb AS failed_items")
        sql, params = newest_first(
            f"SELECT {columns} FROM catalog_bulk_operations",
            {"status": status, "type": type},
            limit=limit,
            before=before,
            param=lambda name: f":{name}",
        )
        with self.engine.connect() as conn:
            return [OperationRecord(*row) for row in conn.execute(text(sql), params)]

    @staticmethod
    def _require_attributes(conn: Connection, patch: ProductPatch) -> None:
        codes = {code: "patch.attributes" for code, v in (patch.attributes or {}).items() if v is not None}
        CatalogStore._require_attributes(conn, codes)
