"""The per-account gate (ADR-0057) as Dramatiq middleware.

An actor opts in with one option, ``gate={"tier": "user"}`` or
``gate={"tier": "scheduled", "max_wait_ms": …}`` (set on its JobType). After
the row is claimed (JobLifecycle) and before the body runs (JobStart):

- gate free (or already ours: a rescheduled or retried run) → run under a
  lease renewed by a heartbeat; a lost lease stops the job before its next WB
  call;
- held by another job → park the job ``delayed`` for GATE_POLL_DELAY_MS with
  phase ``waiting-account``, no attempt used; a user job also marks the gate
  ``wanted``, which keeps scheduled jobs off it;
- a scheduled job that cannot get the gate after its max wait ends
  ``completed`` with ``{"skipped": true, "reason": "account-busy"}``.

After the body: a WB rate-limit pause keeps the gate for pause + margin
(a scheduled owner yields it instead if a user job wants it); any other end
releases it. Whoever releases wakes the best waiter (user first, then oldest)
at once; the delayed poll stays as the safety net.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any

from dramatiq import Broker, Middleware
from dramatiq.common import current_millis
from dramatiq.middleware import SkipMessage
from redis import RedisError

from gatehouse import metrics
from gatehouse import progress as P
from gatehouse.composition import Gatehouse
from gatehouse.gate import RedisGate
from gatehouse_worker.middleware.lifecycle import JobLifecycle
from gatehouse_worker.runtime import JobContext, active_job, current_job

log = logging.getLogger(__name__)

SKIPPED = {"skipped": True, "reason": "account-busy"}
WAKE_TRIES = 5  # stale waiters (finished, or not parked any more) skipped per release


@dataclass(frozen=True)
class Hold:
    account: str
    owner: str
    tier: str
    ctx: JobContext


def owner_of(ctx: JobContext) -> str:
    return f"{ctx.job.queue}:{ctx.job.id}"


def job_of(owner: str) -> uuid.UUID:
    return uuid.UUID(owner.rsplit(":", 1)[1])


def released_key(account: str) -> str:
    """When the account's gate was last handed over (for the hand-off latency metric)."""
    return f"wb:gate:{{{account}}}:released"


class AccountGate(Middleware):
    def __init__(self, gatehouse: Gatehouse, lifecycle: JobLifecycle) -> None:
        self.gh = gatehouse
        self.s = gatehouse.settings
        self.gate: RedisGate = gatehouse.gate
        self.lifecycle = lifecycle
        self._holds: dict[str, Hold] = {}  # owner → hold, renewed by the heartbeat
        self._lock = threading.Lock()
        self._stop = threading.Event()

    @property
    def actor_options(self) -> set[str]:
        return {"gate"}

    def spec(self, broker: Broker, message: Any) -> dict[str, Any] | None:
        """The actor's gate option; None when it has none or GATE_ENABLED is off."""
        return broker.get_actor(message.actor_name).options.get("gate") if self.s.gate_enabled else None

    # -- admission ---------------------------------------------------------------

    def before_process_message(self, broker: Broker, message: Any) -> None:
        spec = self.spec(broker, message)
        if not spec:
            return
        ctx = current_job()
        job = ctx.job
        account, owner, tier = str(job.account_id), owner_of(ctx), spec["tier"]
        now = current_millis()
        enqueued = int(job.created_at.timestamp() * 1000)
        try:
            result = self.gate.acquire(
                account,
                owner,
                tier=tier,
                lease_ms=self.s.gate_lease_ms,
                wanted_ttl_ms=self.s.gate_wanted_ttl_ms,
                waiting_ttl_ms=self.s.gate_poll_delay_ms * 10,
                first_wait_ms=enqueued,
            )
        except RedisError:
            log.warning("gate of account %s unreachable; job %s waits", account, job.id, exc_info=True)
            self._park(ctx, now)
            raise SkipMessage() from None

        if result.decision in ("acquired", "reentrant"):
            self._observe_start(ctx, account, result.decision, now)
            with self._lock:
                self._holds[owner] = Hold(account, owner, tier, ctx)
            return

        max_wait = ctx.payload.get("maxWaitMs", spec.get("max_wait_ms"))
        if tier == "scheduled" and max_wait is not None and now - enqueued > max_wait:
            self.gate.forget(account, owner)
            self.lifecycle.finish_skipped(ctx, SKIPPED)
            log.info("scheduled job %s skipped: account %s busy for over %d ms", job.id, account, max_wait)
            raise SkipMessage()
        metrics.WB_RESCHEDULES.labels(scope="account-gate").inc()
        self._park(ctx, now)
        raise SkipMessage()

    def _park(self, ctx: JobContext, now: int) -> None:
        waiting_since = (ctx.job.progress or {}).get("waitingSince") or now
        self.lifecycle.park(
            ctx,
            eta_ms=now + self.s.gate_poll_delay_ms,
            phase=P.WAITING_ACCOUNT,
            reason="account-gate",
            extra={"waitingSince": waiting_since},
        )

    def _observe_start(self, ctx: JobContext, account: str, decision: str, now: int) -> None:
        waited_since = (ctx.job.progress or {}).get("waitingSince")
        if waited_since is None or decision != "acquired":
            return
        metrics.GATE_WAIT.observe((now - waited_since) / 1000)
        released = self.gh.redis.getdel(released_key(account))
        if released is not None:
            metrics.GATE_HANDOFF.observe(max(0, now - int(released)) / 1000)

    # -- after the body ----------------------------------------------------------

    def after_process_message(
        self, broker: Broker, message: Any, *, result: Any = None, exception: BaseException | None = None
    ) -> None:
        ctx = active_job()
        if ctx is None or not self.spec(broker, message):
            return
        with self._lock:
            hold = self._holds.pop(owner_of(ctx), None)
        if hold is None:
            return
        try:
            if self.lifecycle.is_pause(exception) and exception.phase == P.RATE_LIMITED:
                self._keep_over_pause(hold, exception.resume_at_ms)
            elif not ctx.lost.is_set():
                self.release(hold)
        except RedisError:
            log.warning(
                "could not release the gate of %s; it expires with its lease", hold.account, exc_info=True
            )

    def _keep_over_pause(self, hold: Hold, resume_at_ms: int) -> None:
        """A WB pause keeps the gate, unless a scheduled owner sees a user job wanting it."""
        if hold.tier == "scheduled":
            yielded = self.gate.yield_if_wanted(hold.account, hold.owner)
            if yielded.released:
                self._wake(hold.account, yielded.best_waiter)
                return
        pause = max(0, resume_at_ms - current_millis())
        self.gate.extend(hold.account, hold.owner, lease_ms=pause + self.s.gate_pause_margin_ms)

    def release(self, hold: Hold) -> None:
        released = self.gate.release(hold.account, hold.owner)
        if released.released:
            self._wake(hold.account, released.best_waiter)

    def _wake(self, account: str, best: str | None) -> None:
        """Make the best waiter due now; the row claim turns its old delayed copy into a no-op."""
        if best is None:
            return
        self.gh.redis.set(released_key(account), current_millis(), px=self.s.gate_lease_ms)
        for _ in range(WAKE_TRIES):
            if best is None:
                return
            delivery = self.gh.jobs.wake(job_of(best), phase=P.WAITING_ACCOUNT)
            if delivery is not None:
                self.lifecycle.send(delivery)
                return
            self.gate.forget(account, best)  # finished, or no longer parked on the gate
            best = self.gate.inspect(account).best_waiter

    # -- leases ------------------------------------------------------------------

    def after_worker_boot(self, broker: Broker, worker: Any) -> None:
        self._stop.clear()
        threading.Thread(target=self._beat, name="gate-heartbeat", daemon=True).start()

    def after_worker_shutdown(self, broker: Broker, worker: Any) -> None:
        """Jobs still running past the shutdown timeout give their gates back as the process leaves."""
        self._stop.set()
        with self._lock:
            holds, self._holds = list(self._holds.values()), {}
        for hold in holds:
            try:
                self.release(hold)
            except RedisError:
                log.warning("gate of %s not released at shutdown; it expires with its lease", hold.account)

    def _beat(self) -> None:
        while not self._stop.wait(self.s.gate_heartbeat_ms / 1000):
            with self._lock:
                holds = list(self._holds.values())
            started = time.monotonic()
            for hold in holds:
                try:
                    kept = self.gate.heartbeat(hold.account, hold.owner, lease_ms=self.s.gate_lease_ms)
                except RedisError:
                    log.warning("gate heartbeat failed for %s; retrying", hold.account)
                    continue
                if not kept:
                    log.warning("job %s lost the gate of account %s; it stops", hold.ctx.job.id, hold.account)
                    hold.ctx.lost.set()
            log.debug("renewed %d gate lease(s) in %.3fs", len(holds), time.monotonic() - started)
