"""The composition root's builder: the one place that makes engines, clients, stores and handlers.

Each process's root (the API's ``create_app``, the worker's and scheduler's
``gatehouse_worker.wiring``, each CLI's ``main``) calls ``bootstrap`` once with
the settings it loaded, then hands each component only the collaborators it
uses; the ``Components`` it gets back is the root's own record of what it built
(and what to close), never passed on whole. Nothing is connected at import
time. Each default is a parameter, so a test or a process role can pass its own
piece (an engine on a test database, the consumer middleware of the worker).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from dramatiq import Middleware
from dramatiq.brokers.redis import RedisBroker
from redis import Redis
from sqlalchemy import Engine

from gatehouse.accounts import Accounts
from gatehouse.auth_throttle import CALL_TIMEOUT_MS, AuthThrottle
from gatehouse.bucket import RedisTokenBucket
from gatehouse.catalog import CatalogStore
from gatehouse.catalog.bulk import BulkStore
from gatehouse.catalog.handlers import CatalogHandlers
from gatehouse.crypto import TokenCipher
from gatehouse.db import Statements, make_engine, session_options
from gatehouse.db import pool as statements_pool
from gatehouse.dispatch import Dispatcher
from gatehouse.events import EventBus
from gatehouse.fanout import FanOutHandlers, SkipStreaks
from gatehouse.freshness import FreshnessStore, slos
from gatehouse.gate import RedisGate
from gatehouse.handlers import AccountHandlers, HoldHandlers, JobHandlers, ModuleHandlers
from gatehouse.hot import HotAccounts
from gatehouse.job_types import WEBHOOK_DELIVER, Policies, webhook_retry
from gatehouse.jobs import JobStore
from gatehouse.modules import ModuleStates
from gatehouse.notifications import NotificationStore
from gatehouse.notifications.handlers import NotificationHandlers
from gatehouse.pauses import Holds
from gatehouse.retention import RetentionHandlers, RetentionPolicy
from gatehouse.rotation import KeyRotation
from gatehouse.schedules import ScheduleRuns, schedules
from gatehouse.search import SearchStore
from gatehouse.settings import Settings
from gatehouse.sweeps import SweepStore
from gatehouse.sweeps.handlers import SweepHandlers
from gatehouse.uow import UnitOfWork
from gatehouse.users import Users
from gatehouse.wb.limits import Limit, client_limits
from gatehouse.wb.pauses import AccountPauses
from gatehouse.webhooks import sender
from gatehouse.webhooks.handlers import WebhookHandlers
from gatehouse.webhooks.safety import Allowlist, Guard
from gatehouse.webhooks.slots import EndpointSlots
from gatehouse.webhooks.store import WebhookStore
from gatehouse.workers import Liveness

T = TypeVar("T")


class Lazy(Generic[T]):
    """One ``T`` per process, made on first use (after a fork: gunicorn and dramatiq fork their workers)."""

    def __init__(self, make: Callable[[], T]) -> None:
        self._make, self._value, self._lock = make, None, threading.Lock()

    def __call__(self) -> T:
        with self._lock:
            if self._value is None:
                self._value = self._make()
            return self._value


@dataclass
class Components:
    """What ``bootstrap`` built for one process: held by its root (and by tests), never handed on whole."""

    settings: Settings
    engine: Engine
    statements: Statements
    redis: Redis
    broker: RedisBroker
    dispatcher: Dispatcher
    uow: UnitOfWork
    policies: Policies
    jobs: JobStore
    accounts: Accounts
    users: Users
    gate: RedisGate
    buckets: RedisTokenBucket
    pauses: AccountPauses
    wb_limits: dict[str, Limit]
    catalog: CatalogStore
    bulk: BulkStore
    freshness: FreshnessStore
    search: SearchStore
    notifications: NotificationStore
    modules: ModuleStates
    holds: Holds
    webhooks: WebhookStore
    webhook_slots: EndpointSlots
    sweeps: SweepStore
    liveness: Liveness
    schedule_runs: ScheduleRuns
    job_handlers: JobHandlers
    account_handlers: AccountHandlers
    module_handlers: ModuleHandlers
    hold_handlers: HoldHandlers
    notification_handlers: NotificationHandlers
    catalog_handlers: CatalogHandlers
    webhook_handlers: WebhookHandlers
    sweep_handlers: SweepHandlers
    retention_handlers: RetentionHandlers
    key_rotation: KeyRotation
    skip_streaks: SkipStreaks
    fan_out_handlers: FanOutHandlers
    hot: HotAccounts
    auth_throttle: AuthThrottle

    def close(self) -> None:
        self.broker.close()
        self.redis.close()
        self.auth_throttle.redis.close()
        self.statements.close()
        self.engine.dispose()


MiddlewareFactory = Callable[[Components], Sequence[Middleware]]


def bootstrap(
    settings: Settings,
    *,
    engine: Engine | None = None,
    redis: Redis | None = None,
    consumer_middleware: MiddlewareFactory | None = None,
) -> Components:
    engine = engine or make_engine(settings)
    # Every Redis key of this deployment starts with its namespace, as Dramatiq's do (below).
    prefix = settings.broker_namespace
    # Short timeouts (REDIS_TIMEOUT_MS): a Redis that stopped answering fails a call fast.
    timeout = settings.redis_timeout_ms / 1000
    redis = redis or Redis.from_url(
        settings.require("redis_url"), socket_timeout=timeout, socket_connect_timeout=timeout
    )
    throttle_timeout = min(settings.redis_timeout_ms, CALL_TIMEOUT_MS) / 1000
    broker = RedisBroker(
        client=redis,
        namespace=settings.broker_namespace,
        heartbeat_timeout=settings.broker_heartbeat_timeout_ms,
        maintenance_chance=settings.broker_maintenance_chance,
        # Producers need no middleware; consumers add theirs below. Dramatiq's
        # defaults (Retries, TimeLimit, …) are replaced by the job runtime (gatehouse_worker.pipeline).
        middleware=[],
    )
    users = Users(engine)
    # One-statement hot paths (job rows, the key check) on a plain psycopg pool (gatehouse.db).
    statements = Statements(
        lambda: statements_pool(
            settings.libpq_url, size=2 * settings.db_pool_size, timeout_s=5, options=session_options(settings)
        )
    )
    cipher = TokenCipher(settings) if settings.token_encryption_key else None
    accounts = Accounts(
        engine,
        statements,
        cipher,
        settings.admin_token.get_secret_value() if settings.admin_token else None,
        users,
    )
    modules = ModuleStates(engine)
    holds = Holds(engine, modules)
    # Domain events: raised in the changes' units of work; not while their module is off.
    bus = EventBus(emits=modules.emits)
    dispatcher = Dispatcher(broker)
    uow = UnitOfWork(engine, statements, bus, dispatcher.send_all)
    policies = Policies({WEBHOOK_DELIVER.name: webhook_retry(settings.webhook_retry_schedule_ms)})
    jobs = JobStore(statements, policies)
    gate = RedisGate(redis, prefix=prefix, released_ttl_ms=settings.gate_lease_ms)
    notifications = NotificationStore(engine, jobs)
    catalog = CatalogStore(engine)
    bulk = BulkStore(engine, jobs=jobs, notifications=notifications)
    # Webhook secrets are encrypted like WB tokens (TOKEN_ENCRYPTION_KEY; unset: refused when needed).
    # One SSRF guard checks a URL when it is saved and before each run, and each connection's addresses.
    guard = Guard(Allowlist.parse(settings.webhook_allowed_hosts))
    webhooks = WebhookStore(
        engine,
        jobs,
        cipher=lambda: cipher or TokenCipher(settings),
        guard=guard,
        batch_size=settings.webhook_batch_size,
        first_delay_ms=round(settings.webhook_retry_schedule_ms[0] * settings.retry_delay_scale),
        rotation_grace_ms=settings.webhook_rotation_grace_ms,
        disable_after_ms=settings.webhook_disable_after_ms,
    )
    # The webhooks' outbox: every event becomes deliveries in the transaction that raised it.
    bus.subscribe(webhooks.outbox)
    webhook_slots = EndpointSlots(redis, prefix=prefix)
    # Carts, price lists, RFQs and their sweeps (run by jobs on the workers).
    sweeps = SweepStore(engine)
    schedule_runs = ScheduleRuns(redis, prefix=prefix)
    skip_streaks = SkipStreaks(redis, prefix=prefix)
    components = Components(
        settings=settings,
        engine=engine,
        statements=statements,
        redis=redis,
        broker=broker,
        dispatcher=dispatcher,
        uow=uow,
        policies=policies,
        jobs=jobs,
        accounts=accounts,
        users=users,
        gate=gate,
        buckets=RedisTokenBucket(redis, prefix=prefix),
        pauses=AccountPauses(redis, prefix=prefix),
        wb_limits=client_limits(settings.wb_limits, settings.wb_limit_headroom),
        catalog=catalog,
        bulk=bulk,
        freshness=FreshnessStore(
            engine, statements, slos(schedules(settings.schedules), settings.freshness_slo)
        ),
        search=SearchStore(engine),
        notifications=notifications,
        modules=modules,
        holds=holds,
        webhooks=webhooks,
        webhook_slots=webhook_slots,
        sweeps=sweeps,
        liveness=Liveness(redis, prefix=prefix, ttl_ms=settings.worker_dead_after_ms),
        schedule_runs=schedule_runs,
        job_handlers=JobHandlers(uow, jobs, gate, dispatcher, reconcile_grace_ms=settings.reconcile_grace_ms),
        account_handlers=AccountHandlers(uow, accounts, users, jobs),
        module_handlers=ModuleHandlers(uow, modules),
        hold_handlers=HoldHandlers(uow, holds, accounts),
        notification_handlers=NotificationHandlers(uow, notifications),
        catalog_handlers=CatalogHandlers(
            uow,
            catalog,
            bulk,
            sync_threshold=settings.bulk_sync_threshold,
            batch_size=settings.bulk_batch_size,
        ),
        webhook_handlers=WebhookHandlers(
            uow,
            webhooks,
            webhook_slots,
            notifications,
            transport=Lazy(lambda: sender.transport(guard)),
            max_per_endpoint=settings.webhook_max_per_endpoint,
            timeout_ms=settings.webhook_timeout_ms,
            attempts=policies.of(WEBHOOK_DELIVER).attempts,
        ),
        sweep_handlers=SweepHandlers(
            uow,
            sweeps,
            catalog,
            modules,
            batch_size=settings.sweep_batch_size,
            abandon_after_ms=settings.cart_abandon_after_ms,
        ),
        retention_handlers=RetentionHandlers(
            uow,
            jobs,
            webhooks,
            notifications,
            RetentionPolicy.from_settings(settings),
            batch_size=settings.prune_batch_size,
        ),
        key_rotation=KeyRotation(uow, accounts, webhooks),
        skip_streaks=skip_streaks,
        fan_out_handlers=FanOutHandlers(
            uow,
            jobs,
            accounts,
            modules,
            schedule_runs,
            skip_streaks,
            schedules=schedules(settings.schedules),
            chunk_size=settings.fan_out_chunk_size,
            starvation_limit=settings.skip_starvation_limit,
        ),
        hot=HotAccounts(redis, prefix=prefix),
        # Its own client: every authenticated request asks it, so a frozen Redis must cost each little.
        auth_throttle=AuthThrottle(
            Redis.from_url(
                settings.require("redis_url"),
                socket_timeout=throttle_timeout,
                socket_connect_timeout=throttle_timeout,
            ),
            prefix=prefix,
            max_failures=settings.auth_max_failures,
            lockout_ms=settings.auth_lockout_ms,
        ),
    )
    for middleware in consumer_middleware(components) if consumer_middleware else ():
        broker.add_middleware(middleware)
    return components
