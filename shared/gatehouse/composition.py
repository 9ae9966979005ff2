"""The composition root: the one place that builds engines, clients and the broker.

Every process (API, worker, scheduler, tests) calls ``bootstrap``; nothing is
connected at import time. Each default is a parameter, so a test or a process
role can pass its own piece (an engine on a test database, the consumer
middleware of the worker).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from dramatiq import Middleware
from dramatiq.brokers.redis import RedisBroker
from redis import Redis, RedisError
from sqlalchemy import Engine

from gatehouse import job_types as jt
from gatehouse import progress as P
from gatehouse.accounts import Accounts
from gatehouse.bucket import RedisTokenBucket
from gatehouse.catalog import CatalogStore
from gatehouse.catalog.bulk import BulkStore
from gatehouse.crypto import TokenCipher
from gatehouse.db import Statements, make_engine
from gatehouse.db import pool as statements_pool
from gatehouse.dispatch import Dispatcher
from gatehouse.events import EventBus, on_cursor
from gatehouse.gate import RedisGate, owner
from gatehouse.job_types import JobType
from gatehouse.jobs import Accepted, Delivery, JobRecord, JobStore
from gatehouse.modules import ModuleStates
from gatehouse.schedules import ScheduleRuns
from gatehouse.search import SearchStore
from gatehouse.settings import Settings, load_settings
from gatehouse.sweeps import SweepStore
from gatehouse.users import Users
from gatehouse.wb.limits import Limit, client_limits
from gatehouse.wb.pauses import AccountPauses
from gatehouse.webhooks.slots import EndpointSlots
from gatehouse.webhooks.store import WebhookStore
from gatehouse.workers import Liveness

log = logging.getLogger(__name__)


@dataclass
class Gatehouse:
    settings: Settings
    engine: Engine
    statements: Statements
    redis: Redis
    broker: RedisBroker
    jobs: JobStore
    dispatcher: Dispatcher
    accounts: Accounts
    gate: RedisGate
    buckets: RedisTokenBucket
    pauses: AccountPauses
    wb_limits: dict[str, Limit]
    users: Users
    catalog: CatalogStore
    bulk: BulkStore
    search: SearchStore
    events: EventBus
    modules: ModuleStates
    webhooks: WebhookStore
    webhook_slots: EndpointSlots
    sweeps: SweepStore
    liveness: Liveness
    schedule_runs: ScheduleRuns

    def submit(
        self, job_type: JobType, *, account_id: uuid.UUID | None, payload: dict[str, Any] | None = None
    ) -> tuple[Accepted, bool]:
        """Producer path: write the row, then enqueue. Returns ``(job, created)``.

        The row comes first, so an accepted job is never lost: if Redis is down
        the row stays ``waiting`` and reconciliation enqueues it later.
        """
        job, created = self.jobs.create(
            type=job_type.name,
            queue=job_type.queue,
            tier=job_type.tier,
            account_id=account_id,
            max_attempts=job_type.policy(self.settings).attempts,
            payload=payload,
        )
        if created:
            self.enqueue(self.jobs.delivery_of(job))
        return job, created

    def retry(self, job_id: uuid.UUID, *, actor: str) -> JobRecord:
        """An operator's retry: a failed job runs again with fresh attempts (its policy's number).

        Like ``submit``: the row first (failed → waiting under a new delivery, audited), then the
        message. Raises NotFound, or Conflict JOB_NOT_FAILED / JOB_ALREADY_LIVE (gatehouse.jobs).
        """
        job = self.jobs.get(job_id)
        job_type = jt.REGISTRY.get(job.type) if job is not None else None
        moved = self.jobs.retry(
            job_id,
            actor=actor,
            max_attempts=job_type.policy(self.settings).attempts if job_type else None,
        )
        self.enqueue(self.jobs.delivery_of(moved))
        return moved

    def cancel(self, job_id: uuid.UUID, *, actor: str) -> JobRecord:
        """An operator's cancel: a waiting or delayed job ends failed (``cancelled``), audited.

        Its message, if any, is stale from then on (the claim takes only waiting|delayed rows). A
        job of a type that emits raises its failed event (``wb.job.failed``) in the same
        transaction, as a failed run does. A job parked on its account's gate leaves the line, so
        a release no longer wakes it. Raises NotFound, or Conflict JOB_ACTIVE / JOB_FINISHED
        (gatehouse.jobs).
        """
        sent: list[Delivery] = []

        def raise_event(cur: Any, job: JobRecord) -> None:
            job_type = jt.REGISTRY.get(job.type)
            if job_type is not None and job_type.emits:
                event = jt.outcome_event(job_type, job, "failed", error=job.error)
                sent[:] = self.events.publish(on_cursor(cur), event)

        cancelled = self.jobs.cancel(
            job_id,
            actor=actor,
            error={"code": P.CANCELLED, "message": f"cancelled by an operator ({actor})"},
            progress=P.stored(P.FAILED, reason=P.CANCELLED),
            also=raise_event,
        )
        for delivery in sent:
            self.enqueue(delivery)
        if cancelled.account_id is not None:
            try:
                self.gate.forget(str(cancelled.account_id), owner(cancelled.queue, cancelled.id))
            except RedisError as exc:
                # Harmless: a waiter expires with the waiting set, and a release skips a finished row.
                log.warning("job %s is cancelled but still in its account's gate line (%s)", job_id, exc)
        return cancelled

    def enqueue(self, delivery: Delivery) -> None:
        """Send the message of a job whose row is committed; if Redis fails, reconciliation will."""
        try:
            self.dispatcher.send(delivery)
        except RedisError as exc:
            log.warning(
                "job %s is saved but not enqueued (%s); reconciliation will enqueue it", delivery.job_id, exc
            )

    def close(self) -> None:
        self.broker.close()
        self.redis.close()
        self.statements.close()
        self.engine.dispose()


MiddlewareFactory = Callable[[Gatehouse], Sequence[Middleware]]


def bootstrap(
    settings: Settings | None = None,
    *,
    engine: Engine | None = None,
    redis: Redis | None = None,
    consumer_middleware: MiddlewareFactory | None = None,
) -> Gatehouse:
    settings = settings or load_settings()
    engine = engine or make_engine(settings)
    # Every Redis key of this deployment starts with its namespace, as Dramatiq's do (below).
    prefix = settings.broker_namespace
    # Short timeouts (REDIS_TIMEOUT_MS): a Redis that stopped answering fails a call fast.
    timeout = settings.redis_timeout_ms / 1000
    redis = redis or Redis.from_url(
        settings.require("redis_url"), socket_timeout=timeout, socket_connect_timeout=timeout
    )
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
        lambda: statements_pool(settings.libpq_url, size=2 * settings.db_pool_size, timeout_s=5)
    )
    cipher = TokenCipher(settings) if settings.token_encryption_key else None
    # Domain events: raised in the changes' transactions, their jobs sent after commit (gatehouse.events).
    modules = ModuleStates(engine)
    events = EventBus(send=lambda delivery: gatehouse.enqueue(delivery), emits=modules.emits)
    gatehouse = Gatehouse(
        settings=settings,
        engine=engine,
        statements=statements,
        redis=redis,
        broker=broker,
        jobs=JobStore(statements),
        dispatcher=Dispatcher(broker),
        accounts=Accounts(
            engine,
            statements,
            cipher,
            settings.admin_token.get_secret_value() if settings.admin_token else None,
            users,
        ),
        gate=RedisGate(redis, prefix=prefix, released_ttl_ms=settings.gate_lease_ms),
        buckets=RedisTokenBucket(redis, prefix=prefix),
        pauses=AccountPauses(redis, prefix=prefix),
        wb_limits=client_limits(settings.wb_limits, settings.wb_limit_headroom),
        users=users,
        catalog=CatalogStore(engine, events=events),
        bulk=BulkStore(
            engine,
            queue=jt.CATALOG_BULK_OPERATION.queue,
            job_type=jt.CATALOG_BULK_OPERATION.name,
            max_attempts=jt.CATALOG_BULK_OPERATION.retry.attempts,
            events=events,
        ),
        search=SearchStore(engine),
        events=events,
        modules=modules,
        # Webhook secrets are encrypted like WB tokens (TOKEN_ENCRYPTION_KEY; unset: refused when needed).
        webhooks=WebhookStore(engine, settings=settings, cipher=lambda: cipher or TokenCipher(settings)),
        webhook_slots=EndpointSlots(redis, prefix=prefix),
        # Carts, price lists, RFQs and their sweeps (run by jobs on the workers).
        sweeps=SweepStore(engine, events=events, modules=modules, settings=settings),
        liveness=Liveness(redis, prefix=prefix, ttl_ms=settings.worker_dead_after_ms),
        schedule_runs=ScheduleRuns(redis, prefix=prefix),
    )
    # The webhooks' outbox: every event becomes deliveries in the transaction that raised it.
    events.subscribe(gatehouse.webhooks.outbox)
    # A searchable flip queues a re-index in the attribute's transaction.
    gatehouse.catalog.start_reindex = lambda conn, requester: gatehouse.bulk.start_reindex_in(
        conn, requester=requester, reason="attribute.searchable"
    )
    for middleware in consumer_middleware(gatehouse) if consumer_middleware else ():
        broker.add_middleware(middleware)
    return gatehouse
