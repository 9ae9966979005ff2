"""The in-process domain event bus: events raised inside the transaction of the change.

A domain change publishes its events on the connection of its own
transaction (``bus.publish(sql, *events)``). Each subscriber gets the events
of one publish together and writes what they cause in that same transaction —
the webhooks module writes one delivery row per (event, subscribed endpoint)
and a ``webhook.deliver`` job row per endpoint's batch of them (the
transactional outbox) — and returns the job deliveries to send. The caller
sends them after its commit (``bus.send`` or ``Gatehouse.enqueue``): a change
that rolls back leaves no delivery, and a crash between commit and send
leaves job rows that reconciliation enqueues.

Subscribers run on whichever connection the change uses: a SQLAlchemy
connection (the catalog) or a psycopg cursor (the job store's outcome write),
both seen through ``Sql``, one function that runs a psycopg-style statement.
"""

from __future__ import annotations

import base64
import logging
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from psycopg import Cursor
from sqlalchemy import Connection

from gatehouse.jobs import Delivery

log = logging.getLogger(__name__)

# Runs one statement (psycopg's %(name)s parameters) in the caller's transaction; returns its rows.
Sql = Callable[[str, dict[str, Any]], list[Any]]


def on_connection(conn: Connection) -> Sql:
    def run(statement: str, params: dict[str, Any]) -> list[Any]:
        result = conn.exec_driver_sql(statement, params)
        return list(result) if result.returns_rows else []

    return run


def on_cursor(cur: Cursor) -> Sql:
    def run(statement: str, params: dict[str, Any]) -> list[Any]:
        cur.execute(statement, params)
        return cur.fetchall() if cur.description else []

    return run


def new_message_id() -> str:
    """``msg_`` + 26 base32 characters of a random UUID: the event's ``webhook-id`` forever."""
    return "msg_" + base64.b32encode(uuid.uuid4().bytes).decode().rstrip("=").lower()


@dataclass(frozen=True)
class Event:
    type: str  # e.g. "catalog.bulk_operation.completed"
    data: dict[str, Any]
    id: str = field(default_factory=new_message_id)
    at: datetime = field(default_factory=lambda: datetime.now(UTC))

    def payload(self) -> dict[str, Any]:
        """The body a subscriber receives (Standard Webhooks' ``type``/``timestamp``/``data``)."""
        return {"type": self.type, "timestamp": self.at.isoformat(timespec="milliseconds"), "data": self.data}


# Gets the (non-empty) events of one publish, in order; returns the jobs to send after commit.
Subscriber = Callable[[Sql, Sequence[Event]], Sequence[Delivery]]


class EventBus:
    def __init__(
        self, send: Callable[[Delivery], None] | None = None, emits: Callable[[str], bool] | None = None
    ) -> None:
        self._subscribers: list[Subscriber] = []
        self._send = send
        # Whether an event type is emitted now: not while its module is off (gatehouse.modules).
        self._emits = emits or (lambda event_type: True)

    def subscribe(self, subscriber: Subscriber) -> None:
        self._subscribers.append(subscriber)

    def publish(self, sql: Sql, *events: Event) -> list[Delivery]:
        """Write what ``events`` cause, in the caller's transaction; send the result after commit."""
        live = [event for event in events if self._emits(event.type)]
        if not live:
            return []
        return [d for subscriber in self._subscribers for d in subscriber(sql, live)]

    def send(self, deliveries: Iterable[Delivery]) -> None:
        """After the commit: enqueue the job deliveries ``publish`` returned."""
        for delivery in deliveries:
            if self._send is not None:
                self._send(delivery)
