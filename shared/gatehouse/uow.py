"""The unit of work: one transaction, and the messages of the jobs it wrote sent after its commit.

Every change that writes job rows runs in a unit of work (routes, job bodies,
sweeps, CLIs, the console, the worker's pipeline), and this is the one place
that puts job messages on the broker after a commit:

    with uow.begin() as tx:          # one transaction (SQLAlchemy, psycopg 3 under it)
        bulk.insert(tx, …)           # domain SQL on tx.conn
        jobs.create(tx, JOB_TYPE, …) # the job store records the job's message on tx
        tx.publish(event)            # subscribers (the webhooks' outbox) write rows in tx
    # committed: every recorded message is sent now

Nothing is sent for a transaction that rolled back. A crash between the commit
and the send leaves rows without a message, which reconciliation sends later;
a send that fails (Redis down) is logged and left to reconciliation too.

``autocommit()`` is the same contract for work that is one statement (a job's
creation, its claim-time writes): each statement of the job store commits by
itself on its plain psycopg pool (``gatehouse.db.Statements``, one round trip,
prepared by the server) and what they recorded is sent when the block ends,
even if it ends with an error, since those statements are committed.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

from psycopg import Cursor
from psycopg.rows import class_row
from redis import RedisError
from sqlalchemy import Connection, Engine

from gatehouse.db import Statements
from gatehouse.events import Event, EventBus

log = logging.getLogger(__name__)
T = TypeVar("T")
# What the job store records: a job's message (gatehouse.jobs.JobMessage, which has its ``job_id``).
Message = Any


class Tx:
    """One unit of work in progress: its connection, and the job messages to send after it."""

    def __init__(self, conn: Connection | None, statements: Statements, bus: EventBus) -> None:
        self._conn = conn
        self._statements = statements
        self._bus = bus
        self.messages: list[Message] = []

    @property
    def conn(self) -> Connection:
        """The transaction's SQLAlchemy connection (domain SQL: ``tx.conn.execute(text(…))``)."""
        if self._conn is None:
            raise RuntimeError("an autocommit unit of work has no transaction: use uow.begin()")
        return self._conn

    @contextlib.contextmanager
    def cursor(self, row: Callable[..., T]) -> Iterator[Cursor[T]]:
        """A psycopg cursor in this unit of work: in the transaction, or (autocommit) on the statement pool."""
        if self._conn is None:
            with self._statements.cursor(row) as cur:
                yield cur
            return
        driver = self._conn.connection.driver_connection
        with driver.cursor(row_factory=class_row(row)) as cur:
            yield cur

    def one(self, sql: str, params: dict[str, Any], row: Callable[..., T]) -> T | None:
        with self.cursor(row) as cur:
            return cur.execute(sql, params).fetchone()

    def all(self, sql: str, params: dict[str, Any], row: Callable[..., T]) -> list[T]:
        with self.cursor(row) as cur:
            return cur.execute(sql, params).fetchall()

    def run(self, sql: str, params: dict[str, Any]) -> int:
        """A statement that returns no rows, in this unit of work; how many rows it touched."""
        if self._conn is None:
            return self._statements.run(sql, params)
        with self._conn.connection.driver_connection.cursor() as cur:
            return cur.execute(sql, params).rowcount

    def record(self, *messages: Message) -> None:
        """Send these after the commit (the job store records what it writes; nobody else needs to)."""
        self.messages.extend(messages)

    def publish(self, *events: Event) -> None:
        """Raise domain events in this transaction: their subscribers write what they cause in it."""
        self._bus.publish(self, *events)


class UnitOfWork:
    def __init__(
        self,
        engine: Engine,
        statements: Statements,
        bus: EventBus,
        send: Callable[[Sequence[Message]], Any],
    ) -> None:
        self._engine = engine
        self._statements = statements
        self._bus = bus
        self._send = send

    @contextlib.contextmanager
    def begin(self) -> Iterator[Tx]:
        """One transaction; its recorded messages are sent after it commits, none if it rolls back."""
        with self._engine.begin() as conn:
            tx = Tx(conn, self._statements, self._bus)
            yield tx
        self._flush(tx)

    @contextlib.contextmanager
    def autocommit(self) -> Iterator[Tx]:
        """Single statements, each committed alone; what they recorded is sent when the block ends."""
        tx = Tx(None, self._statements, self._bus)
        try:
            yield tx
        finally:
            self._flush(tx)

    def _flush(self, tx: Tx) -> None:
        # All at once (``Dispatcher.send_all``: one round trip however many, e.g. a fan-out's chunk).
        messages, tx.messages = tx.messages, []
        if not messages:
            return
        try:
            self._send(messages)
        except RedisError as exc:
            log.warning(
                "job %s%s is saved but not enqueued (%s); reconciliation will enqueue it",
                messages[0].job_id,
                f" and {len(messages) - 1} more" if len(messages) > 1 else "",
                exc,
            )
