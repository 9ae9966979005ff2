"""Imported Wildberries data, one table per dataset, upserted on WB's natural keys.

A rerun, a retry, a resumed pause or a crash mid-page writes the same rows
again, which changes nothing: no dataset can hold a row twice, and a row is
only updated (and its ``imported_at`` moved) when its values changed. Each row
keeps WB's record as ``data`` (JSONB) next to the columns we query by.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from datetime import date, datetime
from typing import Any

from sqlalchemy import BigInteger, Column, Date, DateTime, Engine, text, tuple_
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlmodel import Field, SQLModel


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


# How each WB record maps to its table's key columns.
Keys = Callable[[dict[str, Any]], dict[str, Any]]
ORDERS: tuple[type[SQLModel], Keys] = (
    WbOrder,
    lambda r: {"srid": r["srid"], "last_change_date": r["lastChangeDate"]},
)
SALES: tuple[type[SQLModel], Keys] = (
    WbSale,
    lambda r: {"sale_id": r["saleID"], "last_change_date": r["lastChangeDate"]},
)
REPORT: tuple[type[SQLModel], Keys] = (WbReportRow, lambda r: {"rrd_id": r["rrdId"]})  # camelCase rows
CAMPAIGNS: tuple[type[SQLModel], Keys] = (WbCampaign, lambda r: {"advert_id": r["id"]})  # adverts v2 shape
STOCKS: tuple[type[SQLModel], Keys] = (
    WbStock,
    lambda r: {"nm_id": r["nmId"], "chrt_id": r["chrtId"], "warehouse_id": r["warehouseId"]},
)
CARDS: tuple[type[SQLModel], Keys] = (WbCard, lambda r: {"nm_id": r["nmID"]})


class WbData:
    """The imported WB rows and the feeds' cursors of every account: upserted by natural keys, never duplicated."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def read_cursor(self, account_id: uuid.UUID, feed: str) -> str | None:
        with self.engine.connect() as conn:
            return conn.execute(
                text("SELECT cursor FROM wb_feed_cursors WHERE account_id = :account AND feed = :feed"),
                {"account": account_id, "feed": feed},
            ).scalar()

    def save_cursor(self, account_id: uuid.UUID, feed: str, cursor: str) -> None:
        self.upsert_values(WbFeedCursor, [{"account_id": account_id, "feed": feed, "cursor": cursor}])

    def upsert(
        self, dataset: tuple[type[SQLModel], Keys], account_id: uuid.UUID, rows: Iterable[dict]
    ) -> int:
        """Insert ``rows``, or update those that changed; returns how many it was given (deduplicated)."""
        model, keys = dataset
        return self.upsert_values(
            model, [{"account_id": account_id, **keys(row), "data": row} for row in rows]
        )

    def upsert_values(self, model: type[SQLModel], values: list[dict[str, Any]]) -> int:
        if not values:
            return 0
        table = model.__table__
        primary = [c.name for c in table.primary_key.columns]
        # One page may repeat a key (WB pages by ">= cursor"); keep its last version.
        unique = list({tuple(v[k] for k in primary): v for v in values}.values())
        stmt = pg_insert(table).values(unique)
        updates = {c: stmt.excluded[c] for c in unique[0] if c not in primary}
        stamp = "imported_at" if "imported_at" in table.c else "updated_at"
        # Only a row whose values changed is written (and stamped): a sync over unchanged data
        # writes nothing, no dead tuple, no WAL, and the stamp says when the data last changed.
        changed = tuple_(*(table.c[c] for c in updates)).is_distinct_from(tuple_(*updates.values()))
        stmt = stmt.on_conflict_do_update(
            index_elements=primary, set_={**updates, stamp: text("now()")}, where=changed
        )
        with self.engine.begin() as conn:
            conn.execute(stmt)
        return len(unique)
