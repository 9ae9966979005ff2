"""Gauges read from shared state when Prometheus scrapes: queues, live workers, schedules.

Counters and histograms are counted where things happen (gatehouse.metrics); these
facts live in PostgreSQL and Redis instead, so one collector reads them at scrape
time, registered only where the API serves /metrics (never in every process that
counts, so N processes do not run N reads):

- ``gatehouse_queue_depth{queue,state}`` and ``gatehouse_queue_oldest_age_seconds{queue,state}``:
  ONE grouped statement over the live rows (read through a partial index on the live states), every
  queue of the job registry present, zeros too. The oldest age is, for ``waiting``, how long
  its oldest row has been due; for ``delayed``, how far its most overdue row is past its eta
  (0 while none is); for ``active``, how long its longest run has been running.
- ``gatehouse_workers_live``: the live worker processes (gatehouse.workers).
- ``gatehouse_schedule_last_run_timestamp_seconds{schedule}`` and ``…_next_run_…``: what the
  scheduler recorded (gatehouse.schedules); a next run left in the past means no scheduler ticks.

The samples are cached in Redis for ``CACHE_MS`` (``<prefix>:metrics:live``), so concurrent
scrapes of the API's gunicorn workers and replicas share one read. A store that does not answer
leaves its gauges out of the scrape (an absent series, which the alerts tell from a zero).
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterator, Sequence
from datetime import datetime

from prometheus_client.core import GaugeMetricFamily
from redis import Redis, RedisError
from sqlalchemy import Engine, text
from sqlalchemy.exc import SQLAlchemyError

from gatehouse.models import ACTIVE, DELAYED, WAITING
from gatehouse.operations import QUEUE_DEPTHS, queue_names
from gatehouse.schedules import ScheduleRuns
from gatehouse.workers import Liveness

log = logging.getLogger(__name__)

CACHE_MS = 5_000
QUEUE_STATES = (WAITING, DELAYED, ACTIVE)

# name -> (help, label names)
GAUGES: dict[str, tuple[str, tuple[str, ...]]] = {
    "gatehouse_queue_depth": ("Live jobs by queue and state (waiting, delayed, active).", ("queue", "state")),
    "gatehouse_queue_oldest_age_seconds": (
        "Per queue and state: waiting, how long the oldest has been due; delayed, how far the most "
        "overdue is past its eta; active, how long the longest run has run.",
        ("queue", "state"),
    ),
    "gatehouse_workers_live": ("Worker processes whose liveness key is there.", ()),
    "gatehouse_schedule_last_run_timestamp_seconds": (
        "When each enabled schedule's tick last created its job (Unix time).",
        ("schedule",),
    ),
    "gatehouse_schedule_next_run_timestamp_seconds": (
        "Each enabled schedule's next run as the scheduler last published it (Unix time), every minute.",
        ("schedule",),
    ),
}

Sample = tuple[str, list[str], float]  # gauge name, label values, value


def cache_key(prefix: str) -> str:
    return f"{prefix}:metrics:live"


class LiveMetrics:
    """A prometheus-client collector (``collect``) of the gauges above."""

    def __init__(
        self,
        engine: Engine,
        redis: Redis,
        liveness: Liveness,
        runs: ScheduleRuns,
        *,
        prefix: str,
        schedules: Sequence[str],
    ) -> None:
        self.engine, self.redis, self.liveness, self.runs = engine, redis, liveness, runs
        self.key, self.schedules = cache_key(prefix), list(schedules)

    def describe(self) -> Iterator[GaugeMetricFamily]:
        return self._families([])

    def collect(self) -> Iterator[GaugeMetricFamily]:
        return self._families(self._samples())

    def _families(self, samples: list[Sample]) -> Iterator[GaugeMetricFamily]:
        families = {
            name: GaugeMetricFamily(name, doc, labels=labels) for name, (doc, labels) in GAUGES.items()
        }
        for name, labels, value in samples:
            families[name].add_metric(labels, value)
        return iter(families.values())

    def _samples(self) -> list[Sample]:
        try:
            cached = self.redis.get(self.key)
        except RedisError:
            cached = None
        if cached is not None:
            return [(name, labels, value) for name, labels, value in json.loads(cached)]
        samples = self._read_postgres() + self._read_redis()
        with contextlib.suppress(RedisError):
            self.redis.set(self.key, json.dumps(samples), px=CACHE_MS)
        return samples

    def _read_postgres(self) -> list[Sample]:
        try:
            with self.engine.connect() as conn:
                rows = {(r.queue, r.state): (r.n, r.oldest_due_s) for r in conn.execute(text(QUEUE_DEPTHS))}
        except SQLAlchemyError as exc:
            log.warning("queue gauges left out of this scrape: PostgreSQL did not answer (%s)", exc)
            return []
        samples: list[Sample] = []
        for queue in queue_names(q for q, _ in rows):
            for state in QUEUE_STATES:
                depth, oldest = rows.get((queue, state), (0, 0.0))
                samples.append(("gatehouse_queue_depth", [queue, state], depth))
                samples.append(("gatehouse_queue_oldest_age_seconds", [queue, state], oldest))
        return samples

    def _read_redis(self) -> list[Sample]:
        try:
            workers = len(self.liveness.alive())
            runs = self.runs.runs_of(self.schedules)
        except RedisError as exc:
            log.warning("worker and schedule gauges left out of this scrape: Redis did not answer (%s)", exc)
            return []
        samples: list[Sample] = [("gatehouse_workers_live", [], workers)]
        for name, (last, next_) in runs.items():
            for gauge, at in (("last", last), ("next", next_)):
                if at is not None:
                    stamp = datetime.fromisoformat(at).timestamp()
                    samples.append((f"gatehouse_schedule_{gauge}_run_timestamp_seconds", [name], stamp))
        return samples
