"""The catalog's SQL: products and attributes; each change writes its audit row in the caller's unit of work."""

from __future__ import annotations

import json
import uuid
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, Engine, text

from gatehouse import audit
from gatehouse.catalog import documents, rules
from gatehouse.catalog.rules import NewProduct, Price, ProductPatch
from gatehouse.catalog.tables import ATTRIBUTE_COLUMNS, PRODUCT_COLUMNS, AttributeRecord, ProductRecord
from gatehouse.db import one_or_404
from gatehouse.errors import Conflict, ValidationFailed
from gatehouse.paging import newest_first

if TYPE_CHECKING:
    from gatehouse.uow import Tx

# Many products in one statement: the rows travel as one JSON array.
INSERT_PRODUCTS = text(
    f"""
    INSERT INTO products (id, sku, name, description, price_amount, price_currency, status, attributes)
    SELECT i.id, i.sku, i.name, i.description, i.price_amount, i.price_currency, i.status, i.attributes
    FROM jsonb_to_recordset(CAST(:items AS jsonb)) AS i(
        id uuid, sku text, name text, description text, price_amount bigint,
        price_currency text, status text, attributes jsonb
    )
    ON CONFLICT (sku) DO NOTHING
    RETURNING {PRODUCT_COLUMNS}
    """
)


def _row(product: NewProduct) -> dict[str, Any]:
    return {
        "id": str(uuid.uuid4()),
        "sku": product.sku,
        "name": product.name,
        "description": product.description,
        "price_amount": product.price.amount,
        "price_currency": product.price.currency,
        "status": product.status,
        "attributes": product.attributes,
    }


class CatalogStore:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    # -- products --------------------------------------------------------------------

    def create_product(self, tx: Tx, product: NewProduct) -> ProductRecord:
        rules.check_new(product)
        self._require_attributes(tx.conn, {code: "attributes" for code in product.attributes})
        created = self._insert(tx.conn, [product])
        if not created:
            raise Conflict(f"a product with sku {product.sku} already exists", field="sku")
        return created[0]

    def create_products(self, tx: Tx, products: list[NewProduct]) -> int:
        """All or nothing: every product is created in ``tx``, or none (409 on a taken sku)."""
        rules.check_batch(products)
        fields_of: dict[str, str] = {}
        for i, p in enumerate(products):
            for code in p.attributes:
                fields_of.setdefault(code, f"items.{i}.attributes")
        self._require_attributes(tx.conn, fields_of)
        created = self._insert(tx.conn, products)
        if len(created) < len(products):
            made = {p.sku for p in created}
            i, taken = next((i, p) for i, p in enumerate(products) if p.sku not in made)
            # The error leaves the unit of work, which rolls the whole batch back.
            raise Conflict(f"a product with sku {taken.sku} already exists", field=f"items.{i}.sku")
        return len(created)

    def get_product(self, product_id: uuid.UUID) -> ProductRecord:
        sql = text(f"SELECT {PRODUCT_COLUMNS} FROM products WHERE id = :id")
        with self.engine.connect() as conn:
            return ProductRecord(*one_or_404(conn, sql, {"id": product_id}, f"product {product_id}"))

    @staticmethod
    def missing_skus(tx: Tx, skus: list[str]) -> set[str]:
        """Those of ``skus`` that no product has (read in ``tx``, beside the write that names them)."""
        if not skus:
            return set()
        found = tx.conn.execute(text("SELECT sku FROM products WHERE sku = ANY(:skus)"), {"skus": skus})
        return set(skus) - set(found.scalars())

    def list_products(
        self,
        *,
        status: str | None = None,
        limit: int = 50,
        before: tuple[datetime, uuid.UUID] | None = None,
    ) -> list[ProductRecord]:
        """Newest first; ``before`` is the (created_at, id) of the last product of the previous page."""
        sql, params = newest_first(
            f"SELECT {PRODUCT_COLUMNS} FROM products",
            {"status": status},
            limit=limit,
            before=before,
            param=lambda name: f":{name}",
        )
        with self.engine.connect() as conn:
            return [ProductRecord(*row) for row in conn.execute(text(sql), params)]

    def patch_product(
        self, tx: Tx, product_id: uuid.UUID, patch: ProductPatch, *, actor: str
    ) -> tuple[ProductRecord, bool]:
        """Apply ``patch`` with its audit row (before/after of what changed) and the product's search
        document; returns the product and whether anything changed."""
        rules.check_patch(patch)
        conn = tx.conn
        sql = text(f"SELECT {PRODUCT_COLUMNS} FROM products WHERE id = :id FOR UPDATE")
        current = ProductRecord(*one_or_404(conn, sql, {"id": product_id}, f"product {product_id}"))
        change = rules.apply(
            patch,
            name=current.name,
            description=current.description,
            price=Price(current.price_amount, current.price_currency),
            status=current.status,
            attributes=current.attributes,
        )
        if not change.columns:
            return current, False
        self._require_attributes(
            conn,
            {
                code: "attributes"
                for code, v in (change.after.get("attributes") or {}).items()
                if v is not None
            },
        )
        assignments = ", ".join(
            f"{column} = CAST(:{column} AS jsonb)" if column == "attributes" else f"{column} = :{column}"
            for column in change.columns
        )
        values = {k: json.dumps(v) if k == "attributes" else v for k, v in change.columns.items()}
        updated = conn.execute(
            text(
                f"UPDATE products SET {assignments}, updated_at = now() WHERE id = :id "
                f"RETURNING {PRODUCT_COLUMNS}"
            ),
            {**values, "id": product_id},
        ).one()
        audit.record(
            conn,
            actor=actor,
            action="product.update",
            entity="product",
            entity_id=str(product_id),
            before=change.before,
            after=change.after,
        )
        documents.refresh(conn, [product_id])
        return ProductRecord(*updated), True

    # -- attributes ------------------------------------------------------------------

    def create_attribute(self, tx: Tx, code: str, label: str, searchable: bool) -> AttributeRecord:
        rules.check_code(code)
        rules.check_label(label)
        row = tx.conn.execute(
            text(
                "INSERT INTO attributes (code, label, searchable) VALUES (:code, :label, :searchable) "
                f"ON CONFLICT (code) DO NOTHING RETURNING {ATTRIBUTE_COLUMNS}"
            ),
            {"code": code, "label": label, "searchable": searchable},
        ).one_or_none()
        if row is None:
            raise Conflict(f"an attribute with code {code} already exists", field="code")
        return AttributeRecord(*row)

    def list_attributes(self) -> list[AttributeRecord]:
        with self.engine.connect() as conn:
            rows = conn.execute(text(f"SELECT {ATTRIBUTE_COLUMNS} FROM attributes ORDER BY code"))
            return [AttributeRecord(*row) for row in rows]

    def update_attribute(
        self, tx: Tx, code: str, *, label: str | None = None, searchable: bool | None = None, actor: str
    ) -> tuple[AttributeRecord, dict[str, Any]]:
        """Edit an attribute, audited; returns it and what changed (``{"searchable": …}`` when it flipped)."""
        if label is None and searchable is None:
            raise ValidationFailed("the patch changes nothing: send label and/or searchable", field=None)
        if label is not None:
            rules.check_label(label)
        conn = tx.conn
        sql = text(f"SELECT {ATTRIBUTE_COLUMNS} FROM attributes WHERE code = :code FOR UPDATE")
        current = AttributeRecord(*one_or_404(conn, sql, {"code": code}, f"attribute {code}"))
        before, after = {}, {}
        for key, old, new in (
            ("label", current.label, label),
            ("searchable", current.searchable, searchable),
        ):
            if new is not None and new != old:
                before[key], after[key] = old, new
        if not after:
            return current, after
        updated = conn.execute(
            text(
                "UPDATE attributes SET label = :label, searchable = :searchable WHERE code = :code "
                f"RETURNING {ATTRIBUTE_COLUMNS}"
            ),
            {
                "code": code,
                "label": after.get("label", current.label),
                "searchable": after.get("searchable", current.searchable),
            },
        ).one()
        audit.record(
            conn,
            actor=actor,
            action="attribute.update",
            entity="attribute",
            entity_id=code,
            before=before,
            after=after,
        )
        return AttributeRecord(*updated), after

    # -- helpers ---------------------------------------------------------------------

    def _insert(self, conn: Connection, products: list[NewProduct]) -> list[ProductRecord]:
        rows = conn.execute(INSERT_PRODUCTS, {"items": json.dumps([_row(p) for p in products])})
        created = [ProductRecord(*row) for row in rows]
        documents.refresh(conn, [p.id for p in created])
        return created

    @staticmethod
    def _require_attributes(conn: Connection, fields_of: dict[str, str]) -> None:
        """Every code must be a defined attribute; ``fields_of`` maps a code to the field that uses it."""
        if not fields_of:
            return
        known = set(
            conn.execute(
                text("SELECT code FROM attributes WHERE code = ANY(:codes)"), {"codes": list(fields_of)}
            ).scalars()
        )
        unknown = next((code for code in fields_of if code not in known), None)
        if unknown is not None:
            field = f"{fields_of[unknown]}.{unknown}"
            raise ValidationFailed(
                f"{field}: no attribute {unknown} is defined (POST /v1/admin/catalog/attributes first)",
                field=field,
            )
