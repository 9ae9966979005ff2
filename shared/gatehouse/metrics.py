"""Prometheus metrics of Gatehouse, and their exposition.

Processes with several children (gunicorn workers, dramatiq --processes) run
prometheus-client in multiprocess mode: the entry point exports a fresh
PROMETHEUS_MULTIPROC_DIR first (gatehouse.entrypoint); Settings reads it back.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
    multiprocess,
)
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

JOB_DELIVERIES = Counter(
    "gatehouse_job_deliveries_total",
    "Job messages received, by whether they claimed the row (stale = duplicate or superseded).",
    ["outcome"],
)
JOBS_FINISHED = Counter(
    "gatehouse_job_runs_total",
    "Job runs by how they ended (completed, skipped, failed, retrying).",
    ["type", "outcome"],
)
PRUNED = Counter(
    "gatehouse_pruned_rows_total",
    "Rows deleted by retention (gatehouse.retention), by table, counted as each batch commits.",
    ["table"],
)
RECONCILED = Counter("gatehouse_reconciled_total", "Job messages re-sent by reconciliation.")
RECOVERED = Counter(
    "gatehouse_recovered_total",
    "Running jobs put back in line because their worker died or their lease ran out.",
)
WB_RESCHEDULES = Counter(
    "wb_rate_limit_reschedules_total",
    "Jobs put back to wait without using an attempt: account-gate (another job holds the "
    "account), wb-429 (WB answered 429), bucket (our token bucket said wait).",
    ["scope"],
)
JOBS_TIME_LIMITED = Counter(
    "gatehouse_job_time_limits_total",
    "Job runs stopped at their job type's run time limit (a failed attempt, error.code time-limit).",
    ["type"],
)
AUTH_FAILURES = Counter(
    "gatehouse_auth_failures_total",
    "Failed authentication attempts (a wrong bearer token, a wrong console sign-in), by surface: api, console.",
    ["surface"],
)
GATE_WAIT = Histogram(
    "gatehouse_gate_wait_seconds",
    "How long a job waited for its account's gate, from its first park to getting it.",
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 15, 30, 60, 120, 300, 900, 1800, 3600),
)
GATE_HANDOFF = Histogram(
    "gatehouse_gate_handoff_seconds",
    "From a gate's release to the woken waiter holding it.",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 15),
)


def exposition(multiproc_dir: str | None, *extra: Collector) -> tuple[bytes, str]:
    """The metrics text of this process, or of all its siblings in multiprocess mode, and of ``extra``.

    ``extra`` collectors (gatehouse.live_metrics) read shared state at scrape time, so only
    the process that serves the scrape runs them, never every process that counts.
    """
    registry = REGISTRY
    if multiproc_dir:
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
    if extra:
        registry = _Joined(registry, extra)
    return generate_latest(registry), CONTENT_TYPE_LATEST


class _Joined:
    def __init__(self, registry: CollectorRegistry, extra: tuple[Collector, ...]) -> None:
        self.registry, self.extra = registry, extra

    def collect(self) -> Iterator[Metric]:
        yield from self.registry.collect()
        for collector in self.extra:
            yield from collector.collect()


def mark_process_dead(pid: int, multiproc_dir: str | None) -> None:
    if multiproc_dir:
        multiprocess.mark_process_dead(pid, multiproc_dir)
