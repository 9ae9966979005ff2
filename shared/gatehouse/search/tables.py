"""Search tables: the live index and its shadow (same shape; only the live one has the GIN index)."""

from __future__ import annotations

import uuid

from sqlalchemy import Column, ForeignKey, Index, String, Uuid
from sqlalchemy.dialects.postgresql import TSVECTOR
from sqlmodel import Field, SQLModel


def _product_id() -> uuid.UUID:
    return Field(sa_column=Column(Uuid, ForeignKey("products.id", ondelete="CASCADE"), primary_key=True))


class SearchDocument(SQLModel, table=True):
    """A product's document as searched now: name and sku (A), searchable attributes (B), description (C).

    Its pages keep a fifth free (fillfactor 80, migration 0016), so a status update stays on the page.
    """

    __tablename__ = "search_documents"
    __table_args__ = (Index("search_documents_document", "document", postgresql_using="gin"),)

    product_id: uuid.UUID = _product_id()
    document: str = Field(sa_column=Column(TSVECTOR, nullable=False))
    status: str = Field(sa_column=Column(String, nullable=False))


class SearchDocumentBuild(SQLModel, table=True):
    """The shadow index: every edit writes here too; a re-index rebuilds it, then copies it into the live one."""

    __tablename__ = "search_documents_build"

    product_id: uuid.UUID = _product_id()
    document: str = Field(sa_column=Column(TSVECTOR, nullable=False))
    status: str = Field(sa_column=Column(String, nullable=False))
