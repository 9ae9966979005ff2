"""Notifications of staff users: in-app (the ``notifications`` table) and by e-mail (a queued job).

A domain change notifies its user with ``NotificationStore.notify(tx, …)`` in
its own unit of work, so the change, the notification and the job row of its
e-mail commit together, and the e-mail's message is sent after the commit. The
e-mail itself is the ``notifications.email`` job
(gatehouse_worker.jobs.notifications), with its own retries: a slow or down
SMTP server never fails the change.
"""

from gatehouse.notifications.store import EmailOf, NotificationStore
from gatehouse.notifications.tables import Notification, NotificationRecord

__all__ = ["EmailOf", "Notification", "NotificationRecord", "NotificationStore"]
