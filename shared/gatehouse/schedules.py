"""The periodic schedules: which tick fans out which scheduled job type, when (cron, UTC).

A per-account tick creates its fan-out job (``FAN_OUTS``, one live per
schedule), which writes one job per active account in chunks (gatehouse.fanout:
a live job of the type means none for that account, no pile-up), each due at
an offset of the schedule's spread window; it never calls WB. A single-job
schedule (``per_account=False``: the sweeps) has its tick create its one system
job through the ordinary creation path (one live per type), unspread.
SCHEDULES (JSON) overrides cron, max wait, spread and enabled per schedule. The scheduler writes each schedule's last and next run
to Redis (``ScheduleRuns``, under the deployment's prefix), so the API can show
them without knowing cron. A schedule whose jobs belong to a module (a sweep:
its queue is the module's) creates nothing while that module is off, timed or
run now.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import date, datetime, timedelta
from itertools import pairwise
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
    # Gated types: how long a tick's job may wait for its account's gate; None = the job type's, or,
    # with ``max_wait_is_cadence``, the cadence of its cron (ADR-0057: the feeds increment waits
    # "its interval", whatever SCHEDULES makes that).
    max_wait_ms: int | None = None
    max_wait_is_cadence: bool = False
    enabled: bool = True
    # False: each tick is one system job (no account; one live at a time), not one per active account.
    per_account: bool = True
    # Per-account ticks: each account's job is due this far into a window after the tick, at an
    # offset stable per account (gatehouse.fanout); None = half the cadence of its cron, 0 = at once.
    spread_ms: int | None = None

    def __post_init__(self) -> None:
        if not self.per_account and self.job_type.gate is not None:
            raise ValueError(f"{self.name}: a single-job schedule has no account, so no gate to pass")
        if not self.per_account and self.spread_ms:
            raise ValueError(f"{self.name}: a single-job schedule is one job: it has nothing to spread")
        if self.spread_ms is not None and self.spread_ms < 0:
            raise ValueError(f"{self.name}: spread_ms is a duration (0: no spread), got {self.spread_ms}")
        cadence_ms(self.cron)  # a cron it cannot read fails here, at load, not at the first tick

    @property
    def actor(self) -> str:
        return f"schedule:{self.name}"

    @property
    def module(self) -> Module | None:
        """The module its jobs belong to (it owns their queue); None: the core's, never off."""
        return module_of_queue(self.job_type.queue)

    @property
    def max_wait(self) -> int | None:
        """The max wait its jobs get: the override, else its cadence or the job type's (None: not gated)."""
        gate = self.job_type.gate
        if gate is None:
            return None
        if self.max_wait_ms is not None:
            return self.max_wait_ms
        return cadence_ms(self.cron) if self.max_wait_is_cadence else gate.max_wait_ms

    @property
    def spread(self) -> int:
        """The window its jobs are spread over (ms): the setting, else half its cadence; 0 for a single job."""
        if not self.per_account:
            return 0
        return self.spread_ms if self.spread_ms is not None else cadence_ms(self.cron) // 2

    @property
    def fan_out(self) -> jt.JobType | None:
        """The job its tick creates to fan out (per-account schedules; None: the tick creates its one job)."""
        return FAN_OUTS.get(self.name)

    def payload(self) -> dict[str, Any]:
        """What each job of a tick carries: its max wait where it is not the job type's, so the job type
        stays the one source of the default."""
        wait = self.max_wait
        return {MAX_WAIT_FIELD: wait} if wait is not None and wait != self.job_type.gate.max_wait_ms else {}


# -- cron, as far as the spread needs it ---------------------------------------------------------

_ALIASES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_FIELDS = ((0, 59), (0, 23), (1, 31), (1, 12), (0, 7))  # minute hour day month weekday (7 = Sunday too)
_DAY = 1_440  # minutes
_WEEKDAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")


def _field(text: str, low: int, high: int) -> set[int]:
    """The values of one cron field."""
    values: set[int] = set()
    for part in text.split(","):
        span, _, step = part.partition("/")
        if span == "*":
            first, last = low, high
        elif "-" in span:
            first, last = (int(v) for v in span.split("-", 1))
        else:
            first = last = int(span)
        if not low <= first <= last <= high:
            raise ValueError(f"cron field {text!r} is outside {low}-{high}")
        values.update(range(first, last + 1, int(step) if step else 1))
    return values


def cadence_ms(cron: str) -> int:
    """The shortest time between two runs of ``cron`` (minute hour day month weekday, UTC).

    Digits, ``*``, ranges, steps, lists, weekday names and the ``@daily``-style aliases, as periodiq
    reads them.
    The runs of the next 800 days are looked at, enough for any cron but a leap-day one.
    """
    parts = _ALIASES.get(cron.strip(), cron).split()
    if len(parts) != 5:
        raise ValueError(f"cron {cron!r} is not five fields (minute hour day month weekday)")
    for n, day in enumerate(_WEEKDAYS):  # as periodiq reads them
        parts[4] = parts[4].lower().replace(day, str(n))
    minutes, hours, days, months, weekdays = (
        _field(text, low, high) for text, (low, high) in zip(parts, _FIELDS, strict=True)
    )
    weekdays = {d % 7 for d in weekdays}
    # A day field that holds every day is no day rule (periodiq's reading, like cron's).
    any_day, any_weekday = days == set(range(1, 32)), weekdays == set(range(7))
    times = sorted(h * 60 + m for h in hours for m in minutes)
    start, run_days = date(2025, 1, 1), []
    for n in range(800):
        day = start + timedelta(days=n)
        by_day, by_weekday = day.day in days, day.isoweekday() % 7 in weekdays
        # Cron's rule: with both day fields restricted, either may match.
        matches = by_day or by_weekday if not (any_day or any_weekday) else by_day and by_weekday
        if day.month in months and matches:
            run_days.append(n)
    if not run_days or len(run_days) * len(times) < 2:
        raise ValueError(f"cron {cron!r} runs less than twice in 800 days")
    # Within a day, then from one day's last run to the next run day's first.
    gaps = [b - a for a, b in pairwise(times)]
    gaps += [(b - a) * _DAY + times[0] - times[-1] for a, b in pairwise(run_days)]
    return min(gaps) * 60_000


FANOUT_QUEUE = "schedules"
DEFAULTS = (
    Schedule("digitization-incremental", jt.SYNC_INCREMENTAL, "*/30 * * * *", max_wait_is_cadence=True),
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
    # WB tokens about to expire: wb.account.token_expiring, once per token (gatehouse.accounts).
    Schedule("token-expiry", jt.ACCOUNTS_TOKEN_EXPIRY, "20 * * * *", per_account=False),
)
# The job each per-account tick creates (gatehouse.fanout): a system job, so one live per schedule;
# resumable from its checkpoint, so a retry carries on where the last committed chunk ended.
FAN_OUTS = {
    s.name: jt.register(
        jt.JobType(
            f"fan-out:{s.name}",
            queue=FANOUT_QUEUE,
            tier="scheduled",
            retry=jt.RetryPolicy.exponential(attempts=3, base_ms=10_000),
        )
    )
    for s in DEFAULTS
    if s.per_account
}


def schedules(overrides: dict[str, dict[str, Any]]) -> dict[str, Schedule]:
    by_name = {s.name: s for s in DEFAULTS}
    for name, entry in overrides.items():
        if name not in by_name:
            raise ValueError(f"SCHEDULES: unknown schedule {name!r} (known: {', '.join(by_name)})")
        unknown = set(entry) - {
            "cron",
            "max_wait_ms",
            "enabled",
            "spread_ms",
        }  # max_wait_is_cadence: the schedule's own
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
        return self.runs_of([name])[name]

    def runs_of(self, names: Sequence[str]) -> dict[str, tuple[str | None, str | None]]:
        """Each schedule's (last, next) run, ISO 8601 or None: one round trip."""
        keys = [schedule_key(self.prefix, name, what) for name in names for what in ("last", "next")]
        values = [v.decode() if v else None for v in self.redis.mget(keys)] if keys else []
        return {name: (values[2 * i], values[2 * i + 1]) for i, name in enumerate(names)}
