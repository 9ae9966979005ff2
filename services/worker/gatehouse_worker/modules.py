"""Consumers of a module that is off are paused in every worker process; they resume when it is on.

Every MODULE_POLL_S this process reads ``module_registrations`` (one SELECT)
and pauses or resumes the Dramatiq consumer of each module queue: a paused
consumer takes no message, so the module's backlog stays in Redis untouched —
no message dropped, no job row touched, no attempt spent. A message a consumer
had already prefetched when its module went off is put back by the job
pipeline (``JobRuntime.run``) unclaimed. Jobs already running finish.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from dramatiq import Broker, Middleware
from psycopg import OperationalError
from sqlalchemy.exc import SQLAlchemyError

from gatehouse.modules import MODULES, ModuleStates

log = logging.getLogger(__name__)

MODULE_POLL_S = 0.5


class ModulePauses(Middleware):
    def __init__(self, modules: ModuleStates) -> None:
        self.modules = modules
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.paused: set[str] = set()

    def after_worker_boot(self, broker: Broker, worker: Any) -> None:
        self._apply(worker)
        self._thread = threading.Thread(target=self._loop, args=(worker,), name="module-pauses", daemon=True)
        self._thread.start()

    def before_worker_shutdown(self, broker: Broker, worker: Any) -> None:
        self._stop.set()

    def _loop(self, worker: Any) -> None:
        while not self._stop.wait(MODULE_POLL_S):
            self._apply(worker)

    def _apply(self, worker: Any) -> None:
        try:
            states = self.modules.all(fresh=True)
        except (SQLAlchemyError, OperationalError) as exc:
            log.warning("cannot read the modules (%s); consumers stay as they are", exc)
            return
        for module in MODULES.values():
            on = states.get(module.name) is not None and states[module.name].on
            for queue in module.queues:
                consumer = worker.consumers.get(queue)
                if consumer is None:
                    continue
                if on and queue in self.paused:
                    consumer.resume()
                    self.paused.discard(queue)
                    log.info("module %s is on: consuming %s again", module.name, queue)
                elif not on and queue not in self.paused:
                    consumer.pause()
                    self.paused.add(queue)
                    log.info("module %s is off: consumer of %s paused", module.name, queue)
