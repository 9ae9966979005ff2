"""The consumer side of the composition: the middleware, job actors, ticks.

``setup`` is what the dramatiq CLI and the scheduler load
(``gatehouse_worker.wiring:setup``); the API calls ``build`` to host consumers
in-process when BACKEND_ROLE=all. Each middleware is one concern and none calls
another; how a job message runs is the job pipeline (gatehouse_worker.pipeline).
"""

from __future__ import annotations

import importlib
import logging

import dramatiq
from dramatiq import Middleware
from periodiq import PeriodiqMiddleware

from gatehouse import job_types as jt
from gatehouse.composition import Gatehouse, bootstrap
from gatehouse.schedules import FANOUT_QUEUE
from gatehouse.settings import Settings, load_settings
from gatehouse.sweeps import SWEEPS
from gatehouse_worker import runtime
from gatehouse_worker.health import ConsumerLiveness
from gatehouse_worker.middleware import BootReconciliation, CloseStores, IdlePoll
from gatehouse_worker.modules import ModulePauses
from gatehouse_worker.pipeline import JobRuntime, declare
from gatehouse_worker.schedules import MAINTENANCE_QUEUE, declare_schedules

# A tick older than this is dropped: the next one comes soon enough.
TICK_SKIP_DELAY_S = 30
# Queues of periodic and background work (ticks, reconciliation, sweeps, e-mail): nobody waits on
# them within the second, so their idle consumers poll every WORKER_QUIET_POLL_MS.
QUIET_QUEUES = frozenset(
    {
        FANOUT_QUEUE,
        MAINTENANCE_QUEUE,
        jt.NOTIFICATION_EMAIL.queue,
        *(sweep.job_type.queue for sweep in SWEEPS.values()),
    }
)


def consumer_middleware(gh: Gatehouse) -> list[Middleware]:
    return [
        CloseStores(gh),  # first, so its after_worker_shutdown runs last
        IdlePoll(
            gh.settings.worker_idle_poll_ms,
            quiet_ms=gh.settings.worker_quiet_poll_ms,
            quiet_queues=QUIET_QUEUES,
        ),
        PeriodiqMiddleware(skip_delay=TICK_SKIP_DELAY_S),
        JobRuntime(gh),
        ModulePauses(gh),
        BootReconciliation(gh),
        ConsumerLiveness(gh.settings),
    ]


def job_runtime(gh: Gatehouse) -> JobRuntime:
    return next(m for m in gh.broker.middleware if isinstance(m, JobRuntime))


def build(settings: Settings | None = None) -> Gatehouse:
    settings = settings or load_settings()
    # httpx logs each request at INFO: webhook attempts have their rows, WB calls their
    # metrics, and a log line per request costs a busy webhook worker ~5 % of its CPU.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    gh = bootstrap(settings, consumer_middleware=consumer_middleware)
    for module in settings.job_modules:
        importlib.import_module(module)
    jobs = job_runtime(gh)
    for job_type, body in runtime.JOBS.values():
        declare(gh.broker, jobs, job_type, body)
    declare_schedules(gh)
    return gh


def apply_log_level(settings: Settings) -> None:
    """LOG_LEVEL for a consumer or scheduler process, whose logging was set up at INFO before this.

    The dramatiq CLI sets DEBUG instead when asked with ``--verbose``: that wins.
    """
    root = logging.getLogger()
    if root.level != logging.DEBUG:
        root.setLevel(settings.log_level)


def setup() -> None:
    """What the dramatiq CLI loads in each worker process (``SETUP``), after setting up its logging."""
    gh = build()
    apply_log_level(gh.settings)
    dramatiq.set_broker(gh.broker)
