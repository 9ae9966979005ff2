"""The worker's composition root: the consumer middleware, the job actors and their collaborators, the ticks.

``setup`` is what the dramatiq CLI loads in each worker process
(``gatehouse_worker.wiring:setup``); the scheduler and the API (hosting
consumers in-process when BACKEND_ROLE=all) call ``build``. Here, and only
here, the worker's components get their collaborators from what
``gatehouse.composition.bootstrap`` built. Each middleware is one concern and
none calls another; how a job message runs is the job pipeline
(gatehouse_worker.pipeline).
"""

from __future__ import annotations

import importlib
import logging
from typing import Any

import dramatiq
from dramatiq import Middleware
from dramatiq.middleware import CurrentMessage
from periodiq import PeriodiqMiddleware

from gatehouse import job_types as jt
from gatehouse import run_decision as rd
from gatehouse import traces
from gatehouse.composition import Components, bootstrap
from gatehouse.schedules import FANOUT_QUEUE, schedules
from gatehouse.settings import Settings
from gatehouse.sweeps import SWEEPS
from gatehouse.wb.client import WbHttp
from gatehouse.wb.tables import WbData
from gatehouse.workers import process_name
from gatehouse_worker import runtime
from gatehouse_worker.batches import RowBatches
from gatehouse_worker.health import ConsumerLiveness
from gatehouse_worker.holds import QueuePauses
from gatehouse_worker.jobs.notifications import SmtpConfig
from gatehouse_worker.leases import Beats, LeaseKeeper
from gatehouse_worker.middleware import BootReconciliation, CloseStores, FlushTraces, IdlePoll
from gatehouse_worker.pipeline import GateTimings, JobRuntime, declare
from gatehouse_worker.runtime import WbAccess
from gatehouse_worker.schedules import declare_schedules

# A tick older than this is dropped: the next one comes soon enough.
TICK_SKIP_DELAY_S = 30
# Queues of periodic and background work (ticks, reconciliation, sweeps, e-mail): nobody waits on
# them within the second, so their idle consumers poll every WORKER_QUIET_POLL_MS.
QUIET_QUEUES = frozenset(
    {
        FANOUT_QUEUE,
        jt.MAINTENANCE_QUEUE,
        jt.NOTIFICATION_EMAIL.queue,
        *(sweep.job_type.queue for sweep in SWEEPS.values()),
    }
)


def lease_keeper(c: Components, worker: str) -> LeaseKeeper:
    s = c.settings
    return LeaseKeeper(
        c.jobs,
        c.gate,
        c.liveness,
        c.job_handlers.requeue_orphans,
        Beats(
            worker_heartbeat_ms=s.worker_heartbeat_ms,
            job_heartbeat_ms=s.job_heartbeat_ms,
            job_lease_ms=s.job_lease_ms,
            gate_heartbeat_ms=s.gate_heartbeat_ms,
            gate_lease_ms=s.gate_lease_ms,
        ),
        worker,
    )


def job_runtime(c: Components) -> JobRuntime:
    s = c.settings
    worker = process_name()
    leases = lease_keeper(c, worker)
    return JobRuntime(
        uow=c.uow,
        jobs=c.jobs,
        accounts=c.accounts,
        gate=c.gate,
        pauses=c.pauses,
        holds=c.holds,
        policies=c.policies,
        leases=leases,
        wb_access=WbAccess(
            s.wb_host,
            WbHttp(timeout_ms=s.wb_timeout_ms),
            c.accounts,
            c.buckets,
            c.wb_limits,
            max_sleep_ms=s.wb_bucket_max_sleep_ms,
            call_deadline_ms=s.wb_call_deadline_ms,
        ),
        timings=rd.Timings.from_settings(s),
        gate_timings=GateTimings(
            enabled=s.gate_enabled,
            lease_ms=s.gate_lease_ms,
            wanted_ttl_ms=s.gate_wanted_ttl_ms,
            poll_delay_ms=s.gate_poll_delay_ms,
            job_lease_ms=s.job_lease_ms,
        ),
        limits=jt.RunTimeLimits(
            s.run_time_limit_scale,
            {jt.WEBHOOK_DELIVER.name: jt.webhook_run_time_limit(s.webhook_timeout_ms, s.webhook_batch_size)},
        ),
        streaks=c.skip_streaks,
        rows=RowBatches(c.jobs, worker=worker, lease_ms=s.job_lease_ms),
        freshness=c.freshness,
    )


def consumer_middleware(c: Components) -> list[Middleware]:
    s = c.settings
    return [
        FlushTraces(),  # first, so its after_worker_shutdown runs last, after the last job's spans
        CloseStores(c.close),  # its after_worker_shutdown runs after every other's but FlushTraces's
        CurrentMessage(),  # a run's span continues its message's trace (gatehouse.traces)
        IdlePoll(s.worker_idle_poll_ms, quiet_ms=s.worker_quiet_poll_ms, quiet_queues=QUIET_QUEUES),
        PeriodiqMiddleware(skip_delay=TICK_SKIP_DELAY_S),
        job_runtime(c),
        QueuePauses(c.holds),
        BootReconciliation(c.job_handlers.reconcile),
        ConsumerLiveness(s),
    ]


def body_collaborators(c: Components) -> dict[str, Any]:
    """What a job body may name after ``ctx`` (gatehouse_worker.runtime.bind), by name."""
    s = c.settings
    return {
        "catalog": c.catalog_handlers,
        "webhooks": c.webhook_handlers,
        "sweeps": c.sweep_handlers,
        "retention": c.retention_handlers,
        "notifications": c.notifications,
        "smtp": SmtpConfig(s.smtp_url, s.mail_from, s.smtp_timeout_ms),
        "public_url": s.public_url,  # notification e-mails link to PUBLIC_URL + a console path
        "data": WbData(c.statements),
        "report_page_rows": s.wb_report_page_rows,
        "redis": c.redis,
        "fan_outs": c.fan_out_handlers,
        "job_handlers": c.job_handlers,
        "accounts": c.account_handlers,
        "token_expiry_warning_ms": s.wb_token_expiry_warning_ms,
    }


def build(settings: Settings) -> Components:
    # httpx logs each request at INFO: webhook attempts have their rows, WB calls their
    # metrics, and a log line per request costs a busy webhook worker ~5 % of its CPU.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    c = bootstrap(settings, consumer_middleware=consumer_middleware)
    for module in settings.job_modules:
        importlib.import_module(module)
    pipeline = next(m for m in c.broker.middleware if isinstance(m, JobRuntime))
    collaborators = body_collaborators(c)
    for job_type, body in runtime.JOBS.values():
        declare(c.broker, pipeline, job_type, runtime.bind(body, collaborators))
    declare_schedules(
        c.broker,
        schedules(settings.schedules),
        reconcile=c.job_handlers.reconcile,
        reconcile_cron=settings.reconcile_interval_cron,
        tick=c.fan_out_handlers.tick,
    )
    return c


def apply_log_level(settings: Settings) -> None:
    """LOG_LEVEL for a consumer process, whose logging the dramatiq CLI set up at INFO before this.

    The dramatiq CLI sets DEBUG instead when asked with ``--verbose``: that wins.
    """
    root = logging.getLogger()
    if root.level != logging.DEBUG:
        root.setLevel(settings.log_level)


def setup() -> None:
    """What the dramatiq CLI loads in each worker process (``SETUP``), after setting up its logging."""
    from gatehouse.settings import load_settings

    settings = load_settings()
    traces.setup("gatehouse-worker")  # in each worker process: the CLI forks them before this
    c = build(settings)
    apply_log_level(settings)
    dramatiq.set_broker(c.broker)
