"""Retention: nothing Gatehouse writes grows without bound (docs/operations/retention.md).

What outlived its retention is deleted by ``RetentionHandlers.prune``, which the hourly
``maintenance:prune`` job and ``gatehouse-prune`` call:

- finished jobs, by their type's retention (``JobType.retention``, else JOB_RETENTION_COMPLETED /
  JOB_RETENTION_FAILED), never a live one nor the latest finished one of its (account, type);
- delivered and dead webhook deliveries (WEBHOOK_RETENTION_DELIVERED / _DEAD) with their attempts;
- notifications (NOTIFICATION_RETENTION) and audit rows (AUDIT_RETENTION);

and a webhook endpoint's previous secret is forgotten once its grace period
(WEBHOOK_ROTATION_GRACE_MS) has ended: it signs nothing any more, and is one secret fewer at rest.

Imported WB data is the customer's and is never pruned. Each table's rows are deleted by its one
writer (the job store, the webhook and notification stores, gatehouse.audit), in batches of
PRUNE_BATCH_SIZE, each batch one short transaction that locks its rows SKIP LOCKED: no long lock, no
table rewrite, two runs at once delete each row once, and a run that died leaves committed batches
behind for the next run to continue from. A retention of 0 keeps that kind for ever.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from gatehouse import audit, metrics
from gatehouse.job_types import REGISTRY, SETTINGS_RETENTION
from gatehouse.jobs import JobStore
from gatehouse.models import TERMINAL_STATES
from gatehouse.notifications import NotificationStore
from gatehouse.settings import Settings
from gatehouse.uow import UnitOfWork
from gatehouse.webhooks.store import WebhookStore

log = logging.getLogger(__name__)

TABLES = ("jobs", "webhook_deliveries", "webhook_attempts", "notifications", "audit_log")


@dataclass(frozen=True)
class RetentionPolicy:
    """The retention settings, in ms (0: kept for ever), and RETENTION_SCALE, which multiplies every
    retention, a job type's own too (a soak keeps a sync's completed run minutes, not an hour)."""

    job_completed_ms: int
    job_failed_ms: int
    webhook_delivered_ms: int
    webhook_dead_ms: int
    notification_ms: int
    audit_ms: int
    scale: float = 1.0

    @classmethod
    def from_settings(cls, s: Settings) -> RetentionPolicy:
        return cls(
            job_completed_ms=s.job_retention_completed,
            job_failed_ms=s.job_retention_failed,
            webhook_delivered_ms=s.webhook_retention_delivered,
            webhook_dead_ms=s.webhook_retention_dead,
            notification_ms=s.notification_retention,
            audit_ms=s.audit_retention,
            scale=s.retention_scale,
        )

    def _scaled(self, ms: int) -> int:
        return max(1, round(ms * self.scale)) if ms else 0  # 0 stays "for ever"

    def job_age_ms(self, job_type: str, state: str) -> int:
        """How long a job of ``job_type`` that ended ``state`` is kept (a type no longer declared: the settings')."""
        default = self.job_completed_ms if state == "completed" else self.job_failed_ms
        declared = REGISTRY.get(job_type)
        return self._scaled((declared.retention if declared else SETTINGS_RETENTION).age_ms(state, default))

    def deliveries(self) -> dict[str, int]:
        return {
            "delivered": self._scaled(self.webhook_delivered_ms),
            "dead": self._scaled(self.webhook_dead_ms),
        }

    @property
    def notification_age_ms(self) -> int:
        return self._scaled(self.notification_ms)

    @property
    def audit_age_ms(self) -> int:
        return self._scaled(self.audit_ms)


@dataclass
class PruneRun:
    """Rows deleted per table (or, in a dry run, that would be) and the batches it took."""

    deleted: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TABLES, 0))
    batches: int = 0

    def result(self) -> dict[str, object]:
        return {"deleted": dict(self.deleted), "batches": self.batches}

    def summary(self) -> str:
        return ", ".join(f"{table} {n}" for table, n in self.deleted.items())


class RetentionHandlers:
    def __init__(
        self,
        uow: UnitOfWork,
        jobs: JobStore,
        webhooks: WebhookStore,
        notifications: NotificationStore,
        policy: RetentionPolicy,
        *,
        batch_size: int,
    ) -> None:
        self.uow, self.jobs, self.webhooks, self.notifications = uow, jobs, webhooks, notifications
        self.policy, self.batch_size = policy, batch_size

    def prune(self, *, between_batches: Callable[[], None] = lambda: None) -> PruneRun:
        """Delete every row past its retention, a transaction per batch; ``between_batches`` runs after
        each committed one (a job checks it still holds its row)."""
        run = PruneRun()

        def counted(**deleted: int) -> bool:
            """Count a committed batch; False when it found nothing (the table is done)."""
            if not any(deleted.values()):
                return False
            for table, n in deleted.items():
                run.deleted[table] += n
                metrics.PRUNED.labels(table).inc(n)
            run.batches += 1
            between_batches()
            return True

        for job_type, state, age_ms in self._job_retentions():
            after = None
            while True:
                with self.uow.autocommit() as tx:
                    pruned = self.jobs.prune(
                        tx, job_type, state, age_ms=age_ms, limit=self.batch_size, after=after
                    )
                if pruned.after is None:
                    break
                counted(jobs=pruned.deleted)
                after = pruned.after
        for status, age_ms in self.policy.deliveries().items():
            while age_ms:
                with self.uow.begin() as tx:
                    deliveries, attempts = self.webhooks.prune_deliveries(
                        tx, status, age_ms=age_ms, limit=self.batch_size
                    )
                if not counted(webhook_deliveries=deliveries, webhook_attempts=attempts):
                    break
        while self.policy.notification_age_ms:
            with self.uow.begin() as tx:
                n = self.notifications.prune(
                    tx, age_ms=self.policy.notification_age_ms, limit=self.batch_size
                )
            if not counted(notifications=n):
                break
        while self.policy.audit_age_ms:
            with self.uow.begin() as tx:
                n = audit.prune(tx.conn, age_ms=self.policy.audit_age_ms, limit=self.batch_size)
            if not counted(audit_log=n):
                break
        with self.uow.begin() as tx:
            cleared = self.webhooks.clear_expired_previous_secrets(tx)
        log.info(
            "pruned in %d batch(es): %s; %d previous webhook secret(s) cleared",
            run.batches, run.summary(), cleared,
        )  # fmt: skip
        return run

    def prunable(self) -> PruneRun:
        """What ``prune`` would delete now, per table; deletes nothing (``batches`` stays 0)."""
        run = PruneRun()
        for job_type, state, age_ms in self._job_retentions():
            run.deleted["jobs"] += self.jobs.prunable(job_type, state, age_ms=age_ms)
        for status, age_ms in self.policy.deliveries().items():
            if age_ms:
                deliveries, attempts = self.webhooks.prunable_deliveries(status, age_ms=age_ms)
                run.deleted["webhook_deliveries"] += deliveries
                run.deleted["webhook_attempts"] += attempts
        if self.policy.notification_age_ms:
            run.deleted["notifications"] = self.notifications.prunable(age_ms=self.policy.notification_age_ms)
        if self.policy.audit_age_ms:
            with self.uow.begin() as tx:
                run.deleted["audit_log"] = audit.prunable(tx.conn, age_ms=self.policy.audit_age_ms)
        return run

    def _job_retentions(self) -> list[tuple[str, str, int]]:
        """(type, state, retention) of each kind of finished job there is that is not kept for ever."""
        return [
            (job_type, state, age_ms)
            for job_type in self.jobs.finished_types()
            for state in TERMINAL_STATES
            if (age_ms := self.policy.job_age_ms(job_type, state))
        ]
