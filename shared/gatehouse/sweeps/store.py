"""Carts, price lists and RFQs: their admin reads, and their writes in the caller's unit of work."""

from __future__ import annotations

import json
import uuid
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine, text

from gatehouse import audit
from gatehouse.db import one_or_404
from gatehouse.sweeps import rules
from gatehouse.sweeps.tables import (
    CART_COLUMNS,
    PRICE_LIST_COLUMNS,
    RFQ_COLUMNS,
    CartRecord,
    PriceListRecord,
    RfqRecord,
)

if TYPE_CHECKING:
    from gatehouse.uow import Tx


class SweepStore:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    # -- carts -------------------------------------------------------------------------

    def create_cart(self, tx: Tx, customer_ref: str, items: list[dict[str, Any]]) -> CartRecord:
        rules.check_text(customer_ref, "customerRef", rules.CUSTOMER_REF_MAX)
        rules.check_items(items)
        conn = tx.conn
        row = conn.execute(
            text(
                "INSERT INTO carts (id, customer_ref, items) VALUES (:id, :ref, CAST(:items AS jsonb)) "
                f"RETURNING {CART_COLUMNS}"
            ),
            {"id": uuid.uuid4(), "ref": customer_ref, "items": json.dumps(items)},
        ).one()
        return CartRecord(*row)

    def get_cart(self, cart_id: uuid.UUID) -> CartRecord:
        return CartRecord(*self._get("carts", CART_COLUMNS, cart_id, "cart"))

    def set_cart_items(
        self, tx: Tx, cart_id: uuid.UUID, items: list[dict[str, Any]], *, actor: str
    ) -> CartRecord:
        """New items; it touches the cart (``updated_at``), and an abandoned cart is open again.

        The change and its audit row commit together. A sweep flipping this cart
        at the same moment either skips it (it is locked here) or waits and finds
        it fresh.
        """
        rules.check_items(items)
        conn = tx.conn
        sql = text(f"SELECT {CART_COLUMNS} FROM carts WHERE id = :id FOR UPDATE")
        current = CartRecord(*one_or_404(conn, sql, {"id": cart_id}, f"cart {cart_id}"))
        rules.check_editable(current.status, cart_id)
        updated = CartRecord(
            *conn.execute(
                text(
                    "UPDATE carts SET items = CAST(:items AS jsonb), status = 'open', updated_at = now() "
                    f"WHERE id = :id RETURNING {CART_COLUMNS}"
                ),
                {"id": cart_id, "items": json.dumps(items)},
            ).one()
        )
        before, after = {"items": current.items}, {"items": updated.items}
        if current.status != updated.status:
            before["status"], after["status"] = current.status, updated.status
        audit.record(
            conn, actor=actor, action="cart.update", entity="cart", entity_id=str(cart_id),
            before=before, after=after,
        )  # fmt: skip
        return updated

    # -- price lists -------------------------------------------------------------------

    def create_price_list(
        self, tx: Tx, name: str, valid_from: datetime, valid_to: datetime
    ) -> PriceListRecord:
        """Its status follows the times on the database clock: scheduled, active or already expired."""
        rules.check_text(name, "name", rules.NAME_MAX)
        rules.check_validity(valid_from, valid_to)
        conn = tx.conn
        row = conn.execute(
            text(
                "INSERT INTO price_lists (id, name, status, valid_from, valid_to) "
                f"VALUES (:id, :name, {rules.PRICE_LIST_STATUS_AT_CREATION}, :valid_from, :valid_to) "
                f"RETURNING {PRICE_LIST_COLUMNS}"
            ),
            {"id": uuid.uuid4(), "name": name, "valid_from": valid_from, "valid_to": valid_to},
        ).one()
        return PriceListRecord(*row)

    def get_price_list(self, price_list_id: uuid.UUID) -> PriceListRecord:
        return PriceListRecord(*self._get("price_lists", PRICE_LIST_COLUMNS, price_list_id, "price list"))

    # -- RFQs --------------------------------------------------------------------------

    def create_rfq(self, tx: Tx, customer_ref: str, expires_at: datetime) -> RfqRecord:
        """Open until it expires (expired at once if ``expires_at`` has passed)."""
        rules.check_text(customer_ref, "customerRef", rules.CUSTOMER_REF_MAX)
        rules.check_time(expires_at, "expiresAt")
        conn = tx.conn
        row = conn.execute(
            text(
                "INSERT INTO rfqs (id, customer_ref, status, expires_at) "
                f"VALUES (:id, :ref, {rules.RFQ_STATUS_AT_CREATION}, :expires_at) RETURNING {RFQ_COLUMNS}"
            ),
            {"id": uuid.uuid4(), "ref": customer_ref, "expires_at": expires_at},
        ).one()
        return RfqRecord(*row)

    def get_rfq(self, rfq_id: uuid.UUID) -> RfqRecord:
        return RfqRecord(*self._get("rfqs", RFQ_COLUMNS, rfq_id, "RFQ"))

    def _get(self, table: str, columns: str, row_id: uuid.UUID, what: str) -> Any:
        with self.engine.connect() as conn:
            return one_or_404(
                conn,
                text(f"SELECT {columns} FROM {table} WHERE id = :id"),
                {"id": row_id},
                f"{what} {row_id}",
            )
