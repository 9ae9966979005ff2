"""The job types: what a producer needs to enqueue one without importing worker code.

A job type's name is also its Dramatiq actor name. ``gate`` is the one-line
opt-in to the per-account gate; ``retries`` says the type runs
RETRY_MAX_ATTEMPTS attempts on the exponential ladder instead of one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

USER_QUEUE = "wb-user"


@dataclass(frozen=True)
class JobType:
    name: str
    queue: str
    tier: str = "user"
    retries: bool = False
    gate: dict[str, Any] | None = field(default=None)


REGISTRY: dict[str, JobType] = {}


def register(job_type: JobType) -> JobType:
    existing = REGISTRY.setdefault(job_type.name, job_type)
    if existing != job_type:
        raise ValueError(f"job type {job_type.name!r} is already registered differently")
    return job_type


# User jobs: started by an API call, retried on the 60 s ladder, one per account at a time.
USER_GATE = {"tier": "user"}
IMPORT_USER_FEEDS = register(JobType("import-user-feeds", queue=USER_QUEUE, retries=True, gate=USER_GATE))
IMPORT_USER_REPORT = register(JobType("import-user-report", queue=USER_QUEUE, retries=True, gate=USER_GATE))
AUTOBIDDER_SYNC_USER = register(
    JobType("autobidder-sync-user", queue=USER_QUEUE, retries=True, gate=USER_GATE)
)
IMPORT_KINDS = {"feeds": IMPORT_USER_FEEDS, "report": IMPORT_USER_REPORT}

# Scheduled jobs: one per active account from a fan-out tick; one attempt (the
# next tick is the retry); gated ones skip after their max wait.
SCHEDULED_QUEUE = "wb-scheduled"


def _scheduled(name: str, max_wait_ms: int | None) -> JobType:
    gate = {"tier": "scheduled", "max_wait_ms": max_wait_ms} if max_wait_ms is not None else None
    return register(JobType(name, queue=SCHEDULED_QUEUE, tier="scheduled", gate=gate))


MINUTE = 60_000
SYNC_INCREMENTAL = _scheduled("digitization:sync-account", 30 * MINUTE)
SYNC_BACKFILL = _scheduled("digitization:sync-account-backfill", 180 * MINUTE)
RNP_ADS = _scheduled("rnp:ads-sync-account", 5 * MINUTE)
RNP_FINANCE = _scheduled("rnp:finance-sync-account", 360 * MINUTE)
# Other WB buckets: not gated (opting in is one line: a max wait here).
INVENTORY_SYNC = _scheduled("inventory-sync", None)
CATALOG_SYNC = _scheduled("catalog-sync", None)
