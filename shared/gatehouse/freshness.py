"""Data freshness per account: when a completed job last brought each WB dataset of an account up to date.

A job type names the datasets it refreshes (``JobType.refreshes``); the job runtime calls ``record`` in
the transaction that writes such a job's completion, so a dataset is fresh exactly when a run that
brought it up to date committed. ``FreshnessStore`` is the one writer of ``account_datasets``.

Each dataset has an SLO, a maximum age: twice the cadence of the schedule that refreshes it plus its
spread window (a tick may land its account's job up to a spread late, and one missed tick is not yet
stale), unless FRESHNESS_SLO sets it. A dataset never synced is stale.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from prometheus_client.core import GaugeMetricFamily
from sqlalchemy import Engine, text

from gatehouse.db import Statements
from gatehouse.errors import ConfigurationError, NotFound
from gatehouse.schedules import Schedule, cadence_ms

if TYPE_CHECKING:
    from gatehouse.uow import Tx

DATASETS = ("orders", "sales", "report", "campaigns", "campaign-stats", "stocks", "cards")


def slos(schedules: dict[str, Schedule], overrides: dict[str, int]) -> dict[str, int]:
    """Each dataset's max age in seconds: FRESHNESS_SLO's, else 2 × cadence + spread of the
    per-account schedule that refreshes it most often."""
    if unknown := set(overrides) - set(DATASETS):
        raise ConfigurationError(f"FRESHNESS_SLO: unknown dataset(s) {', '.join(sorted(unknown))}")
    derived: dict[str, int] = {}
    for s in schedules.values():
        for dataset in s.job_type.refreshes if s.per_account else ():
            age = (2 * cadence_ms(s.cron) + s.spread) // 1000
            derived[dataset] = min(age, derived.get(dataset, age))
    result = {d: overrides.get(d, derived.get(d)) for d in DATASETS}
    if missing := [d for d, age in result.items() if age is None]:
        raise ConfigurationError(
            f"FRESHNESS_SLO: no schedule refreshes {', '.join(missing)}: set its max age"
        )
    return result


@dataclass(frozen=True)
class DatasetFreshness:
    dataset: str
    last_synced_at: datetime | None
    last_job_id: uuid.UUID | None
    age_seconds: int | None
    max_age_seconds: int

    @property
    def stale(self) -> bool:
        return self.age_seconds is None or self.age_seconds > self.max_age_seconds


@dataclass(frozen=True)
class DatasetAges:
    """One dataset across the active accounts: its oldest age (None: no account synced it) and how
    many accounts are past its SLO (never synced included)."""

    dataset: str
    oldest_age_seconds: float | None
    stale_accounts: int


# In a completion's transaction: a psycopg statement (prepared by the server after its first uses).
RECORD = """
    INSERT INTO account_datasets (account_id, dataset, last_synced_at, last_job_id)
    SELECT %(account)s, d, now(), %(job)s FROM unnest(CAST(%(datasets)s AS text[])) AS d
    ON CONFLICT (account_id, dataset)
    DO UPDATE SET last_synced_at = excluded.last_synced_at, last_job_id = excluded.last_job_id
    """
# One prepared statement (a status poll's neighbour): no row, no account; a NULL dataset, none synced.
OF_ACCOUNT = """
    SELECT d.dataset, d.last_synced_at, d.last_job_id,
      floor(extract(epoch FROM statement_timestamp() - d.last_synced_at))::bigint AS age
    FROM accounts AS a LEFT JOIN account_datasets AS d ON d.account_id = a.id WHERE a.id = %(account)s
    """


@dataclass(frozen=True)
class _Synced:
    dataset: str | None
    last_synced_at: datetime | None
    last_job_id: uuid.UUID | None
    age: int | None


# Per dataset, on the index (dataset, last_synced_at), without reading every row: the oldest sync
# of an active account (the index in order, up to the first active one), and the stale count, the
# active accounts less the fresh ones (an index range; the switched-off accounts, few, taken back out).
AGES = text(
    """
    WITH off AS MATERIALIZED (SELECT id FROM accounts WHERE NOT active),
    active AS MATERIALIZED (SELECT count(*) - (SELECT count(*) FROM off) AS n FROM accounts)
    SELECT d.dataset,
      extract(epoch FROM statement_timestamp() - (
        SELECT x.last_synced_at FROM account_datasets AS x
        WHERE x.dataset = d.dataset AND x.account_id NOT IN (SELECT id FROM off)
        ORDER BY x.last_synced_at LIMIT 1)),
      (SELECT n FROM active) - (
        SELECT count(*) FROM account_datasets AS x
        WHERE x.dataset = d.dataset AND x.last_synced_at >= statement_timestamp() - d.slo * interval '1 second'
          AND x.account_id NOT IN (SELECT id FROM off))
    FROM unnest(CAST(:datasets AS text[]), CAST(:slos AS int[])) WITH ORDINALITY AS d(dataset, slo, k)
    ORDER BY d.k
    """
)


class FreshnessStore:
    """``account_datasets``: written by ``record`` (in the job's completion), read per account and for the gauges."""

    def __init__(self, engine: Engine, statements: Statements, slos: dict[str, int]) -> None:
        self.engine, self.statements, self.slos = engine, statements, slos

    def record(self, tx: Tx, account_id: uuid.UUID, datasets: tuple[str, ...], job_id: uuid.UUID) -> None:
        """These datasets of the account are up to date as of this transaction, by this job."""
        tx.run(RECORD, {"account": account_id, "datasets": list(datasets), "job": job_id})

    def of_account(self, account_id: uuid.UUID) -> list[DatasetFreshness]:
        """Every dataset of the account, in DATASETS' order (one never synced: no time, stale); NotFound
        for an unknown account."""
        found = self.statements.all(OF_ACCOUNT, {"account": account_id}, _Synced)
        if not found:
            raise NotFound(f"account {account_id} not found")
        rows = {r.dataset: r for r in found}
        return [
            DatasetFreshness(
                d,
                rows[d].last_synced_at if d in rows else None,
                rows[d].last_job_id if d in rows else None,
                max(rows[d].age, 0) if d in rows else None,
                self.slos[d],
            )
            for d in DATASETS
        ]

    def ages(self) -> list[DatasetAges]:
        """Each dataset across the active accounts (the gauges): one statement."""
        with self.engine.connect() as conn:
            rows = conn.execute(AGES, {"datasets": list(DATASETS), "slos": [self.slos[d] for d in DATASETS]})
            return [DatasetAges(d, None if age is None else float(age), stale) for d, age, stale in rows]


class FreshnessGauges:
    """The gauges of ``FreshnessStore.ages`` (a prometheus-client collector), read at most once per
    ``ttl_s``: Prometheus scrapes every API worker, and the statement is the same for all of them."""

    def __init__(self, store: FreshnessStore, *, ttl_s: float) -> None:
        self.store, self.ttl_s = store, ttl_s
        self._at, self._ages = -float("inf"), []

    def collect(self) -> Iterator[GaugeMetricFamily]:
        if time.monotonic() - self._at >= self.ttl_s:
            self._ages, self._at = self.store.ages(), time.monotonic()
        age = GaugeMetricFamily(
            "gatehouse_data_age_seconds",
            "The oldest last sync of the dataset across the active accounts (absent: none synced it).",
            labels=["dataset"],
        )
        stale = GaugeMetricFamily(
            "gatehouse_data_stale_accounts",
            "Active accounts whose dataset is older than its SLO, or never synced.",
            labels=["dataset"],
        )
        for a in self._ages:
            if a.oldest_age_seconds is not None:
                age.add_metric([a.dataset], a.oldest_age_seconds)
            stale.add_metric([a.dataset], a.stale_accounts)
        yield age
        yield stale
