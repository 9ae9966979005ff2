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
FANOUT_SKIPPED = Counter(
    "gatehouse_fanout_skipped_total",
    "Accounts a scheduled fan-out wrote no job for, by reason (token-invalid: WB rejected its token).",
    ["reason"],
)
RECONCILED = Counter("gatehouse_reconciled_total", "Job messages re-sent by reconciliation.")
RECOVERED = Counter(
    "gatehouse_recovered_total",
    "Running jobs put back in line because their worker died or their lease ran out.",
)
# Named as the design's ADR (seeds) names it, so its dashboards and notes find it.
WB_RESCHEDULES = Counter(
    "optima_wb_rate_limit_reschedules_total",
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
JOB_DURATION = Histogram(
    "gatehouse_job_duration_seconds",
    "One run of a job, from its claim to its outcome applied, by type and outcome (as gatehouse_job_runs_total, "
    "plus parked: it went back to wait for its gate or a WB pause).",
    ["type", "outcome"],
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900, 1800),
)
WB_CALLS = Counter(
    "gatehouse_wb_calls_total",
    "Calls to the WB API by rate-limit bucket and HTTP status (error: no answer, a timeout or a transport error).",
    ["bucket", "status"],
)
WEBHOOK_ATTEMPTS = Counter(
    "gatehouse_webhook_attempts_total",
    "Webhook delivery attempts by outcome: delivered (2xx), failed (another status), gone (410), "
    "error (no answer: a timeout, a refused or unreachable address).",
    ["outcome"],
)
WEBHOOK_DEAD = Counter(
    "gatehouse_webhook_dead_total",
    "Webhook deliveries that went dead: their last attempt failed, or their endpoint answered 410 Gone.",
)
HTTP_DURATION = Histogram(
    "gatehouse_http_request_duration_seconds",
    "API requests by route template, method and status class (2xx, 4xx …), from the first middleware's view.",
    ["route", "method", "status"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.2, 0.5, 1, 2.5, 5, 10),
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
