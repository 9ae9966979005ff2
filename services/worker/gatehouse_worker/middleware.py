"""Process-level hooks: poll interval and reconciliation at boot, closing the stores at shutdown."""

from __future__ import annotations

import logging
from typing import Any

from dramatiq import Broker, Middleware

from gatehouse import metrics
from gatehouse.composition import Gatehouse
from gatehouse.reconcile import reconcile

log = logging.getLogger(__name__)


class IdlePoll(Middleware):
    """How long idle consumers sleep between polls (WORKER_IDLE_POLL_MS).

    It bounds how late a due delayed message or a woken job starts. The
    dramatiq CLI has no option for it; its consumers and worker threads are
    created during boot, after this hook.
    """

    def __init__(self, poll_ms: int) -> None:
        self.poll_ms = poll_ms

    def before_worker_boot(self, broker: Broker, worker: Any) -> None:
        worker.worker_timeout = self.poll_ms


class BootReconciliation(Middleware):
    """At worker start, re-enqueue live rows that have no message (the platform rule).

    Grace 0: a row caught between its producer's insert and enqueue gets a
    duplicate message, which the row claim turns into a no-op.
    """

    def __init__(self, gatehouse: Gatehouse) -> None:
        self.gh = gatehouse

    def after_worker_boot(self, broker: Broker, worker: Any) -> None:
        sent = reconcile(self.gh.jobs, self.gh.dispatcher, grace_ms=0)
        metrics.RECONCILED.inc(sent)


class CloseStores(Middleware):
    """Last thing at shutdown (first in the list, so its after-hook runs last)."""

    def __init__(self, gatehouse: Gatehouse) -> None:
        self.gh = gatehouse

    def after_worker_shutdown(self, broker: Broker, worker: Any) -> None:
        log.info("closing Redis and the database pool")
        self.gh.close()
