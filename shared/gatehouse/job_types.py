"""The job types: every kind of queued work is a declaration here plus a body in the worker.

A job type names its Dramatiq actor and queue, its tier, its retry policy and,
when it is WB-heavy, its gate spec (the one-line opt-in to the per-account
gate). A producer needs nothing else to enqueue one, and the worker's runtime
needs nothing else to run it: a new kind of work is a declaration and a body,
never a new code path.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from gatehouse import progress as P
from gatehouse.durations import parse_ms
from gatehouse.events import Event
from gatehouse.gate.vocabulary import USER_GATE, GateSpec, Tier


@dataclass(frozen=True)
class RetryPolicy:
    """How many attempts a job gets and how long it waits before each retry.

    Either exponential from ``base_ms`` (BullMQ's ladder: base · 2^(n-1) after
    attempt n, no jitter) or an explicit list ``delays_ms`` (the delay after
    attempt n is ``delays_ms[n-1]``). The runtime scales every delay by
    RETRY_DELAY_SCALE, so tests run the production schedules in milliseconds.
    """

    attempts: int = 1
    base_ms: int | None = None
    delays_ms: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError("a job has at least one attempt")
        if self.attempts > 1 and (self.base_ms is None) == (not self.delays_ms):
            raise ValueError("a retrying policy has either base_ms or delays_ms")
        if self.delays_ms and len(self.delays_ms) != self.attempts - 1:
            raise ValueError(
                f"{self.attempts} attempts need {self.attempts - 1} delays, got {self.delays_ms}"
            )

    @classmethod
    def exponential(cls, attempts: int, base_ms: int) -> RetryPolicy:
        return cls(attempts=attempts, base_ms=base_ms)

    @classmethod
    def schedule(cls, *delays_ms: int) -> RetryPolicy:
        return cls(attempts=len(delays_ms) + 1, delays_ms=tuple(delays_ms))

    def delay_ms(self, failed_attempt: int) -> int:
        """The unscaled wait before the attempt that follows ``failed_attempt``."""
        if not 1 <= failed_attempt < self.attempts:
            raise ValueError(f"attempt {failed_attempt} of {self.attempts} has no retry")
        if self.delays_ms:
            return self.delays_ms[failed_attempt - 1]
        return self.base_ms * 2 ** (failed_attempt - 1)


ONCE = RetryPolicy()


@dataclass(frozen=True)
class Retention:
    """How long a type's finished jobs are kept, where it differs from JOB_RETENTION_COMPLETED /
    JOB_RETENTION_FAILED: a duration (``1h``, ``90d``; ``0`` for ever), None for the setting's.

    Whatever it says, a job's latest finished run of its (account, type) is kept (gatehouse.retention).
    """

    completed: str | None = None
    failed: str | None = None

    def __post_init__(self) -> None:
        for duration in (self.completed, self.failed):
            if duration is not None:
                parse_ms(duration, bare_ms=False)

    def age_ms(self, state: str, default_ms: int) -> int:
        """The retention of its jobs that ended ``state`` (completed or failed); 0: kept for ever."""
        duration = self.completed if state == "completed" else self.failed
        return default_ms if duration is None else parse_ms(duration, bare_ms=False)


SETTINGS_RETENTION = Retention()


@dataclass(frozen=True)
class JobType:
    name: str
    queue: str
    tier: Tier = "user"
    retry: RetryPolicy = ONCE
    gate: GateSpec | None = field(default=None)
    # The domain events its outcome raises: "<emits>.completed" / "<emits>.failed", in the
    # transaction that writes the outcome (gatehouse.events), e.g. "wb.job".
    emits: str | None = None
    # The longest one run may take, from its body's start (gate waits excluded), before it is
    # stopped as a failed attempt (error.code time-limit); scaled by RUN_TIME_LIMIT_SCALE (RunTimeLimits).
    run_time_limit_ms: int = 300_000
    # How long its finished jobs are kept (gatehouse.retention); the default: the settings'.
    retention: Retention = SETTINGS_RETENTION
    # The WB datasets of its account a completed run brings up to date (gatehouse.freshness): recorded
    # in the transaction that writes its completion. A user import of a chosen period refreshes none.
    refreshes: tuple[str, ...] = ()
    # The WB token categories its body calls (gatehouse.wb.hosts.CATEGORIES): a token WB said lacks
    # one gets no such job (409 TOKEN_SCOPE_MISSING on a POST, a fan-out skips the account).
    needs: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.gate is not None and self.gate.tier != self.tier:
            raise ValueError(f"{self.name}: its gate tier {self.gate.tier!r} is not its tier {self.tier!r}")


REGISTRY: dict[str, JobType] = {}


class Policies:
    """The retry policy of each job type as this deployment runs it: its declared ``retry``, or the
    one the settings give it (the composition root passes ``configured``, e.g. the webhooks')."""

    def __init__(self, configured: dict[str, RetryPolicy] | None = None) -> None:
        self._configured = configured or {}

    def of(self, job_type: JobType) -> RetryPolicy:
        return self._configured.get(job_type.name, job_type.retry)


class RunTimeLimits:
    """The run time limit of each job type as this deployment runs it: its declared one times
    RUN_TIME_LIMIT_SCALE, or the one the settings give it (``configured``, e.g. the webhooks')."""

    def __init__(self, scale: float = 1.0, configured: dict[str, int] | None = None) -> None:
        self.scale, self._configured = scale, configured or {}

    def of(self, job_type: JobType) -> int:
        configured = self._configured.get(job_type.name)
        return configured if configured is not None else round(job_type.run_time_limit_ms * self.scale)


def register(job_type: JobType) -> JobType:
    existing = REGISTRY.setdefault(job_type.name, job_type)
    if existing != job_type:
        raise ValueError(f"job type {job_type.name!r} is already registered differently")
    return job_type


def outcome_event(
    job_type: JobType, job: Any, state: str, *, result: Any = None, error: dict[str, Any] | None = None
) -> Event:
    """What a finished job of a type that ``emits`` raises: ``<emits>.failed`` for a failed (or
    cancelled) one, ``<emits>.completed`` otherwise (skipped too), e.g. ``wb.job.failed``."""
    return Event(
        f"{job_type.emits}.{'failed' if state == 'failed' else 'completed'}",
        {
            "jobId": str(job.id),
            "type": job.type,
            "accountId": str(job.account_id) if job.account_id else None,
            "state": state,
            "result": result,
            "error": error,
        },
    )


# The phases a user job's webhook endpoints hear of as they happen (``<emits>.progress``).
ANNOUNCED_PHASES = (P.WAITING_ACCOUNT, P.RATE_LIMITED, P.RETRYING, P.RUNNING)


def announces(job_type: JobType) -> bool:
    """Whether its jobs raise ``<emits>.progress`` (user jobs of a type that emits)."""
    return bool(job_type.emits) and job_type.tier == "user"


def progress_event(
    job_type: JobType, job: Any, progress: dict[str, Any], *, attempt: int, was: dict[str, Any] | None
) -> Event | None:
    """What a user job of a type that ``emits`` raises when its phase changes to one of
    ANNOUNCED_PHASES (``wb.job.progress``, with the status poll's Russian message), in the
    transaction that writes it; None when nothing is announced (the same phase again: a gate poll)."""
    phase = progress["phase"]
    if not announces(job_type) or phase not in ANNOUNCED_PHASES:
        return None
    if was and was.get("phase") == phase and phase != P.RETRYING:
        return None
    shown = P.render(progress, job_type=job.type, attempt=attempt, max_attempts=job.max_attempts)
    return Event(
        f"{job_type.emits}.progress",
        {
            "jobId": str(job.id),
            "type": job.type,
            "accountId": str(job.account_id) if job.account_id else None,
            **(shown or {}),
        },
    )


MINUTE = 60_000

# User jobs: started by an API call, one per account at a time, 5 attempts on the
# 60 s ladder (60, 120, 240, 480 s) — longer than WB's minute windows (ADR-0057).
USER_QUEUE = "wb-user"
WB_USER_RETRY = RetryPolicy.exponential(attempts=5, base_ms=MINUTE)


# A WB sync (user or scheduled) runs for at most half an hour; the next run resumes from its checkpoint.
WB_SYNC_LIMIT_MS = 30 * MINUTE
# A failed user import is what support is asked about: kept a quarter (its completed runs: 7 d).
USER_RETENTION = Retention(failed="90d")


def _user(name: str, needs: tuple[str, ...], refreshes: tuple[str, ...] = ()) -> JobType:
    return register(
        JobType(
            name,
            queue=USER_QUEUE,
            retry=WB_USER_RETRY,
            gate=USER_GATE,
            emits="wb.job",
            run_time_limit_ms=WB_SYNC_LIMIT_MS,
            retention=USER_RETENTION,
            refreshes=refreshes,
            needs=needs,
        )
    )


IMPORT_USER_FEEDS = _user("import-user-feeds", ("statistics",))
IMPORT_USER_REPORT = _user("import-user-report", ("finance",))
# Its fullstats stop at yesterday: it refreshes the campaigns, not their stats.
AUTOBIDDER_SYNC_USER = _user("autobidder-sync-user", ("promotion",), ("campaigns",))
# Stocks use another WB bucket than the gated syncs, but a user's sync waits its turn like the others.
INVENTORY_SYNC_USER = _user("inventory-sync-user", ("analytics",), ("stocks",))
IMPORT_KINDS = {"feeds": IMPORT_USER_FEEDS, "report": IMPORT_USER_REPORT}
# What WB says of a new token: /ping on each category's host and the seller's info (gatehouse.wb.tokens).
# Written with the account or its new token; outside the gate (a few calls, none in a sync's buckets),
# on the user queue so a seller who just pasted a token learns soon what it opens.
ACCOUNT_VERIFY = register(
    JobType("account-verify", queue=USER_QUEUE, retry=WB_USER_RETRY, run_time_limit_ms=5 * MINUTE)
)

# Scheduled jobs: one per active account from a fan-out tick; one attempt (the
# next tick is the retry); gated ones skip after their max wait (a schedule may
# override it for its ticks).
SCHEDULED_QUEUE = "wb-scheduled"


# They are 386 rows per account per day (48 incremental + 1 backfill + 288 ads + 1 finance + 24
# inventory + 24 catalog): kept 7 d that is 2,702 rows per account, 270 M rows at 100,000 accounts.
# A run that went fine is worth its row for an hour (the console's recent runs, a status poll);
# pruned hourly, that leaves about 2 h of runs, ~35 rows per account, plus the latest run of each
# type, which is always kept. A failed run is kept a week: a broken account fails ~386 a day.
SCHEDULED_RETENTION = Retention(completed="1h", failed="7d")


def _scheduled(
    name: str, max_wait_ms: int | None, needs: tuple[str, ...], refreshes: tuple[str, ...] = ()
) -> JobType:
    gate = GateSpec("scheduled", max_wait_ms) if max_wait_ms is not None else None
    return register(
        JobType(
            name,
            queue=SCHEDULED_QUEUE,
            tier="scheduled",
            gate=gate,
            emits="wb.job",
            run_time_limit_ms=WB_SYNC_LIMIT_MS,
            retention=SCHEDULED_RETENTION,
            refreshes=refreshes,
            needs=needs,
        )
    )


# = its interval; its schedule's max wait follows its cron (gatehouse.schedules, max_wait_is_cadence).
SYNC_INCREMENTAL = _scheduled("digitization:sync-account", 30 * MINUTE, ("statistics",), ("orders", "sales"))
# The report's past, not now.
SYNC_BACKFILL = _scheduled("digitization:sync-account-backfill", 180 * MINUTE, ("finance",))
RNP_ADS = _scheduled(  # its cadence
    "rnp:ads-sync-account", 5 * MINUTE, ("promotion",), ("campaigns", "campaign-stats")
)
RNP_FINANCE = _scheduled("rnp:finance-sync-account", 360 * MINUTE, ("finance",), ("report",))  # to yesterday
# Other WB buckets: not gated (opting in is one line: a max wait here).
INVENTORY_SYNC = _scheduled("inventory-sync", None, ("analytics",), ("stocks",))
CATALOG_SYNC = _scheduled("catalog-sync", None, ("content",), ("cards",))

# Notifications: one e-mail per notification, on its own queue so a slow or
# down SMTP server never holds up other work; 6 attempts, 30 s · 2^(n-1) apart
# (30 s, 1, 2, 4, 8 min), so an SMTP outage of a quarter hour loses no e-mail.
NOTIFICATION_EMAIL = register(
    JobType(
        "notifications.email",
        queue="notifications.email",
        retry=RetryPolicy.exponential(attempts=6, base_ms=30_000),
    )
)

# Catalog bulk operations: one job per operation (same id), resumable from its
# last committed batch, so a retry continues rather than repeats.
CATALOG_BULK_OPERATION = register(
    JobType(
        "catalog.bulk-operation",
        queue="catalog.bulk-operation",
        retry=RetryPolicy.exponential(attempts=5, base_ms=10_000),
    )
)

# Webhooks: one job per series of attempts of a delivery (a replay is a new series),
# on the schedule of WEBHOOK_RETRY_SCHEDULE_MS — its first delay is the wait before
# attempt 1 (0: at once), the others the waits between attempts (``webhook_retry``,
# given to ``Policies`` by the composition root).
WEBHOOK_QUEUE = "webhook.deliver"


def webhook_retry(schedule_ms: Sequence[int]) -> RetryPolicy:
    return RetryPolicy.schedule(*schedule_ms[1:])


# A webhook.deliver run sends its batch one after another, each within WEBHOOK_TIMEOUT_MS: its run
# time limit is that per delivery of a full batch, plus this margin for its bookkeeping.
WEBHOOK_RUN_MARGIN_MS = 30_000


def webhook_run_time_limit(timeout_ms: int, batch_size: int) -> int:
    return timeout_ms * batch_size + WEBHOOK_RUN_MARGIN_MS


WEBHOOK_DELIVER = register(JobType("webhook.deliver", queue=WEBHOOK_QUEUE))
# "Replay all dead since …" of one endpoint: one job that queues a new series for each.
WEBHOOK_REPLAY = register(
    JobType("webhook.replay", queue=WEBHOOK_QUEUE, retry=RetryPolicy.exponential(3, 10_000))
)

# Sweeps: the time-driven status changes of carts, price lists and RFQs (gatehouse.sweeps). Each is
# a system-wide scheduled job (no account), one live per type at a time (the jobs table's
# jobs_one_live_system_job): a tick or a CLI run while one is live gets that one. A sweep commits
# whole batches, so a retry or a requeued run carries on where the last batch ended; unlike the
# WB syncs they get a few attempts, since the CLI waits for the job.
SWEEP_RETRY = RetryPolicy.exponential(attempts=3, base_ms=10_000)


def _sweep(name: str, queue: str) -> JobType:
    return register(JobType(name, queue=queue, tier="scheduled", retry=SWEEP_RETRY))


# The queues are the modules' (gatehouse.modules): a module switched off pauses its sweep's consumers.
CART_ABANDONMENT_SWEEP = _sweep("carts.abandonment-sweep", "carts.sweep")
PRICE_LIST_STATUS_SWEEP = _sweep("price_lists.status-sweep", "price_lists.sweep")
RFQ_EXPIRY_SWEEP = _sweep("rfq.expiry-sweep", "rfq.sweep")

# Retention (gatehouse.retention): the hourly system job that deletes what outlived its retention,
# in batches, each its own transaction; a requeued or retried run carries on where the last stopped.
MAINTENANCE_QUEUE = "maintenance"  # also reconciliation's tick (gatehouse_worker.schedules)
MAINTENANCE_PRUNE = register(
    JobType("maintenance:prune", queue=MAINTENANCE_QUEUE, tier="scheduled", retry=SWEEP_RETRY)
)
# An operator's bulk retry of failed jobs or cancel of waiting ones matching a filter (POST
# /v1/admin/jobs/retry|cancel): one job per request, its id the operation's id, batch by batch from
# its checkpoint. Not a system job (tier user): two operators' bulk actions may run side by side.
# Hourly: announce the WB tokens that expire within WB_TOKEN_EXPIRY_WARNING_MS (once per token).
ACCOUNTS_TOKEN_EXPIRY = register(
    JobType("accounts:token-expiry", queue=MAINTENANCE_QUEUE, tier="scheduled", retry=SWEEP_RETRY)
)
MAINTENANCE_BULK_JOBS = register(JobType("maintenance:bulk-jobs", queue=MAINTENANCE_QUEUE, retry=SWEEP_RETRY))
