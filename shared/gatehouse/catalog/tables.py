"""Catalog tables (SQLModel declarations, for migrations and tests) and the records the store reads."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import CHAR, BigInteger, CheckConstraint, Column, DateTime, Index, UniqueConstraint, text
from sqlalchemy.dialects.postgresql import JSONB
from sqlmodel import Field, SQLModel

from gatehouse.catalog.rules import STATUSES


def _tz() -> Any:
    return Field(sa_column=Column(DateTime(timezone=True), nullable=False, server_default=text("now()")))


class Product(SQLModel, table=True):
    __tablename__ = "products"
    __table_args__ = (
        UniqueConstraint("sku", name="products_sku_key"),
        CheckConstraint(f"status IN {STATUSES}", name="products_status_valid"),
        CheckConstraint("price_amount >= 0", name="products_price_amount_valid"),
        # Admin listing: newest first, all or one status, keyset-paged on (created_at, id).
        Index("products_by_created", "created_at", "id"),
        Index("products_by_status", "status", "created_at", "id"),
    )

    id: uuid.UUID = Field(default_factory=uuid.uuid4, primary_key=True)
    sku: str
    name: str
    description: str = Field(default="", sa_column_kwargs={"server_default": ""})
    # Minor units (cents, grosze) of price_currency (ISO 4217).
    price_amount: int = Field(sa_column=Column(BigInteger, nullable=False))
    price_currency: str = Field(sa_column=Column(CHAR(3), nullable=False))
    status: str = Field(default="draft", sa_column_kwargs={"server_default": "draft"})
    # {attribute code: value}; codes are rows of ``attributes``.
    attributes: dict[str, Any] = Field(
        sa_column=Column(JSONB, nullable=False, server_default=text("'{}'::jsonb"))
    )
    created_at: datetime = _tz()
    updated_at: datetime = _tz()


class Attribute(SQLModel, table=True):
    """A product attribute; the values of ``searchable`` ones go into the search documents."""

    __tablename__ = "attributes"

    code: str = Field(primary_key=True)
    label: str
    searchable: bool = Field(default=False, sa_column_kwargs={"server_default": text("false")})
    created_at: datetime = _tz()


@dataclass(frozen=True)
class ProductRecord:
    id: uuid.UUID
    sku: str
    name: str
    description: str
    price_amount: int
    price_currency: str
    status: str
    attributes: dict[str, Any]
    created_at: datetime
    updated_at: datetime


PRODUCT_COLUMNS = (
    "id, sku, name, description, price_amount, price_currency, status, attributes, created_at, updated_at"
)


@dataclass(frozen=True)
class AttributeRecord:
    code: str
    label: str
    searchable: bool
    created_at: datetime


ATTRIBUTE_COLUMNS = "code, label, searchable, created_at"
