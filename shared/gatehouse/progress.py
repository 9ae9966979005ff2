"""The ``progress`` object of a job row: what the job is doing or waiting for.

Stored as ``{"phase", "resumeAt", "reason"}``. The Russian ``message`` is
rendered when the status is read, so "через ~2 мин" is true at that moment.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

RUNNING = "running"
WAITING_ACCOUNT = "waiting-account"
RATE_LIMITED = "rate-limited"
RETRYING = "retrying"
COMPLETED = "completed"
FAILED = "failed"
PHASES = (RUNNING, WAITING_ACCOUNT, RATE_LIMITED, RETRYING, COMPLETED, FAILED)


def stored(phase: str, *, resume_at_ms: int | None = None, reason: str | None = None) -> dict[str, Any]:
    resume_at = None
    if resume_at_ms is not None:
        resume_at = datetime.fromtimestamp(resume_at_ms / 1000, UTC).isoformat(timespec="milliseconds")
    return {"phase": phase, "resumeAt": resume_at, "reason": reason}
