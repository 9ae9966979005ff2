"""The processor wrapper: every transition of a job row around its Dramatiq message.

    message ─▶ claim (delivery matches, row waiting|delayed, or lease expired)
                 │ no  → no-op (stale or duplicate delivery)
                 ▼
               [admission middleware, e.g. the account gate: may park the job]
                 ▼
               running ─▶ body ─▶ completed
                              ├─▶ JobPaused        → delayed, same attempt
                              ├─▶ PermanentJobError → failed
                              └─▶ other error       → delayed (retrying, attempt+1) or failed

A job's row is written before its next message is enqueued; if the enqueue
fails the row still says where the job stands and reconciliation re-sends it.
Attempts are counted on the row (Dramatiq's Retries middleware is not used),
with BullMQ's exponential ladder: base · 2^(attempt-1), no jitter.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from typing import Any

from dramatiq import Broker, Middleware
from dramatiq.common import current_millis
from dramatiq.middleware import SkipMessage
from redis import RedisError
from sqlalchemy.exc import SQLAlchemyError

from gatehouse import metrics
from gatehouse import progress as P
from gatehouse.composition import Gatehouse
from gatehouse.errors import JobPaused, PermanentJobError
from gatehouse_worker.runtime import JobContext, active_job, current_job, set_current

log = logging.getLogger(__name__)

# A delivery that could not be claimed because PostgreSQL did not answer
# comes back after this long (reconciliation is the net below it).
CLAIM_RETRY_MS = 5_000


def retry_delay_ms(base_ms: int, attempt: int) -> int:
    """Delay before attempt ``attempt + 1`` after attempt ``attempt`` failed."""
    return base_ms * 2 ** (attempt - 1)


def error_info(exc: BaseException) -> dict[str, Any]:
    code = getattr(exc, "code", None) or type(exc).__name__
    return {"code": code, "message": str(exc) or type(exc).__name__}


class JobLifecycle(Middleware):
    def __init__(self, gatehouse: Gatehouse) -> None:
        self.gh = gatehouse
        self.settings = gatehouse.settings
        self._running: dict[tuple[uuid.UUID, int], JobContext] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._heartbeat: threading.Thread | None = None

    @property
    def actor_options(self) -> set[str]:
        # "throws" is dramatiq's own: those exceptions are logged as expected, without a traceback.
        return {"job", "throws"}

    @staticmethod
    def is_job(broker: Broker, message: Any) -> bool:
        return bool(broker.get_actor(message.actor_name).options.get("job"))

    # -- claim -------------------------------------------------------------------

    def before_process_message(self, broker: Broker, message: Any) -> None:
        if not self.is_job(broker, message):
            return
        try:
            job_id, delivery = uuid.UUID(message.args[0]), int(message.options["delivery"])
        except (IndexError, KeyError, TypeError, ValueError):
            log.error("malformed job message %s dropped: %r", message.message_id, message)
            raise SkipMessage() from None
        try:
            claim = self.gh.jobs.claim(job_id, delivery, self.settings.job_lease_ms)
        except SQLAlchemyError:
            log.warning(
                "cannot claim job %s: database unavailable; retrying in %d ms", job_id, CLAIM_RETRY_MS
            )
            self._redeliver_later(broker, message)
            raise SkipMessage() from None
        if claim is None:
            metrics.JOB_DELIVERIES.labels(outcome="stale").inc()
            raise SkipMessage()
        metrics.JOB_DELIVERIES.labels(outcome="claimed").inc()
        ctx = JobContext(gatehouse=self.gh, claim=claim)
        set_current(ctx)
        with self._lock:
            self._running[claim.key] = ctx

    def _redeliver_later(self, broker: Broker, message: Any) -> None:
        try:
            broker.enqueue(message.copy(), delay=CLAIM_RETRY_MS)
        except RedisError:
            log.warning("could not re-enqueue %s; reconciliation will", message.message_id)

    # -- transitions used by admission middleware and the actor ------------------

    def mark_running(self, ctx: JobContext) -> None:
        self.gh.jobs.start(ctx.claim, P.stored(P.RUNNING))

    def park(
        self, ctx: JobContext, *, eta_ms: int, phase: str, reason: str, extra: dict[str, Any] | None = None
    ) -> None:
        """Put a claimed job back to wait until ``eta_ms`` without consuming an attempt."""
        delivery = self.gh.jobs.reschedule(
            ctx.claim,
            eta_ms=eta_ms,
            progress=P.stored(phase, resume_at_ms=eta_ms, reason=reason, **(extra or {})),
            consume_attempt=False,
        )
        self.send(delivery)

    def finish_skipped(self, ctx: JobContext, result: dict[str, Any]) -> None:
        self.gh.jobs.complete(ctx.claim, result, P.stored(P.COMPLETED, reason=result.get("reason")))

    def send(self, delivery: Any) -> None:
        if delivery is None:  # fenced out: another worker owns the row now
            return
        try:
            self.gh.dispatcher.send(delivery)
        except RedisError as exc:
            log.warning("job %s rescheduled but not enqueued (%s); reconciliation will", delivery.job_id, exc)

    # -- outcome -----------------------------------------------------------------

    def is_pause(self, exc: BaseException | None) -> bool:
        """A pause costs no attempt, unless WB asks for an unreasonably long one."""
        return (
            isinstance(exc, JobPaused)
            and exc.resume_at_ms - current_millis() <= self.settings.wb_max_pause_ms
        )

    def after_process_message(
        self, broker: Broker, message: Any, *, result: Any = None, exception: BaseException | None = None
    ) -> None:
        if not self.is_job(broker, message):
            return
        ctx = current_job()
        try:
            self._record_outcome(ctx, exception)
        finally:
            self._forget(ctx)

    def after_skip_message(self, broker: Broker, message: Any) -> None:
        ctx = active_job()
        if ctx is not None and self.is_job(broker, message):  # None: skipped before the claim
            self._forget(ctx)

    def _forget(self, ctx: JobContext) -> None:
        with self._lock:
            self._running.pop(ctx.claim.key, None)
        set_current(None)

    def _record_outcome(self, ctx: JobContext, exc: BaseException | None) -> None:
        job = ctx.job
        if exc is None:
            self.gh.jobs.complete(ctx.claim, ctx.result, P.stored(P.COMPLETED))
            metrics.JOBS_FINISHED.labels(type=job.type, outcome="completed").inc()
            return
        if self.is_pause(exc):
            if exc.phase == P.RATE_LIMITED:
                metrics.WB_RESCHEDULES.labels(scope=exc.reason).inc()
            self.park(ctx, eta_ms=exc.resume_at_ms, phase=exc.phase, reason=exc.reason)
            return
        error = error_info(exc)
        if isinstance(exc, PermanentJobError) or job.attempt >= job.max_attempts:
            self.gh.jobs.fail(ctx.claim, error, P.stored(P.FAILED, reason=error["code"]))
            metrics.JOBS_FINISHED.labels(type=job.type, outcome="failed").inc()
            return
        eta_ms = current_millis() + retry_delay_ms(self.settings.retry_base_delay_ms, job.attempt)
        delivery = self.gh.jobs.reschedule(
            ctx.claim,
            eta_ms=eta_ms,
            progress=P.stored(P.RETRYING, resume_at_ms=eta_ms, reason=error["code"]),
            consume_attempt=True,
            error=error,
        )
        metrics.JOBS_FINISHED.labels(type=job.type, outcome="retrying").inc()
        self.send(delivery)

    # -- leases ------------------------------------------------------------------

    def running(self) -> list[JobContext]:
        with self._lock:
            return list(self._running.values())

    def after_worker_boot(self, broker: Broker, worker: Any) -> None:
        self._stop.clear()
        self._heartbeat = threading.Thread(target=self._beat, name="job-lease-heartbeat", daemon=True)
        self._heartbeat.start()

    def after_worker_shutdown(self, broker: Broker, worker: Any) -> None:
        # Leases are renewed until the in-flight jobs are done (this hook runs after).
        self._stop.set()

    def _beat(self) -> None:
        interval = self.settings.job_heartbeat_ms / 1000
        while not self._stop.wait(interval):
            running = self.running()
            started = time.monotonic()
            try:
                lost = self.gh.jobs.heartbeat([c.claim for c in running], self.settings.job_lease_ms)
            except SQLAlchemyError:
                log.warning("job lease heartbeat failed; will retry", exc_info=True)
                continue
            for ctx in running:
                if ctx.claim.key in lost:
                    log.warning("job %s lost its lease to another worker; it stops", ctx.claim.job_id)
                    ctx.lost.set()
            log.debug("renewed %d job lease(s) in %.3fs", len(running), time.monotonic() - started)


class JobStart(Middleware):
    """Last of the admission middleware: the job was admitted, record that it runs."""

    def __init__(self, lifecycle: JobLifecycle) -> None:
        self.lifecycle = lifecycle

    def before_process_message(self, broker: Broker, message: Any) -> None:
        if JobLifecycle.is_job(broker, message):
            self.lifecycle.mark_running(current_job())
