"""The periodic schedules: which tick fans out which scheduled job type, when (cron, UTC).

A tick's fan-out enqueues one job per active account through the ordinary
idempotent creation path (a live job of the type means alreadyRunning, no
pile-up) and never calls WB. A single-job schedule (``per_account=False``: the
sweeps) enqueues one system job instead, through the same path (one live per
type). SCHEDULES (JSON) overrides cron, max wait and
enabled per schedule. The scheduler writes each schedule's last and next run
to Redis (``ScheduleRuns``, under the deployment's prefix), so the API can show
them without knowing cron. A schedule whose jobs belong to a module (a sweep:
its queue is the module's) creates nothing while that module is off, timed or
run now.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from redis import Redis

from gatehouse import job_types as jt
from gatehouse.gate.vocabulary import MAX_WAIT_FIELD
from gatehouse.modules import Module, module_of_queue


@dataclass(frozen=True)
class Schedule:
    name: str
    job_type: jt.JobType
    cron: str
    # Gated types: how long a tick's job may wait for its account's gate; None = the job type's.
    max_wait_ms: int | None = None
    enabled: bool = True
    # False: each tick is one system job (no account; one live at a time), not one per active account.
    per_account: bool = True

    def __post_init__(self) -> None:
        if not self.per_account and self.job_type.gate is not None:
            raise ValueError(f"{self.name}: a single-job schedule has no account, so no gate to pass")

    @property
    def actor(self) -> str:
        return f"schedule:{self.name}"

    @property
    def module(self) -> Module | None:
        """The module its jobs belong to (it owns their queue); None: the core's, never off."""
        return module_of_queue(self.job_type.queue)

    @property
    def max_wait(self) -> int | None:
        """The max wait its jobs get: the override, else the job type's (None: not gated)."""
        gate = self.job_type.gate
        if gate is None:
            return None
        return self.max_wait_ms if self.max_wait_ms is not None else gate.max_wait_ms

    def payload(self) -> dict[str, Any]:
        """What each job of a tick carries: the override only, so the job type stays the one source."""
        return {MAX_WAIT_FIELD: self.max_wait_ms} if self.max_wait_ms is not None else {}


FANOUT_QUEUE = "schedules"
DEFAULTS = (
    Schedule("digitization-incremental", jt.SYNC_INCREMENTAL, "*/30 * * * *"),
    Schedule("digitization-backfill", jt.SYNC_BACKFILL, "0 2 * * *"),
    Schedule("rnp-ads", jt.RNP_ADS, "*/5 * * * *"),
    Schedule("rnp-finance", jt.RNP_FINANCE, "0 3 * * *"),
    Schedule("inventory", jt.INVENTORY_SYNC, "15 * * * *"),
    Schedule("catalog", jt.CATALOG_SYNC, "45 * * * *"),
    # Single jobs: the sweeps of carts, price lists and RFQs (gatehouse.sweeps).
    Schedule("cart-abandonment", jt.CART_ABANDONMENT_SWEEP, "0 * * * *", per_account=False),
    Schedule("price-list-status", jt.PRICE_LIST_STATUS_SWEEP, "*/5 * * * *", per_account=False),
    Schedule("rfq-expiry", jt.RFQ_EXPIRY_SWEEP, "*/5 * * * *", per_account=False),
    # Retention (gatehouse.retention): one maintenance:prune job an hour, off the hour's ticks.
    Schedule("prune", jt.MAINTENANCE_PRUNE, "40 * * * *", per_account=False),
)


def schedules(overrides: dict[str, dict[str, Any]]) -> dict[str, Schedule]:
    by_name = {s.name: s for s in DEFAULTS}
    for name, entry in overrides.items():
        if name not in by_name:
            raise ValueError(f"SCHEDULES: unknown schedule {name!r} (known: {', '.join(by_name)})")
        unknown = set(entry) - {"cron", "max_wait_ms", "enabled"}
        if unknown:
            raise ValueError(f"SCHEDULES: {name}: unknown field(s) {', '.join(sorted(unknown))}")
        by_name[name] = replace(by_name[name], **entry)
    return by_name


def schedule_key(prefix: str, name: str, what: str) -> str:
    """Where the scheduler records a schedule's ``last`` or ``next`` run."""
    return f"{prefix}:schedule:{name}:{what}"


class ScheduleRuns:
    """Each schedule's last and next run in Redis, every key starting with ``prefix``."""

    def __init__(self, redis: Redis, *, prefix: str) -> None:
        self.redis = redis
        self.prefix = prefix

    def record_run(self, name: str, at: datetime) -> None:
        self.redis.set(schedule_key(self.prefix, name, "last"), at.isoformat())

    def record_next(self, name: str, at: datetime) -> None:
        self.redis.set(schedule_key(self.prefix, name, "next"), at.isoformat())

    def runs(self, name: str) -> tuple[str | None, str | None]:
        last, next_ = self.redis.mget(
            schedule_key(self.prefix, name, "last"), schedule_key(self.prefix, name, "next")
        )
        return (last.decode() if last else None, next_.decode() if next_ else None)
