"""Consumers of a held queue are paused in every worker process; they resume when it is let go.

A queue is held when an operator paused it or its module is off: one answer,
``Holds.paused_queues`` (gatehouse.pauses). Every QUEUE_POLL_S this process reads
it (the module table and ``operator_pauses``, one small SELECT each) and pauses
or resumes the Dramatiq consumer of each queue: a paused consumer takes no
message, so the backlog stays in Redis untouched — no message dropped, no job
row touched, no attempt spent. A message a consumer had already prefetched when
its queue was held is put back by the job pipeline (``JobRuntime.run``)
unclaimed. Jobs already running finish. The same refresh serves the pipeline's
account holds (its admit step asks ``Holds.account_pause``); this process logs
them as it first sees them.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from dramatiq import Broker, Middleware
from psycopg import OperationalError
from sqlalchemy.exc import SQLAlchemyError

from gatehouse.pauses import Holds, Pause

log = logging.getLogger(__name__)

QUEUE_POLL_S = 0.5


def why(pause: Pause) -> str:
    return f"module {pause.module} is off" if pause.module else f"paused by {pause.paused_by}"


class QueuePauses(Middleware):
    def __init__(self, holds: Holds) -> None:
        self.holds = holds
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.paused: set[str] = set()
        self.accounts: set[str] = set()  # the held accounts this process has seen (logged as they change)

    def after_worker_boot(self, broker: Broker, worker: Any) -> None:
        self._apply(worker)
        self._thread = threading.Thread(target=self._loop, args=(worker,), name="queue-pauses", daemon=True)
        self._thread.start()

    def before_worker_shutdown(self, broker: Broker, worker: Any) -> None:
        self._stop.set()

    def _loop(self, worker: Any) -> None:
        while not self._stop.wait(QUEUE_POLL_S):
            self._apply(worker)

    def _apply(self, worker: Any) -> None:
        try:
            held = self.holds.paused_queues(fresh=True)
        except (SQLAlchemyError, OperationalError) as exc:
            log.warning("cannot read the held queues (%s); consumers stay as they are", exc)
            return
        for queue, consumer in worker.consumers.items():
            pause = held.get(queue)
            if pause is None and queue in self.paused:
                consumer.resume()
                self.paused.discard(queue)
                log.info("queue %s is no longer held: consuming it again", queue)
            elif pause is not None and queue not in self.paused:
                consumer.pause()
                self.paused.add(queue)
                log.info("queue %s is held (%s): its consumer is paused", queue, why(pause))
        # Account holds are asked by the pipeline's admit step; here they are only logged as this
        # process first sees them (read in the same refresh).
        accounts = self.holds.paused_accounts()
        for account in accounts.keys() - self.accounts:
            log.info("account %s is held (%s): its WB jobs wait", account, why(accounts[account]))
        for account in self.accounts - accounts.keys():
            log.info("account %s is no longer held", account)
        self.accounts = set(accounts)
