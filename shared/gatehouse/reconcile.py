"""Reconciliation: give every live job row that lost its message a new one.

Runs at worker boot (the platform rule) and as a periodic tick, so a row
written while Redis was down, or stranded by a crash, does not wait for the
next restart. Rows still ``active`` whose lease ran out go back in line under a
new delivery (their old message is then stale); waiting and delayed rows with
no message in the broker are re-sent. It only enqueues; the row claim makes
any duplicate a no-op.
"""

from __future__ import annotations

import logging

from gatehouse.dispatch import Dispatcher
from gatehouse.jobs import JobStore
from gatehouse.workers import requeue_orphans

log = logging.getLogger(__name__)


def reconcile(store: JobStore, dispatcher: Dispatcher, *, grace_ms: int) -> int:
    """Re-enqueue stranded rows; returns how many messages were sent."""
    sent = requeue_orphans(store, dispatcher, set())
    candidates = store.settled_candidates(grace_ms)
    if candidates:
        queued = dispatcher.queued_job_ids({c.queue for c in candidates})
        for delivery in candidates:
            if str(delivery.job_id) not in queued:
                dispatcher.send(delivery)
                sent += 1
    if sent:
        log.info("reconciliation re-enqueued %d job(s)", sent)
    return sent
