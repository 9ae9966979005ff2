"""Prometheus metrics of Gatehouse, and their exposition.

Processes with several children (gunicorn workers, dramatiq --processes) run
prometheus-client in multiprocess mode: the entry point exports a fresh
PROMETHEUS_MULTIPROC_DIR first (gatehouse.entrypoint); Settings reads it back.
"""

from __future__ import annotations

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    generate_latest,
    multiprocess,
)

JOB_DELIVERIES = Counter(
    "gatehouse_job_deliveries_total",
    "Job messages received, by whether they claimed the row (stale = duplicate or superseded).",
    ["outcome"],
)
JOBS_FINISHED = Counter(
    "gatehouse_job_runs_total",
    "Job runs by how they ended (completed, failed, retrying).",
    ["type", "outcome"],
)
JOBS_ENQUEUED = Counter(
    "gatehouse_jobs_created_total",
    "Jobs created by producers, and requests answered with an already running job.",
    ["type", "outcome"],
)
RECONCILED = Counter("gatehouse_reconciled_total", "Job messages re-sent by reconciliation.")


def exposition(multiproc_dir: str | None) -> tuple[bytes, str]:
    """The metrics text of this process, or of all its siblings in multiprocess mode."""
    if multiproc_dir:
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        return generate_latest(registry), CONTENT_TYPE_LATEST
    return generate_latest(REGISTRY), CONTENT_TYPE_LATEST


def mark_process_dead(pid: int, multiproc_dir: str | None) -> None:
    if multiproc_dir:
        multiprocess.mark_process_dead(pid, multiproc_dir)
