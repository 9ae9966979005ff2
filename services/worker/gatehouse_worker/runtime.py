"""What a job body sees while it runs, and how job bodies are declared.

A job body is a plain function ``body(ctx, **collaborators) -> dict | None``
registered with ``@job(JOB_TYPE)``; the returned dict becomes the row's
``result``. Its parameters after ``ctx`` name what it uses (``webhooks``,
``catalog``, ``data`` …): the worker's composition root passes exactly those
(gatehouse_worker.wiring), so a body's dependencies are its signature. Claiming
the row, the gate, progress and retries happen around it, in the job pipeline
(gatehouse_worker.pipeline); the body only does its work and saves checkpoints.
"""

from __future__ import annotations

import inspect
import math
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from dramatiq.common import current_millis

from gatehouse.accounts import Accounts
from gatehouse.bucket import RedisTokenBucket
from gatehouse.errors import JobCancelled, JobPaused, RunTimeLimitExceeded
from gatehouse.job_types import JobType
from gatehouse.jobs import Claim, JobStore
from gatehouse.progress import RATE_LIMITED, WAITING_ACCOUNT
from gatehouse.uow import Tx
from gatehouse.wb.client import WbClient, WbHttp
from gatehouse.wb.limits import Limit


@dataclass(frozen=True)
class WbAccess:
    """What a WB-heavy job needs to call WB for its account: the token, the account's buckets, the limits."""

    host: Callable[[str], str]  # a WB service's base URL (Settings.wb_host)
    http: WbHttp  # the process's pooled client (each socket wait bounded by WB_TIMEOUT_MS)
    accounts: Accounts
    buckets: RedisTokenBucket
    limits: dict[str, Limit]
    max_sleep_ms: int  # WB_BUCKET_MAX_SLEEP_MS: a longer wait for a token pauses the job instead
    call_deadline_ms: int  # WB_CALL_DEADLINE_MS: a whole call, connect to last byte


@dataclass
class JobContext:
    claim: Claim
    jobs: JobStore
    wb_access: WbAccess
    poll_delay_ms: int  # GATE_POLL_DELAY_MS: a run that lost its lease waits this long, then runs again
    # Set by the lease keeper when the run lost its row or gate lease: it stops before its next call.
    lost: threading.Event = field(default_factory=threading.Event)
    # Set when an operator cancelled the running job (the lease keeper's renewal reads the flag):
    # it stops before its next call and ends failed, ``cancelled``.
    cancelled: threading.Event = field(default_factory=threading.Event)
    # The run's time limit (gatehouse_worker.time_limits): its deadline (time.monotonic()), the
    # thread its body runs in while it runs, and whether it was interrupted.
    deadline: float = math.inf
    body_thread: int | None = None
    interrupted: bool = False
    limit_lock: threading.Lock = field(default_factory=threading.Lock)
    # The WB token its client was built with: WB's 401 marks the account only while it is still its token.
    wb_token: str | None = None
    # When the run claimed its row (time.monotonic()): gatehouse_job_duration_seconds measures from here.
    claimed_at: float = field(default_factory=time.monotonic)

    @property
    def job(self):
        return self.claim.job

    @property
    def payload(self) -> dict[str, Any]:
        return self.claim.job.payload

    def wb(self) -> WbClient:
        """The WB client of this job's account; every call first checks the job still holds its lease."""
        access = self.wb_access
        self.wb_token = access.accounts.wb_token(self.job.account_id)
        return WbClient(
            access.http,
            access.host,
            self.wb_token,
            deadline_ms=access.call_deadline_ms,
            job_id=str(self.job.id),
            run=self.claim.claims,
            before_call=self.before_wb_call,
        )

    def before_wb_call(self, bucket: str) -> None:
        """Hold the lease, then wait for a token of the account's WB bucket.

        A short wait is slept here; a long one pauses the job (rate-limited, no
        attempt) until the bucket allows the call, so no worker thread idles.
        """
        access = self.wb_access
        limit = access.limits[bucket]
        while True:
            self.ensure_held()
            now = current_millis()
            wait = access.buckets.take(
                str(self.job.account_id),
                bucket,
                burst=limit.burst,
                limit=limit.limit,
                period_ms=int(limit.period_ms),
                now_ms=now,
            )
            if wait == 0:
                return
            if wait > access.max_sleep_ms:
                raise JobPaused(
                    f"the account's {bucket} bucket is empty for {wait} ms",
                    resume_at_ms=now + wait,
                    phase=RATE_LIMITED,
                    reason="bucket",
                )
            time.sleep(wait / 1000)

    @property
    def checkpoint(self) -> dict[str, Any]:
        """Where an earlier run of this job stopped ({} on the first run)."""
        return dict(self.claim.job.checkpoint or {})

    def save_checkpoint(self, checkpoint: dict[str, Any], *, tx: Tx | None = None) -> None:
        """Record progress after each page, so a pause, retry or crash resumes here; a run that lost
        its lease, is past its time limit or was cancelled stops here.

        With ``tx``, in that unit of work (it commits with the step it records, and a stop here rolls
        both back); without, the progress is saved before the run stops.
        """
        saved = self.jobs.save_checkpoint(self.claim, checkpoint, tx=tx)
        if saved is None:
            self.lost.set()
        else:
            self.claim.job.checkpoint = checkpoint
            if saved.cancel:
                self.cancelled.set()
        self.ensure_held()

    def overdue(self, at: float | None = None) -> bool:
        """The run is past its time limit (at ``at``, a ``time.monotonic()``; now by default)."""
        return (time.monotonic() if at is None else at) > self.deadline

    def ensure_held(self) -> None:
        """Call before each external call: stop (and wait) if the lease is gone; stop if past the time
        limit or cancelled."""
        if self.overdue():
            raise RunTimeLimitExceeded()
        if self.cancelled.is_set():
            raise JobCancelled()
        if self.lost.is_set():
            raise JobPaused(
                "the job lost its lease; it waits to run again",
                resume_at_ms=current_millis() + self.poll_delay_ms,
                phase=WAITING_ACCOUNT,
                reason="lease-lost",
            )


Body = Callable[..., "dict[str, Any] | None"]
JOBS: dict[str, tuple[JobType, Body]] = {}


def job(job_type: JobType) -> Callable[[Body], Body]:
    """Register ``body`` as the consumer of ``job_type`` (declared at worker setup)."""

    def register(body: Body) -> Body:
        JOBS[job_type.name] = (job_type, body)
        return body

    return register


def bind(body: Body, collaborators: Mapping[str, Any]) -> Callable[[JobContext], dict[str, Any] | None]:
    """``body`` with the collaborators its parameters after ``ctx`` name (a name the root lacks fails now)."""
    names = list(inspect.signature(body).parameters)[1:]
    missing = [n for n in names if n not in collaborators]
    if missing:
        raise TypeError(
            f"job body {body.__module__}.{body.__name__} asks for {missing}, which the worker lacks"
        )
    given = {n: collaborators[n] for n in names}
    return lambda ctx: body(ctx, **given)
