"""The two ways to PostgreSQL, both built by the composition root, never at import.

- the SQLAlchemy engine (psycopg 3 under it): every domain store's SQL, written as
  SQLAlchemy Core ``text()`` with named ``:parameters`` and run in a unit of work's
  transaction (gatehouse.uow) or, for reads, on a connection of its own. Core, not raw
  psycopg, because the stores were already written in it, its named parameters and typed
  binding read better than ``%(name)s``, and the unit of work's transaction is a
  SQLAlchemy one that every store shares;
- ``Statements``: single statements in autocommit on a plain psycopg pool, for the hot
  paths that are one statement each (the job store, the API key check and account read
  of every request): one round trip, prepared by the server after its first uses, rows as
  dataclasses with no model layer. The job store's statements inside a transaction run on
  that transaction's psycopg connection (``Tx.cursor``).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import psycopg
import sqlalchemy.exc
from psycopg import Cursor
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import class_row
from psycopg_pool import ConnectionPool
from sqlalchemy import Connection, Engine, Row, TextClause, create_engine, text

from gatehouse.errors import NotFound
from gatehouse.settings import Settings

T = TypeVar("T")


def session_options(settings: Settings) -> str:
    """libpq ``options`` that bound every wait of a session: a row locked by someone else fails the
    statement after DB_LOCK_TIMEOUT_MS (a failed attempt that retries, or a 503 RESOURCE_BUSY in the
    API) instead of stalling a job whose lease keeps being renewed; no statement runs past
    DB_STATEMENT_TIMEOUT_MS. Options the DATABASE_URL already gives are kept (ours come after)."""
    given = conninfo_to_dict(settings.libpq_url).get("options")
    ours = f"-c lock_timeout={settings.db_lock_timeout_ms} -c statement_timeout={settings.db_statement_timeout_ms}"
    return f"{given} {ours}" if given else ours


def cut_short(exc: BaseException) -> str | None:
    """Why PostgreSQL stopped a statement that ``session_options`` bounds, or None for any other error.

    ``lock-timeout``: another session holds the row (DB_LOCK_TIMEOUT_MS); ``statement-timeout``:
    it ran past DB_STATEMENT_TIMEOUT_MS; ``write-conflict``: a deadlock or serialization failure.
    psycopg raises all three as OperationalError subclasses, but none is an outage: the server
    answered, and the same work may well succeed when tried again.
    """
    orig = exc.orig if isinstance(exc, sqlalchemy.exc.DBAPIError) else exc
    if isinstance(orig, psycopg.errors.LockNotAvailable):
        return "lock-timeout"
    if isinstance(orig, psycopg.errors.QueryCanceled):
        return "statement-timeout"
    if isinstance(orig, (psycopg.errors.DeadlockDetected, psycopg.errors.SerializationFailure)):
        return "write-conflict"
    return None


def make_engine(settings: Settings, *, bounded_waits: bool = True) -> Engine:
    """The engine of the API and the workers; the migrations' (``bounded_waits=False``) may wait for
    their locks and build indexes for as long as it takes."""
    connect_args: dict[str, Any] = {"connect_timeout": 5}
    if bounded_waits:
        connect_args["options"] = session_options(settings)
    return create_engine(
        settings.sqlalchemy_url,
        pool_size=settings.db_pool_size,
        max_overflow=settings.db_pool_size,
        # No ping per checkout (it doubles the round trips of every job step); a
        # connection that broke is discarded when it errors, and none lives long.
        pool_recycle=300,
        # Fail fast when PostgreSQL is down instead of hanging a request or a job.
        connect_args=connect_args,
    )


def one_or_404(conn: Connection, sql: TextClause, params: dict[str, Any], what: str) -> Row:
    """The one row ``sql`` finds, or NotFound ("<what> not found") when it finds none."""
    row = conn.execute(sql, params).one_or_none()
    if row is None:
        raise NotFound(f"{what} not found")
    return row


def ping(engine: Engine) -> None:
    with engine.connect() as conn:
        conn.execute(text("SELECT 1"))


class Statements:
    """Single statements on a pool of autocommit connections.

    The pool opens on first use, so a process that forks (gunicorn, the dramatiq
    CLI) never hands live pool threads to a child; ``close`` is like an engine's
    dispose: the next use opens a fresh pool.
    """

    def __init__(self, make_pool: Callable[[], ConnectionPool]) -> None:
        self._make_pool = make_pool
        self._pool: ConnectionPool | None = None
        self._lock = threading.Lock()

    def _opened(self) -> ConnectionPool:
        pool = self._pool
        if pool is None:
            with self._lock:
                if self._pool is None:
                    self._pool = self._make_pool()
                    self._pool.open()
                pool = self._pool
        return pool

    @contextlib.contextmanager
    def cursor(self, row: Callable[..., T]) -> Iterator[Cursor[T]]:
        with self._opened().connection() as conn, conn.cursor(row_factory=class_row(row)) as cur:
            yield cur

    def one(self, sql: str, params: dict[str, Any], row: Callable[..., T]) -> T | None:
        with self.cursor(row) as cur:
            return cur.execute(sql, params).fetchone()

    def all(self, sql: str, params: dict[str, Any], row: Callable[..., T]) -> list[T]:
        with self.cursor(row) as cur:
            return cur.execute(sql, params).fetchall()

    def run(self, sql: str, params: dict[str, Any]) -> int:
        """A statement that returns no rows (a write); how many rows it touched."""
        with self._opened().connection() as conn, conn.cursor() as cur:
            return cur.execute(sql, params).rowcount

    def close(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()


def pool(conninfo: str, *, size: int, timeout_s: float, options: str) -> ConnectionPool:
    """Autocommit connections for ``Statements``: every operation there is one statement.

    No check per checkout (it would double the round trips); a connection that
    broke is discarded when it is returned, and the next one is fresh. ``options``:
    ``session_options``.
    """
    return ConnectionPool(
        conninfo,
        min_size=1,
        max_size=size,
        timeout=timeout_s,
        kwargs={"autocommit": True, "connect_timeout": 5, "options": options},
        name="gatehouse-statements",
        open=False,
    )
