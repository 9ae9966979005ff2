"""The periodic schedules: which tick fans out which scheduled job type, when (cron, UTC).

A tick's fan-out enqueues one job per active account through the ordinary
idempotent creation path (a live job of the type means alreadyRunning, no
pile-up) and never calls WB. SCHEDULES (JSON) overrides cron, max wait and
enabled per schedule. The scheduler writes each schedule's last and next run
to Redis, so the API can show them without knowing cron.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from redis import Redis

from gatehouse import job_types as jt


@dataclass(frozen=True)
class Schedule:
    name: str
    job_type: jt.JobType
    cron: str
    max_wait_ms: int | None  # gated types: how long a job may wait for its account's gate
    enabled: bool = True

    @property
    def actor(self) -> str:
        return f"schedule:{self.name}"


FANOUT_QUEUE = "schedules"
DEFAULTS = (
    Schedule("digitization-incremental", jt.SYNC_INCREMENTAL, "*/30 * * * *", 30 * jt.MINUTE),
    Schedule("digitization-backfill", jt.SYNC_BACKFILL, "0 2 * * *", 180 * jt.MINUTE),
    Schedule("rnp-ads", jt.RNP_ADS, "*/5 * * * *", 5 * jt.MINUTE),
    Schedule("rnp-finance", jt.RNP_FINANCE, "0 3 * * *", 360 * jt.MINUTE),
    Schedule("inventory", jt.INVENTORY_SYNC, "15 * * * *", None),
    Schedule("catalog", jt.CATALOG_SYNC, "45 * * * *", None),
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


def _key(name: str, what: str) -> str:
    return f"gatehouse:schedule:{name}:{what}"


def record_run(redis: Redis, name: str, at: datetime) -> None:
    redis.set(_key(name, "last"), at.isoformat())


def record_next(redis: Redis, name: str, at: datetime) -> None:
    redis.set(_key(name, "next"), at.isoformat())


def runs(redis: Redis, name: str) -> tuple[str | None, str | None]:
    last, next_ = redis.mget(_key(name, "last"), _key(name, "next"))
    return (last.decode() if last else None, next_.decode() if next_ else None)
