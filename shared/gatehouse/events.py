"""The in-process domain event bus: events raised inside the transaction of the change.

A domain change raises its events in its own unit of work (``tx.publish(*events)``,
gatehouse.uow). Each subscriber gets the events of one publish together and
writes what they cause in that same transaction — the webhooks module writes
one delivery row per (event, subscribed endpoint) and a ``webhook.deliver`` job
per endpoint's batch of them (the transactional outbox), whose messages the
unit of work sends after the commit: a change that rolls back leaves no
delivery, and a crash between commit and send leaves job rows that
reconciliation enqueues.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any


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


# Gets the unit of work (a gatehouse.uow.Tx, which imports this module) and the (non-empty) events
# of one publish, in order; writes what they cause in it.
Subscriber = Callable[[Any, Sequence[Event]], None]


class EventBus:
    def __init__(self, emits: Callable[[str], bool] | None = None) -> None:
        self._subscribers: list[Subscriber] = []
        # Whether an event type is emitted now: not while its module is off (gatehouse.modules).
        self._emits = emits or (lambda event_type: True)

    def subscribe(self, subscriber: Subscriber) -> None:
        self._subscribers.append(subscriber)

    def publish(self, tx: Any, *events: Event) -> None:
        """Let every subscriber write what ``events`` cause, in ``tx``'s transaction."""
        live = [event for event in events if self._emits(event.type)]
        if live:
            for subscriber in self._subscribers:
                subscriber(tx, live)
