"""The notifications' use cases that a staff user starts: marking one read.

Notifying is not one of them: a domain change notifies in its own unit of work
(``NotificationStore.notify(tx, …)``), so the two commit together.
"""

from __future__ import annotations

import uuid

from gatehouse.notifications.store import NotificationStore
from gatehouse.notifications.tables import NotificationRecord
from gatehouse.uow import UnitOfWork


class NotificationHandlers:
    def __init__(self, uow: UnitOfWork, store: NotificationStore) -> None:
        self.uow, self.store = uow, store

    def mark_read(self, user_id: uuid.UUID, notification_id: uuid.UUID) -> NotificationRecord:
        """The first read time is kept; another user's notification is NotFound."""
        with self.uow.begin() as tx:
            return self.store.mark_read(tx, user_id, notification_id)
