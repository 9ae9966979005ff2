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
(``search_documents``) in the same transaction (``gatehouse.catalog.documents``).
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
from typing import TYPE_CHECKING, Any

from sqlalchemy import (
    ARRAY,
    CheckConstraint,
    Column,
    Connection,
    DateTime,
    Engine,
    Index,
    TextClause,
    Uuid,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlmodel import Field, SQLModel

from gatehouse.catalog import documents, rules
from gatehouse.catalog.rules import Price, ProductPatch
from gatehouse.catalog.store import CatalogStore
from gatehouse.db import one_or_404
from gatehouse.errors import Conflict, NotFound, ValidationFailed
from gatehouse.events import Event
from gatehouse.job_types import CATALOG_BULK_OPERATION
from gatehouse.jobs import JobStore
from gatehouse.notifications import NotificationStore
from gatehouse.paging import newest_first

if TYPE_CHECKING:
    from gatehouse.uow import Tx

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
    # The operation this one reverts (POST …/bulk-operations/{id}/revert), if it is a revert.
    revert_of: uuid.UUID | None = Field(default=None, nullable=True)
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
    revert_of: uuid.UUID | None


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
class Preview:
    """A dry run: the products the selection matches, how many the patch would change, and the first
    PREVIEW_SAMPLE of those (by id) as ``{productId, sku, before, after}`` of the changed fields."""

    matched: int
    would_change: int
    sample: list[dict[str, Any]]


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


def _matching(selection: Selection) -> tuple[str, dict[str, Any]]:
    """The selection as a condition on ``products``, and its parameters (listed ids travel once, as
    one ``uuid[]`` literal: psycopg adapts a list element by element, ~4 µs each)."""
    if selection.product_ids is not None:
        ids = "{" + ",".join(map(str, selection.product_ids)) + "}"
        return "id = ANY(CAST(:ids AS uuid[]))", {"ids": ids}
    where, params = ["true"], {}
    if selection.status:
        where.append("status = :status")
        params["status"] = selection.status
    if selection.sku_prefix:
        where.append("starts_with(sku, :prefix)")
        params["prefix"] = selection.sku_prefix
    if selection.attributes:
        where.append("attributes @> CAST(:attributes AS jsonb)")
        params["attributes"] = json.dumps(selection.attributes)
    return " AND ".join(where), params


def _selected(selection: Selection) -> tuple[str, dict[str, Any]]:
    """A query of the selection's product ids as one sorted array, and its parameters: resolved and
    sorted in PostgreSQL, so a filter's never travel."""
    where, params = _matching(selection)
    if selection.product_ids is not None:
        # Unknown ids stay: each is counted as a failed item when its batch runs.
        return "SELECT array_agg(DISTINCT i ORDER BY i) FROM unnest(CAST(:ids AS uuid[])) AS i", params
    return f"SELECT array_agg(id ORDER BY id) FROM products WHERE {where}", params


# The operation with its selection; no row when the selection matches no product.
INSERT_OPERATION = f"""
    INSERT INTO catalog_bulk_operations (id, type, requester, request, product_ids, total)
    SELECT :id, :type, :requester, CAST(:request AS jsonb), ids, cardinality(ids)
    FROM ({{selection}}) AS selected(ids) WHERE ids IS NOT NULL
    RETURNING {COLUMNS}
    """
# A revert of operation ``of``: the products its audit rows name (on the partial index by operation),
# sorted; an operation that changed none makes an empty revert (it completes at its first batch).
INSERT_REVERT = text(
    f"""
    INSERT INTO catalog_bulk_operations (id, type, requester, request, product_ids, total, revert_of)
    SELECT :id, 'product_bulk_update', :requester, CAST(:request AS jsonb), ids, cardinality(ids), :of
    FROM (SELECT coalesce(array_agg(DISTINCT CAST(entity_id AS uuid) ORDER BY CAST(entity_id AS uuid)), '{{}}')
          FROM audit_log WHERE operation_id = :of AND entity = 'product') AS audited(ids)
    RETURNING {COLUMNS}
    """
)
# A batch's first statement. It locks the operation (a second run of it waits here, then reads
# the cursor the first one left) and reads what the batch needs: a re-index takes its next ids
# (arrays are 1-based), a bulk update reads them in place in its next statement, so they never
# travel. A live bulk update's next products are locked here too, in their order, so the
# statement that patches them starts after every edit of them in flight has committed (and so
# has a re-index batch that built their documents first: see gatehouse.catalog.documents).
START = text(
    """
    WITH op AS (
      SELECT type, request->'patch' AS patch, revert_of, status, cursor, total,
        product_ids[cursor + 1 : cursor + :size] AS batch
      FROM catalog_bulk_operations WHERE id = :id FOR UPDATE
    ), locked AS (
      SELECT FROM products
      WHERE id = ANY(CAST((SELECT batch FROM op WHERE type = 'product_bulk_update' AND status IN ('pending', 'running'))
        AS uuid[]))
      ORDER BY id FOR UPDATE
    )
    SELECT type, patch, revert_of, status, cursor, total, CASE WHEN type = 'search_reindex' THEN batch END AS batch,
      (SELECT count(*) FROM locked) AS locked
    FROM op
    """
)
# The next batch's ids (``ids``), in a statement of the batch (its operation row is locked).
BATCH_IDS = (
    "SELECT product_ids[cursor + 1 : cursor + :size] AS ids FROM catalog_bulk_operations WHERE id = :id"
)


def _advance(batch: str) -> str:
    """Move the cursor and counters past a batch, its last step: ``batch`` is a query of one row,
    the batch's size ``n`` and its failed items ``failures`` (a JSON array)."""
    return f"""
    UPDATE catalog_bulk_operations SET
      status = CASE WHEN cursor + b.n >= total THEN 'completed' ELSE 'running' END,
      started_at = coalesce(started_at, now()),
      finished_at = CASE WHEN cursor + b.n >= total THEN now() END,
      cursor = cursor + b.n, processed = processed + b.n,
      succeeded = succeeded + b.n - jsonb_array_length(b.failures),
      failed = failed + jsonb_array_length(b.failures),
      failed_items = CASE WHEN jsonb_array_length(failed_items) >= {FAILED_ITEMS_KEPT} THEN failed_items
        ELSE failed_items || (SELECT coalesce(jsonb_agg(f), '[]'::jsonb)
          FROM (SELECT f FROM jsonb_array_elements(b.failures) AS f
                LIMIT {FAILED_ITEMS_KEPT} - jsonb_array_length(failed_items)) AS kept) END
    FROM ({batch}) AS b(n, failures)
    WHERE id = :id
    RETURNING {COLUMNS}
    """


ADVANCE = text(_advance("SELECT CAST(:n AS int), CAST(:failures AS jsonb)"))


@dataclass(frozen=True)
class _Field:
    """A patchable product field in a batch's SQL, where ``o`` is the product as it was."""

    columns: str  # the product columns it is read from
    assign: str  # the SET of the patched value
    changed: str  # whether the patch changes o
    before: str  # o's value, as a JSON object of the field
    after: str  # the patched value, as a JSON object of the field


def _text_field(name: str) -> _Field:
    return _Field(
        name,
        f"{name} = CAST(:{name} AS text)",
        f"o.{name} <> CAST(:{name} AS text)",
        f"jsonb_build_object('{name}', o.{name})",
        f"CAST(:after_{name} AS jsonb)",
    )


# A patched value's JSON (``after_…``) is the same for every product: one parameter, read once.
FIELDS = {
    "name": _text_field("name"),
    "description": _text_field("description"),
    "status": _text_field("status"),
    "price": _Field(
        "price_amount, price_currency",
        "price_amount = CAST(:price_amount AS bigint), price_currency = CAST(:price_currency AS text)",
        "(o.price_amount, o.price_currency) <> (CAST(:price_amount AS bigint), CAST(:price_currency AS text))",
        "jsonb_build_object('price', jsonb_build_object('amount', o.price_amount, 'currency', o.price_currency))",
        "CAST(:after_price AS jsonb)",
    ),
    # Only the codes whose value the patch changes (a JSON true is not 1, as in rules.apply), from
    # ATTRIBUTE_CHANGE (``a``).
    "attributes": _Field(
        "attributes",
        "attributes = (attributes || CAST(:set_attributes AS jsonb)) - CAST(:removed_attributes AS text[])",
        "a.before IS NOT NULL",
        "jsonb_build_object('attributes', a.before)",
        "jsonb_build_object('attributes', a.after)",
    ),
}
ATTRIBUTE_CHANGE = """
      CROSS JOIN LATERAL (
        SELECT jsonb_object_agg(k, coalesce(o.attributes -> k, 'null')) AS before,
          jsonb_object_agg(k, CAST(:patch_attributes AS jsonb) -> k) AS after
        FROM jsonb_object_keys(CAST(:patch_attributes AS jsonb)) AS k
        WHERE (o.attributes -> k) IS DISTINCT FROM nullif(CAST(:patch_attributes AS jsonb) -> k, 'null')
      ) AS a"""
# Only a patch that sets attributes can take a product past the limit.
TOO_MANY = f"""(SELECT count(*) FROM jsonb_object_keys(
        (o.attributes || CAST(:set_attributes AS jsonb)) - CAST(:removed_attributes AS text[]))) > {rules.ATTRIBUTES_MAX}"""


def _patch_params(patch: ProductPatch) -> dict[str, Any]:
    params: dict[str, Any] = {}
    for name in ("name", "description", "status"):
        if (value := getattr(patch, name)) is not None:
            params |= {name: value, f"after_{name}": json.dumps({name: value})}
    if patch.price is not None:
        params |= {
            "price_amount": patch.price.amount,
            "price_currency": patch.price.currency,
            "after_price": json.dumps({"price": patch.price.as_json()}),
        }
    if patch.attributes:
        params |= {
            "set_attributes": json.dumps({k: v for k, v in patch.attributes.items() if v is not None}),
            "removed_attributes": [k for k, v in patch.attributes.items() if v is None],
            "patch_attributes": json.dumps(patch.attributes),
        }
    return params


# The products of a batch (a CTE ``batch`` of one row: ``ids``, a uuid[]).
BATCH_PRODUCTS = "id = ANY(CAST((SELECT ids FROM batch) AS uuid[]))"


def _patched(patch: ProductPatch) -> dict[str, _Field]:
    """The fields the patch sets (an empty attributes object patches nothing)."""
    return {name: f for name, f in FIELDS.items() if getattr(patch, name) not in (None, {})}


def _change(patch: ProductPatch, products: str = BATCH_PRODUCTS, *, materialized: bool = True) -> str:
    """Two CTEs: ``current``, the ``products`` (a condition) as they are, and ``change``, each one the
    patch changes with ``too_many`` (it would take it past ATTRIBUTES_MAX) and ``before``/``after`` of
    only its changed fields. The rules are gatehouse.catalog.rules.apply's, in SQL: a bulk update's
    batch writes them, a dry run counts them. Not ``materialized``, each reader of ``change`` computes
    only what it reads (a count builds no before/after)."""
    patched = _patched(patch)

    def changed(part: str) -> str:  # the changed fields' ``part``, as one JSON object
        return (
            " || ".join(
                f"CASE WHEN {f.changed} THEN {getattr(f, part)} ELSE '{{}}' END" for f in patched.values()
            )
            or "'{}'::jsonb"
        )

    sets_attributes = any(v is not None for v in (patch.attributes or {}).values())
    return f"""current AS (
          SELECT {", ".join(["ctid", "id", "sku", *(f.columns for f in patched.values())])} FROM products
          WHERE {products}
        ), change AS {"" if materialized else "NOT MATERIALIZED "}(
          SELECT o.ctid, o.id, o.sku, {TOO_MANY if sets_attributes else "false"} AS too_many,
            {changed("before")} AS before, {changed("after")} AS after
          FROM current AS o{ATTRIBUTE_CHANGE if patch.attributes else ""}
          WHERE {" OR ".join(f.changed for f in patched.values()) or "false"}
        )"""


def _failures(*more: str) -> str:
    """The batch's failed items as the CTE ``failures`` (one JSON array ``items``), in the batch's order
    (its ids are sorted): the unknown ids, then ``more`` (queries of ``(k, id, reason)``, k from 2)."""
    return f"""failures AS MATERIALIZED (
          SELECT coalesce(jsonb_agg(jsonb_build_object('productId', id, 'reason', reason) ORDER BY k, id),
            '[]'::jsonb) AS items
          FROM (
            SELECT 1, id, 'product not found' FROM unnest(CAST((SELECT ids FROM batch) AS uuid[])) AS id
            WHERE id NOT IN (SELECT id FROM current)
            {"".join(f" UNION ALL {m}" for m in more)}
          ) AS f(k, id, reason)
        ), advanced AS ({_advance("SELECT cardinality(ids), (SELECT items FROM failures) FROM batch")})
        SELECT *, ARRAY(SELECT id::text FROM updated) AS updated FROM advanced"""


def _patch_batch(patch: ProductPatch, *, status_documents: bool) -> TextClause:
    """A whole batch of a bulk update in one statement, set-based, after START.

    For the batch's products it derives what the patch changes (``_change``; locked by START, no
    other write moves them, so they are found again by ctid), writes the changed products and one
    audit row each (with the operation's id) with before/after of only the changed fields, moves
    their documents' status when ``status_documents``, and advances the operation. A product the
    patch would take past ATTRIBUTES_MAX attributes is left as it is and is a failed item, as is an
    unknown id. Returns the operation's columns, then ``updated``: the ids of the changed products.
    """
    status = (
        "," + documents.STATUS_CTES.format(ids="SELECT id FROM updated", status="CAST(:status AS text)")
        if status_documents
        else ""
    )
    return text(
        f"""
        WITH batch AS ({BATCH_IDS}
        ), {_change(patch)}, changed AS (
          SELECT ctid, id, before, after FROM change WHERE NOT too_many
        ), updated AS (
          UPDATE products SET {", ".join([*(f.assign for f in _patched(patch).values()), "updated_at = now()"])}
          WHERE ctid = ANY(ARRAY(SELECT ctid FROM changed))
          RETURNING id
        ), audited AS (
          INSERT INTO audit_log (actor, action, entity, entity_id, before, after, operation_id)
          SELECT :actor, 'product.bulk_update', 'product', id::text, before, after, :id FROM changed
        ){status}, {_failures(f"SELECT 2, id, 'more than {rules.ATTRIBUTES_MAX} attributes' FROM change WHERE too_many")}
        """
    )


# A dry run: what the operation would do, without writing (``{products}``: _matching's condition).
# One pass over ``change`` counts the products it would change and picks the sample's ids; only
# those rows then build their before/after (``change`` is not materialized: each reader computes
# only what it reads).
PREVIEW_SAMPLE = 20


def _preview(patch: ProductPatch, products: str) -> TextClause:
    return text(
        f"""
        WITH {_change(patch, products, materialized=False)}, picked AS (
          SELECT id, count(*) OVER () AS would FROM change WHERE NOT too_many ORDER BY id LIMIT {PREVIEW_SAMPLE}
        )
        SELECT (SELECT count(*) FROM current), coalesce((SELECT max(would) FROM picked), 0),
          (SELECT coalesce(jsonb_agg(jsonb_build_object('productId', id, 'sku', sku, 'before', before,
             'after', after) ORDER BY id), '[]'::jsonb)
           FROM change WHERE id IN (SELECT id FROM picked))
        """
    )


# A revert's batch (after START): each product of the batch gets back the before-values the reverted
# operation's audit row recorded, unless an audit row of the product is newer than that one (it was
# edited since: a failed item, changed-since). Its own audit rows are the reverse of those, with its id.
def _restore(field: str, key: str, value: str) -> str:
    """The SET of a product column ``p.field`` from the audited ``r.before``, if it holds ``key``."""
    return f"{field} = CASE WHEN r.before ? '{key}' THEN {value} ELSE p.{field} END"


RESTORES = ",\n        ".join(
    [
        _restore("name", "name", "r.before->>'name'"),
        _restore("description", "description", "r.before->>'description'"),
        _restore("status", "status", "r.before->>'status'"),
        _restore("price_amount", "price", "CAST(r.before->'price'->>'amount' AS bigint)"),
        _restore("price_currency", "price", "r.before->'price'->>'currency'"),
        # An attribute the operation added was recorded as null before: removed again.
        _restore(
            "attributes",
            "attributes",
            "(p.attributes || jsonb_strip_nulls(r.before->'attributes')) - "
            "ARRAY(SELECT k FROM jsonb_each(r.before->'attributes') AS e(k, v) WHERE v = 'null')",
        ),
        "updated_at = now()",
    ]
)
REVERT_BATCH = text(
    f"""
    WITH batch AS ({BATCH_IDS}
    ), current AS (
      SELECT ctid, id FROM products WHERE {BATCH_PRODUCTS}
    ), audited AS (
      SELECT a.id AS audit_id, CAST(a.entity_id AS uuid) AS id, a.before, a.after FROM audit_log AS a
      WHERE a.operation_id = (SELECT revert_of FROM catalog_bulk_operations WHERE id = :id)
        AND a.entity = 'product' AND a.entity_id = ANY(CAST((SELECT ids FROM batch) AS text[]))
    ), since AS (
      SELECT au.id FROM audited AS au WHERE EXISTS (
        SELECT FROM audit_log AS n WHERE n.entity = 'product' AND n.entity_id = au.id::text AND n.id > au.audit_id)
    ), restore AS (
      SELECT c.ctid, au.id, au.before, au.after FROM current AS c JOIN audited AS au USING (id)
      WHERE au.id NOT IN (SELECT id FROM since)
    ), updated AS (
      UPDATE products AS p SET
        {RESTORES}
      FROM restore AS r WHERE p.ctid = r.ctid
      RETURNING p.id
    ), audited_revert AS (
      INSERT INTO audit_log (actor, action, entity, entity_id, before, after, operation_id)
      SELECT :actor, 'product.bulk_revert', 'product', id::text, after, before, :id FROM restore
    ), {_failures("SELECT 2, id, 'changed-since' FROM since WHERE id IN (SELECT id FROM current)")}
    """
)


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
    """A re-index asked for: the live operation, and whether it was already running."""

    operation: OperationRecord
    already_running: bool


# Where the console shows an operation (and its failed items): + /{id}.
CONSOLE_PAGE = "/console/bulk-operations"


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


def end_notice(op: OperationRecord) -> dict[str, Any] | None:
    """What an ended asynchronous operation tells its requester (None: started with the admin token).

    Its link is the operation's console page (a path; its e-mail makes it absolute with PUBLIC_URL).
    """
    if op.requester is None:
        return None
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
    return {
        "user_id": op.requester,
        "kind": kind,
        "title": title,
        "body": counts + reason,
        "link": f"{CONSOLE_PAGE}/{op.id}",
    }


class BulkStore:
    """The operations' SQL, in the caller's unit of work (``tx``; gatehouse.catalog.handlers opens it)."""

    def __init__(self, engine: Engine, *, jobs: JobStore, notifications: NotificationStore) -> None:
        self.engine = engine
        self.jobs = jobs
        self.notifications = notifications

    def ended(self, tx: Tx, op: OperationRecord, *, notify: bool) -> None:
        """In the transaction that ended ``op``: its event, and (asynchronous ones) its requester's notice."""
        tx.publish(event_of_end(op))
        notice = end_notice(op) if notify else None
        if notice is not None:
            self.notifications.notify(tx, **notice)

    def insert(
        self,
        tx: Tx,
        selection: Selection,
        patch: ProductPatch,
        request: dict[str, Any],
        *,
        requester: uuid.UUID | None,
    ) -> OperationRecord:
        """Record the operation over its selection (resolved now); ValidationFailed if it matches no product."""
        self._require_attributes(tx.conn, patch)
        selected, params = _selected(selection)
        row = tx.conn.execute(
            text(INSERT_OPERATION.format(selection=selected)),
            {
                **params,
                "id": uuid.uuid4(),
                "type": "product_bulk_update",
                "requester": requester,
                "request": json.dumps({k: v for k, v in request.items() if k != "productIds"}),
            },
        ).one_or_none()
        if row is None:
            raise ValidationFailed("the selection matches no product", field="filter")
        return OperationRecord(*row)

    def run_whole(
        self, tx: Tx, op: OperationRecord, patch: ProductPatch | None, *, actor: str
    ) -> OperationRecord:
        """A small operation in its creating transaction, every product at once (a revert: ``patch``
        None, maybe of no product); nobody to notify."""
        tx.conn.execute(START, {"id": op.id, "size": op.total})
        if patch is None:
            done = self._revert_batch(tx, op.id, op.total, actor)
        else:
            done = self._batch(tx, op.id, patch, op.total, actor)
        self.ended(tx, done, notify=False)
        return done

    def preview(self, selection: Selection, patch: ProductPatch) -> Preview:
        """What the operation would do (a dry run): one read, nothing written."""
        products, params = _matching(selection)
        with self.engine.connect() as conn:
            self._require_attributes(conn, patch)
            matched, would, sample = conn.execute(
                _preview(patch, products), {**params, **_patch_params(patch)}
            ).one()
        return Preview(matched, would, sample)

    def insert_revert(self, tx: Tx, op_id: uuid.UUID, *, requester: uuid.UUID | None) -> OperationRecord:
        """Record the revert of a finished bulk update over the products its audit rows name.

        NotFound for an unknown operation (or a re-index: nothing to revert); 409 OPERATION_NOT_FINISHED
        while it is pending or running (its audit rows are not all written yet).
        """
        row = tx.conn.execute(
            text(
                "SELECT status FROM catalog_bulk_operations WHERE id = :id AND type = 'product_bulk_update' FOR SHARE"
            ),
            {"id": op_id},
        ).one_or_none()
        if row is None:
            raise NotFound(f"bulk operation {op_id} not found")
        if row.status in LIVE:
            raise Conflict(
                f"bulk operation {op_id} is {row.status}: revert it once it has finished",
                code="OPERATION_NOT_FINISHED",
            )
        return OperationRecord(
            *tx.conn.execute(
                INSERT_REVERT,
                {
                    "id": uuid.uuid4(),
                    "of": op_id,
                    "requester": requester,
                    "request": json.dumps({"revertOf": str(op_id)}),
                },
            ).one()
        )

    def queue(self, tx: Tx, op_id: uuid.UUID) -> None:
        """The operation's job (same id): its body runs the batches."""
        self.jobs.create(tx, CATALOG_BULK_OPERATION, job_id=op_id, payload={"operationId": str(op_id)})

    def start_reindex(self, tx: Tx, *, requester: uuid.UUID | None, reason: str) -> Reindex:
        """Queue a ``search_reindex`` over every product, or return the one already live."""
        while True:
            op_id = uuid.uuid4()
            row = tx.conn.execute(
                INSERT_REINDEX,
                {"id": op_id, "requester": requester, "request": json.dumps({"reason": reason})},
            ).one_or_none()
            if row is not None:
                self.queue(tx, op_id)
                return Reindex(OperationRecord(*row), False)
            live = tx.conn.execute(LIVE_REINDEX).one_or_none()
            if live is not None:
                return Reindex(OperationRecord(*live), True)
            # The live one ended between the two statements: try again.

    def run_batch(self, tx: Tx, op_id: uuid.UUID, batch_size: int, *, actor: str) -> OperationRecord | None:
        """Process the next batch in ``tx``; None when there is nothing left to do.

        The batch that ends the operation also raises its event and notifies its
        requester, in the same transaction (so exactly once).
        """
        op = tx.conn.execute(START, {"id": op_id, "size": batch_size}).one_or_none()
        if op is None:
            raise NotFound(f"bulk operation {op_id} not found")
        if op.status not in LIVE or (op.type != "search_reindex" and op.cursor >= op.total):
            return None  # done already: a duplicate or late run
        if op.type == "search_reindex":
            done = self._reindex_batch(tx, op_id, op.batch, last=op.cursor + len(op.batch) >= op.total)
        elif op.revert_of is not None:
            done = self._revert_batch(tx, op_id, batch_size, actor)
        else:
            done = self._batch(tx, op_id, patch_from_json(op.patch), batch_size, actor)
        if done.status == "completed":
            self.ended(tx, done, notify=True)
        return done

    def _batch(self, tx: Tx, op_id: uuid.UUID, patch: ProductPatch, size: int, actor: str) -> OperationRecord:
        """The next batch of a bulk update (START has locked its products), and its ``catalog.product.updated``."""
        conn = tx.conn
        refresh = documents.patch_refresh(
            conn,
            fields=[f for f in ("name", "description", "status") if getattr(patch, f) is not None],
            attribute_codes=list(patch.attributes or {}),
        )
        params = {**_patch_params(patch), "id": op_id, "size": size, "actor": actor}
        *columns, updated = conn.execute(
            _patch_batch(patch, status_documents=refresh == "status"), params
        ).one()
        if refresh == "document":
            documents.refresh(conn, updated)
        return self._updated(tx, op_id, columns, updated, actor)

    def _revert_batch(self, tx: Tx, op_id: uuid.UUID, size: int, actor: str) -> OperationRecord:
        """The next batch of a revert (START has locked its products): their documents are rebuilt,
        whatever fields it restored."""
        *columns, updated = tx.conn.execute(REVERT_BATCH, {"id": op_id, "size": size, "actor": actor}).one()
        documents.refresh(tx.conn, updated)
        return self._updated(tx, op_id, columns, updated, actor)

    @staticmethod
    def _updated(tx: Tx, op_id: uuid.UUID, columns: list, updated: list[str], actor: str) -> OperationRecord:
        """A batch's ``catalog.product.updated`` (one per batch, with the ids it changed) and its operation."""
        if updated:
            tx.publish(
                Event(
                    "catalog.product.updated",
                    {"productIds": updated, "operationId": str(op_id), "actor": actor},
                )
            )
        return OperationRecord(*columns)

    def _reindex_batch(
        self, tx: Tx, op_id: uuid.UUID, batch: list[uuid.UUID], *, last: bool
    ) -> OperationRecord:
        """These products' documents into the shadow; the ``last`` batch swaps the shadow in."""
        conn = tx.conn
        built = documents.build(conn, batch) if batch else set()
        # A product deleted since the operation listed it has no document to build.
        failures = [{"productId": str(i), "reason": "product not found"} for i in batch if i not in built]
        if last:
            documents.swap(conn)
        return OperationRecord(
            *conn.execute(ADVANCE, {"id": op_id, "n": len(batch), "failures": json.dumps(failures)}).one()
        )

    def fail(self, tx: Tx, op_id: uuid.UUID, error: dict[str, Any]) -> None:
        """The operation cannot go on (its job ran out of attempts): its event, its requester told."""
        row = tx.conn.execute(
            text(
                "UPDATE catalog_bulk_operations SET status = 'failed', error = CAST(:error AS jsonb), "
                f"finished_at = now() WHERE id = :id AND status IN ('pending', 'running') RETURNING {COLUMNS}"
            ),
            {"id": op_id, "error": json.dumps(error)},
        ).one_or_none()
        if row is not None:
            self.ended(tx, OperationRecord(*row), notify=True)

    def get(self, op_id: uuid.UUID) -> OperationRecord:
        sql = text(f"SELECT {COLUMNS} FROM catalog_bulk_operations WHERE id = :id")
        with self.engine.connect() as conn:
            return OperationRecord(*one_or_404(conn, sql, {"id": op_id}, f"bulk operation {op_id}"))

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
