"""Notifications of staff users: in-app (the ``notifications`` table) and by e-mail (a queued job).

A domain change notifies its user with ``notify(conn, …)`` on the connection
of its own transaction, so the change, the notification and the job row of
its e-mail commit together; after the commit the caller sends the returned
delivery with ``Gatehouse.enqueue``. The e-mail itself is
the ``notifications.email`` job (gatehouse_worker.jobs.notifications), with
its own retries: a slow or down SMTP server never fails the change.
"""

from gatehouse.notifications.store import (
    EmailOf,
    NotificationStore,
    Notified,
    notify,
)
from gatehouse.notifications.tables import Notification, NotificationRecord

__all__ = [
    "EmailOf",
    "Notification",
    "NotificationRecord",
    "NotificationStore",
    "Notified",
    "notify",
]
