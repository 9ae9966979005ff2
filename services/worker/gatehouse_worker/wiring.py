"""The consumer side of the composition: middleware order, job actors, ticks.

``setup`` is what the dramatiq CLI and the scheduler load
(``gatehouse_worker.wiring:setup``); the API calls ``build`` to host consumers
in-process when BACKEND_ROLE=all.
"""

from __future__ import annotations

import importlib

import dramatiq
from dramatiq import Middleware
from periodiq import PeriodiqMiddleware

from gatehouse.composition import Gatehouse, bootstrap
from gatehouse.settings import Settings, load_settings
from gatehouse_worker import runtime
from gatehouse_worker.health import ConsumerLiveness
from gatehouse_worker.middleware.gate import AccountGate
from gatehouse_worker.middleware.lifecycle import JobLifecycle, JobStart
from gatehouse_worker.middleware.stores import BootReconciliation, CloseStores, IdlePoll
from gatehouse_worker.schedules import declare_schedules

# A tick older than this is dropped: the next one comes soon enough.
TICK_SKIP_DELAY_S = 30


def consumer_middleware(gh: Gatehouse) -> list[Middleware]:
    # before_* hooks run in this order, after_* in reverse.
    lifecycle = JobLifecycle(gh)
    return [
        CloseStores(gh),
        IdlePoll(gh.settings.worker_idle_poll_ms),
        PeriodiqMiddleware(skip_delay=TICK_SKIP_DELAY_S),
        lifecycle,  # claim the row … record the outcome
        AccountGate(gh, lifecycle),  # one WB-heavy job per account … release, wake the next
        JobStart(lifecycle),  # admitted: mark running
        BootReconciliation(gh),
        ConsumerLiveness(gh.settings),
    ]


def build(settings: Settings | None = None) -> Gatehouse:
    settings = settings or load_settings()
    gh = bootstrap(settings, consumer_middleware=consumer_middleware)
    for module in settings.job_modules:
        importlib.import_module(module)
    for job_type, body in runtime.JOBS.values():
        runtime.declare(gh.broker, job_type, body)
    declare_schedules(gh)
    return gh


def setup() -> None:
    dramatiq.set_broker(build().broker)
