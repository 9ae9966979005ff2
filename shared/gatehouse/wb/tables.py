"""Imported Wildberries data, one table per dataset, upserted on WB's natural keys.

A rerun, a retry, a resumed pause or a crash mid-page writes the same rows
again, which changes nothing: no dataset can hold a row twice, and a row is
only updated (and its ``imported_at`` moved) when its values changed. Each row
keeps WB's record as ``data`` (JSONB) next to the columns we query by.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

from psycopg.types.json import Jsonb
from sqlalchemy import BigInteger, Column, Date, DateTime, text
from sqlalchemy.dialects.postgresql import JSONB
from sqlmodel import Field, SQLModel

from gatehouse.db import Statements


def _account() -> Any:
    return Field(foreign_key="accounts.id", primary_key=True, ondelete="CASCADE")


def _data() -> Any:
    return Field(sa_column=Column(JSONB, nullable=False))


def _imported() -> Any:
    return Field(sa_column=Column(DateTime(timezone=True), nullable=False, server_default=text("now()")))


class WbOrder(SQLModel, table=True):
    __tablename__ = "wb_orders"
    account_id: uuid.UUID = _account()
    srid: str = Field(primary_key=True)
    last_change_date: str
    data: dict[str, Any] = _data()
    imported_at: datetime = _imported()


class WbSale(SQLModel, table=True):
    __tablename__ = "wb_sales"
    account_id: uuid.UUID = _account()
    sale_id: str = Field(primary_key=True)
    last_change_date: str
    data: dict[str, Any] = _data()
    imported_at: datetime = _imported()


class WbReportRow(SQLModel, table=True):
    __tablename__ = "wb_report_rows"
    account_id: uuid.UUID = _account()
    rrd_id: int = Field(sa_column=Column(BigInteger, primary_key=True))
    data: dict[str, Any] = _data()
    imported_at: datetime = _imported()


class WbCampaign(SQLModel, table=True):
    __tablename__ = "wb_campaigns"
    account_id: uuid.UUID = _account()
    advert_id: int = Field(sa_column=Column(BigInteger, primary_key=True))
    data: dict[str, Any] = _data()
    imported_at: datetime = _imported()


class WbCampaignStat(SQLModel, table=True):
    __tablename__ = "wb_campaign_stats"
    account_id: uuid.UUID = _account()
    advert_id: int = Field(sa_column=Column(BigInteger, primary_key=True))
    day: date = Field(sa_column=Column(Date, primary_key=True))
    data: dict[str, Any] = _data()
    imported_at: datetime = _imported()


class WbStock(SQLModel, table=True):
    __tablename__ = "wb_stocks"
    account_id: uuid.UUID = _account()
    nm_id: int = Field(sa_column=Column(BigInteger, primary_key=True))
    chrt_id: int = Field(sa_column=Column(BigInteger, primary_key=True))
    warehouse_id: int = Field(sa_column=Column(BigInteger, primary_key=True))
    data: dict[str, Any] = _data()
    imported_at: datetime = _imported()


class WbCard(SQLModel, table=True):
    __tablename__ = "wb_cards"
    account_id: uuid.UUID = _account()
    nm_id: int = Field(sa_column=Column(BigInteger, primary_key=True))
    data: dict[str, Any] = _data()
    imported_at: datetime = _imported()


class WbFeedCursor(SQLModel, table=True):
    """How far a scheduled sync of an account's feed got (lastChangeDate, or a date for the report backfill)."""

    __tablename__ = "wb_feed_cursors"
    account_id: uuid.UUID = _account()
    feed: str = Field(primary_key=True)
    cursor: str
    updated_at: datetime = _imported()


@dataclass(frozen=True)
class Dataset:
    """How a WB record lands in its table: each column an SQL expression over ``r``, the record as
    jsonb; the key columns (after account_id) are the table's primary key. ``data`` is what is
    stored whole (the record itself unless said). ``natural``: the record's field a feed's pages
    repeat it by (the boundary rows of ``>= dateFrom``)."""

    table: str
    keys: dict[str, str]
    others: dict[str, str] = field(default_factory=dict)
    data: str = "r"
    natural: str | None = None

    @property
    def sql(self) -> str:
        """One statement a page: the rows travel as one jsonb parameter, so nothing is compiled per
        page and the server prepares it after its first uses. A page may repeat a key (WB pages by
        ``>= cursor``): its last version wins. Only a row whose values changed is written (and
        stamped): a sync over unchanged data writes nothing, no dead tuple, no WAL."""
        keys, others = list(self.keys), list(self.others)
        exprs = [*self.keys.values(), *self.others.values()]
        changed = [*others, "data"]
        return (
            f"INSERT INTO {self.table} (account_id, {', '.join([*keys, *others])}, data) "
            f"SELECT DISTINCT ON ({', '.join(self.keys.values())}) %(account)s, {', '.join(exprs)}, {self.data} "
            "FROM jsonb_array_elements(%(rows)s) WITH ORDINALITY AS page(r, n) "
            f"ORDER BY {', '.join(self.keys.values())}, n DESC "
            f"ON CONFLICT (account_id, {', '.join(keys)}) DO UPDATE SET "
            + ", ".join(f"{c} = EXCLUDED.{c}" for c in changed)
            + ", imported_at = now() "
            f"WHERE ({', '.join(f'{self.table}.{c}' for c in changed)}) "
            f"IS DISTINCT FROM ({', '.join(f'EXCLUDED.{c}' for c in changed)})"
        )


def _text(name: str) -> str:
    return f"r->>'{name}'"


def _bigint(name: str) -> str:
    return f"(r->>'{name}')::bigint"


ORDERS = Dataset(
    "wb_orders", {"srid": _text("srid")}, {"last_change_date": _text("lastChangeDate")}, natural="srid"
)
SALES = Dataset(
    "wb_sales", {"sale_id": _text("saleID")}, {"last_change_date": _text("lastChangeDate")}, natural="saleID"
)
REPORT = Dataset("wb_report_rows", {"rrd_id": _bigint("rrdId")})  # camelCase rows (SalesReportsDetailedRes)
CAMPAIGNS = Dataset("wb_campaigns", {"advert_id": _bigint("id")})  # adverts v2 shape
# A fullstats day of one campaign: {"advertId", "day": <the day as WB sends it>}.
CAMPAIGN_STATS = Dataset(
    "wb_campaign_stats",
    {"advert_id": _bigint("advertId"), "day": "left(r->'day'->>'date', 10)::date"},
    data="r->'day'",
)
STOCKS = Dataset(
    "wb_stocks",
    {"nm_id": _bigint("nmId"), "chrt_id": _bigint("chrtId"), "warehouse_id": _bigint("warehouseId")},
)
CARDS = Dataset("wb_cards", {"nm_id": _bigint("nmID")})

SQL_CURSOR = "SELECT cursor FROM wb_feed_cursors WHERE account_id = %(account)s AND feed = %(feed)s"
SQL_SAVE_CURSOR = (
    "INSERT INTO wb_feed_cursors (account_id, feed, cursor) VALUES (%(account)s, %(feed)s, %(cursor)s) "
    "ON CONFLICT (account_id, feed) DO UPDATE SET cursor = EXCLUDED.cursor, updated_at = now() "
    "WHERE wb_feed_cursors.cursor IS DISTINCT FROM EXCLUDED.cursor"
)


@dataclass(frozen=True)
class _Cursor:
    cursor: str


class WbData:
    """The imported WB rows and the feeds' cursors of every account: upserted by natural keys, never
    duplicated, each a single prepared statement (gatehouse.db.Statements)."""

    def __init__(self, statements: Statements) -> None:
        self.statements = statements

    def read_cursor(self, account_id: uuid.UUID, feed: str) -> str | None:
        row = self.statements.one(SQL_CURSOR, {"account": account_id, "feed": feed}, _Cursor)
        return row.cursor if row else None

    def save_cursor(self, account_id: uuid.UUID, feed: str, cursor: str) -> None:
        self.statements.run(SQL_SAVE_CURSOR, {"account": account_id, "feed": feed, "cursor": cursor})

    def upsert(self, dataset: Dataset, account_id: uuid.UUID, rows: Sequence[dict]) -> None:
        """Insert ``rows``, or update those that changed."""
        if rows:
            self.statements.run(dataset.sql, {"account": account_id, "rows": Jsonb(list(rows))})
