"""Process-level hooks: poll interval and reconciliation at boot, closing the stores and flushing the
traces at shutdown."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from dramatiq import Broker, Middleware
from dramatiq.common import q_name

from gatehouse import metrics, traces

log = logging.getLogger(__name__)


class IdlePoll(Middleware):
    """How long idle consumers sleep between polls: WORKER_IDLE_POLL_MS, or WORKER_QUIET_POLL_MS on quiet queues.

    The poll bounds how late a due delayed message or a woken job starts, and
    every poll of every idle consumer (a queue and its delay queue, each) costs
    the process CPU while it works: with 20 consumers at 100 ms, a busy webhook
    worker spent more on polling than on its deliveries. Quiet queues carry
    work nobody waits on within the second (ticks, sweeps, e-mail), so their
    consumers poll less often. The dramatiq CLI has no option for either; its
    consumers and worker threads are created during boot, after the first hook,
    and each consumer thread reads its own timeout after the second.
    """

    def __init__(self, poll_ms: int, *, quiet_ms: int, quiet_queues: frozenset[str]) -> None:
        self.poll_ms, self.quiet_ms, self.quiet_queues = poll_ms, quiet_ms, quiet_queues

    def before_worker_boot(self, broker: Broker, worker: Any) -> None:
        worker.worker_timeout = self.poll_ms

    def after_consumer_thread_boot(self, broker: Broker, thread: Any) -> None:
        if q_name(thread.queue_name) in self.quiet_queues:
            thread.worker_timeout = self.quiet_ms


class BootReconciliation(Middleware):
    """At worker start, re-enqueue live rows that have no message (the platform rule).

    Grace 0: a row caught between its producer's insert and enqueue gets a
    duplicate message, which the row claim turns into a no-op.
    """

    def __init__(self, reconcile: Callable[..., int]) -> None:
        self.reconcile = reconcile

    def after_worker_boot(self, broker: Broker, worker: Any) -> None:
        metrics.RECONCILED.inc(self.reconcile(grace_ms=0))


class CloseStores(Middleware):
    """Last thing at shutdown (first in the list, so its after-hook runs last)."""

    def __init__(self, close: Callable[[], None]) -> None:
        self.close = close

    def after_worker_shutdown(self, broker: Broker, worker: Any) -> None:
        log.info("closing Redis and the database pool")
        self.close()


class FlushTraces(Middleware):
    """The spans still batched are exported before the process ends (a forked worker process skips atexit)."""

    def after_worker_shutdown(self, broker: Broker, worker: Any) -> None:
        traces.shutdown()
