"""Tables of carts, price lists and RFQs (SQLModel declarations, for migrations and tests) and their records.

Each table has the partial index its sweep reads (``gatehouse.sweeps.sweep``):
only the rows a sweep may still move are in it, so a sweep over a table of
millions of settled rows reads only the few that are due.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import CheckConstraint, Column, DateTime, Index, text
from sqlalchemy.dialects.postgresql import JSONB
from sqlmodel import Field, SQLModel

from gatehouse.sweeps.rules import CART_STATUSES, PRICE_LIST_STATUSES, RFQ_STATUSES


def _tz(*, default_now: bool = True) -> Any:
    return Field(
        sa_column=Column(
            DateTime(timezone=True), nullable=False, server_default=text("now()") if default_now else None
        )
    )


class Cart(SQLModel, table=True):
    __tablename__ = "carts"
    __table_args__ = (
        CheckConstraint(f"status IN {CART_STATUSES}", name="carts_status_valid"),
        # The abandonment sweep: open carts, oldest touch first.
        Index("carts_open_by_updated", "updated_at", postgresql_where=text("status = 'open'")),
    )

    id: uuid.UUID = Field(default_factory=uuid.uuid4, primary_key=True)
    # The shop's own reference of the customer (no customers table here).
    customer_ref: str
    status: str = Field(default="open", sa_column_kwargs={"server_default": "open"})
    # Every change of the cart (its items) touches it; an open cart untouched long enough is abandoned.
    updated_at: datetime = _tz()
    # [{"sku", "quantity"}]
    items: list[dict[str, Any]] = Field(
        sa_column=Column(JSONB, nullable=False, server_default=text("'[]'::jsonb"))
    )
    created_at: datetime = _tz()


class PriceList(SQLModel, table=True):
    __tablename__ = "price_lists"
    __table_args__ = (
        CheckConstraint(f"status IN {PRICE_LIST_STATUSES}", name="price_lists_status_valid"),
        CheckConstraint("valid_to > valid_from", name="price_lists_validity"),
        # The status sweep: scheduled ones by their start, live ones by their end.
        Index(
            "price_lists_scheduled_by_valid_from",
            "valid_from",
            postgresql_where=text("status = 'scheduled'"),
        ),
        Index(
            "price_lists_live_by_valid_to",
            "valid_to",
            postgresql_where=text("status IN ('scheduled', 'active')"),
        ),
    )

    id: uuid.UUID = Field(default_factory=uuid.uuid4, primary_key=True)
    name: str
    status: str
    valid_from: datetime = _tz(default_now=False)
    valid_to: datetime = _tz(default_now=False)
    created_at: datetime = _tz()
    updated_at: datetime = _tz()


class Rfq(SQLModel, table=True):
    """A request for quotation: open until quoted, both until it expires."""

    __tablename__ = "rfqs"
    __table_args__ = (
        CheckConstraint(f"status IN {RFQ_STATUSES}", name="rfqs_status_valid"),
        # The expiry sweep: the RFQs that may still expire, by when.
        Index("rfqs_live_by_expires_at", "expires_at", postgresql_where=text("status IN ('open', 'quoted')")),
    )

    id: uuid.UUID = Field(default_factory=uuid.uuid4, primary_key=True)
    customer_ref: str
    status: str
    expires_at: datetime = _tz(default_now=False)
    created_at: datetime = _tz()
    updated_at: datetime = _tz()


@dataclass(frozen=True)
class CartRecord:
    id: uuid.UUID
    customer_ref: str
    status: str
    items: list[dict[str, Any]]
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class PriceListRecord:
    id: uuid.UUID
    name: str
    status: str
    valid_from: datetime
    valid_to: datetime
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class RfqRecord:
    id: uuid.UUID
    customer_ref: str
    status: str
    expires_at: datetime
    created_at: datetime
    updated_at: datetime


CART_COLUMNS = "id, customer_ref, status, items, created_at, updated_at"
PRICE_LIST_COLUMNS = "id, name, status, valid_from, valid_to, created_at, updated_at"
RFQ_COLUMNS = "id, customer_ref, status, expires_at, created_at, updated_at"
