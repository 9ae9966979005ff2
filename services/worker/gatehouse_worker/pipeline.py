"""The job pipeline: how every job message is run, in one place and in order.

    message ─▶ claim ─▶ admit ─▶ start ─▶ body ─▶ decide ─▶ apply
                 │         │
                 │         └ gate busy: the outcome is GateBusy, the body does not run
                 └ stale or duplicate delivery: nothing happens

- claim: one conditional UPDATE takes the row for this message's delivery and
  names this worker process (with no gate to pass, it also records the start:
  a job is shown running only once its body is about to run); the claims of
  the process's threads go together, one statement a batch (batches.py);
- admit: a gated job type acquires its account's gate (gatehouse.gate);
- body: the job type's function; what it returns or raises is the outcome;
- decide: ``gatehouse.run_decision.decide`` (pure) turns the outcome into a
  transition and a gate effect;
- apply: the row write (fenced by the claim; a plain outcome batched with the
  other threads' like the claim), the gate effect, the next message. The row
  is written before the message is sent: if the send fails, the row says where
  the job stands and reconciliation re-sends it.

``JobRuntime`` is the one Dramatiq middleware for jobs: it owns the process's
lease keeper (boot and shutdown). The actor of a job type takes the job id and
the message's number as its two arguments and calls ``JobRuntime.run``; every
row write is a unit of work (gatehouse.uow), which sends the next message.
With traces on (gatehouse.traces), a run is a span, the child of its message's
sender's; the claim and the body are spans in it, a gate wait an event, the
transition its attributes.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from dramatiq import Actor, Broker, Middleware
from dramatiq.common import current_millis
from dramatiq.middleware import CurrentMessage
from psycopg import OperationalError
from psycopg_pool import PoolTimeout
from redis import RedisError
from sqlalchemy.exc import OperationalError as SaOperationalError
from sqlalchemy.exc import TimeoutError as SaPoolTimeout

from gatehouse import logs, metrics, traces
from gatehouse import progress as P
from gatehouse import run_decision as rd
from gatehouse.accounts import Accounts
from gatehouse.errors import (
    JobCancelled,
    JobPaused,
    PermanentJobError,
    RetryLater,
    RunTimeLimitExceeded,
    error_info,
)
from gatehouse.fanout import SKIP_STREAK_FIELD, SkipStreaks
from gatehouse.freshness import FreshnessStore
from gatehouse.gate import RedisGate, job_of, owner
from gatehouse.job_types import JobType, Policies, RunTimeLimits, announces, outcome_event, progress_event
from gatehouse.jobs import Claim, JobMessage, JobStore, Outcome, datetime_to_ms
from gatehouse.pauses import Holds
from gatehouse.uow import UnitOfWork
from gatehouse.wb.errors import WbScopeDenied, WbUnauthorized
from gatehouse.wb.pauses import AccountPauses
from gatehouse_worker.batches import RowBatches
from gatehouse_worker.leases import LeaseKeeper
from gatehouse_worker.runtime import JobContext, WbAccess
from gatehouse_worker.time_limits import body_running

log = logging.getLogger(__name__)

# PostgreSQL not answering, through psycopg (the job store's statements) or SQLAlchemy (a transaction).
DB_DOWN = (OperationalError, PoolTimeout, SaOperationalError, SaPoolTimeout)
# A message that could not be claimed because PostgreSQL did not answer comes
# back after this long (reconciliation is the net below it).
CLAIM_RETRY_MS = 5_000
# A message of a held queue comes back after this long (its consumer is paused by then).
HELD_RETRY_MS = 1_000
FINISHED = {"complete": "completed", "skip": "skipped", "fail": "failed"}  # metric labels, event states
WAKE_TRIES = 5  # stale waiters (finished, or not parked any more) skipped per release


@dataclass(frozen=True)
class GateTimings:
    """The gate's settings as the pipeline uses them (GATE_*; JOB_LEASE_MS bounds a write's retries)."""

    enabled: bool
    lease_ms: int
    wanted_ttl_ms: int
    poll_delay_ms: int
    job_lease_ms: int


class JobRuntime(Middleware):
    def __init__(
        self,
        *,
        uow: UnitOfWork,
        jobs: JobStore,
        gate: RedisGate,
        pauses: AccountPauses,
        holds: Holds,
        policies: Policies,
        leases: LeaseKeeper,
        wb_access: WbAccess,
        timings: rd.Timings,
        gate_timings: GateTimings,
        limits: RunTimeLimits,
        streaks: SkipStreaks,
        rows: RowBatches,
        accounts: Accounts,
        freshness: FreshnessStore,
    ) -> None:
        self.uow, self.jobs, self.gate, self.pauses = uow, jobs, gate, pauses
        self.accounts = accounts  # marks an account whose token WB rejected
        self.holds, self.policies = holds, policies
        self.leases, self.wb_access = leases, wb_access
        self.timings, self.g = timings, gate_timings
        self.limits = limits
        self.streaks = streaks
        self.rows = rows  # the claims and outcomes of this process's threads, batched
        self.freshness = freshness

    # -- Dramatiq hooks ------------------------------------------------------------

    def before_worker_boot(self, broker: Broker, worker: Any) -> None:
        # What the overview shows of this process: its threads and the queues it consumes.
        queues = getattr(worker, "consumer_whitelist", None) or broker.get_declared_queues()
        self.leases.start(threads=getattr(worker, "worker_threads", None), queues=queues)

    def after_worker_shutdown(self, broker: Broker, worker: Any) -> None:
        """In-flight jobs are done (or past the shutdown timeout): give back what is still held."""
        self.leases.stop()
        for held in self.leases.held():
            if held.gate is not None and not held.ctx.lost.is_set():
                self._gate(lambda: self._release(*held.gate))  # noqa: B023 - called at once

    # -- the pipeline --------------------------------------------------------------

    def run(self, job_type: JobType, body: Callable[[JobContext], Any], job_id: str, number: int) -> None:
        attributes = {
            "gatehouse.job.id": job_id,
            "gatehouse.job.type": job_type.name,
            "gatehouse.job.number": number,
        }
        with traces.consume(f"job {job_type.name}", CurrentMessage.get_current_message(), attributes):
            self._run(job_type, body, job_id, number)

    def _run(self, job_type: JobType, body: Callable[[JobContext], Any], job_id: str, number: int) -> None:
        if self._held(job_type, job_id, number):
            return
        with traces.span("job claim"):
            claim = self._claim(job_type, job_id, number)
        if claim is None:
            return
        logs.bind(account_id=claim.job.account_id)  # until the end of the actor's logs.bound
        ctx = JobContext(
            claim=claim, jobs=self.jobs, wb_access=self.wb_access, poll_delay_ms=self.g.poll_delay_ms
        )
        if claim.job.cancel_requested_at is not None:  # cancelled while it ran before: it stops first
            ctx.cancelled.set()
        self.leases.add(ctx)
        try:
            facts, outcome = self._admit(job_type, ctx)
            if outcome is None:
                outcome = self._body(
                    body,
                    ctx,
                    job_type,
                    started=self._claim_starts(job_type),
                    limit_ms=self.limits.of(job_type),
                )
        finally:
            # The run is over: its next write is its last, so its leases need no renewal
            # (and a renewal racing that write must not take it for a lost lease).
            self.leases.remove(ctx)
        facts = replace(facts, lost=ctx.lost.is_set())
        transition = rd.decide(facts, self.policies.of(job_type), outcome, self.timings, current_millis())
        traces.note(
            {"gatehouse.job.attempt": ctx.job.attempt, "gatehouse.job.outcome": transition.kind},
            error=str(transition.error) if transition.kind == "fail" else None,
        )
        self._apply(ctx, transition, job_type)

    def _put_back(self, job_type: JobType, job_id: str, number: int, delay_ms: int) -> None:
        """The message again, later and unchanged: it was not claimed, so the row still waits for it.

        Sent like every other (a unit of work with nothing to commit); if Redis fails,
        reconciliation sends it.
        """
        eta_ms = current_millis() + delay_ms
        with self.uow.autocommit() as tx:
            tx.record(JobMessage(uuid.UUID(job_id), job_type.queue, job_type.name, number, eta_ms))

    def _held(self, job_type: JobType, job_id: str, number: int) -> bool:
        """A message prefetched before its queue was held goes back unclaimed (gatehouse_worker.holds)."""
        if not self.holds.queue_paused(job_type.queue):
            return False
        self._put_back(job_type, job_id, number, HELD_RETRY_MS)
        return True

    def _claim(self, job_type: JobType, job_id: str, number: int) -> Claim | None:
        try:
            claim = self.rows.claim(uuid.UUID(job_id), number, start=self._claim_starts(job_type))
        except DB_DOWN:
            log.warning("cannot claim job %s: PostgreSQL unavailable; again in %d ms", job_id, CLAIM_RETRY_MS)
            self._put_back(job_type, job_id, number, CLAIM_RETRY_MS)
            return None
        if claim is None:
            log.debug("message %d of job %s is stale or a duplicate; dropped", number, job_id)
            traces.note({"gatehouse.claim": "stale"})
            metrics.JOB_DELIVERIES.labels(outcome="stale").inc()
            return None
        metrics.JOB_DELIVERIES.labels(outcome="claimed").inc()
        return claim

    def _gated(self, job_type: JobType) -> bool:
        return job_type.gate is not None and self.g.enabled

    def _claim_starts(self, job_type: JobType) -> bool:
        """Whether the claim records the start: no gate to pass, and no progress event to raise with it."""
        return not self._gated(job_type) and not announces(job_type)

    def _admit(self, job_type: JobType, ctx: JobContext) -> tuple[rd.RunFacts, rd.Outcome | None]:
        """The gate (for gated types): the facts for the decision, and GateBusy when it must wait."""
        job, spec = ctx.job, job_type.gate
        progress = job.progress or {}
        created_ms = datetime_to_ms(job.created_at)
        facts = rd.RunFacts(
            attempt=job.attempt,
            max_attempts=job.max_attempts,
            # A scheduled job promoted after repeated skips waits (and never skips) as a user job, once.
            tier=spec.tier_of(job.payload) if spec else job.tier,
            # A spread job's wait (its max wait, its place in line) begins when it is due, not at its tick.
            enqueued_ms=spec.waits_from(job.payload, created_ms) if spec else created_ms,
            gated=self._gated(job_type),
            max_wait_ms=spec.max_wait_of(job.payload) if spec else None,
            waiting_since_ms=progress.get("waitingSince"),
        )
        if not facts.gated:
            return facts, None
        if self.holds.account_pause(job.account_id) is not None:  # an operator holds the account
            return facts, rd.AccountHeld()
        account, me = str(job.account_id), owner(job.queue, job.id)
        try:
            acquired = self.gate.acquire(
                account,
                me,
                tier=facts.tier,
                lease_ms=self.g.lease_ms,
                wanted_ttl_ms=self.g.wanted_ttl_ms,
                waiting_ttl_ms=self.g.poll_delay_ms * 10,
                first_wait_ms=facts.enqueued_ms,
            )
        except RedisError as exc:
            log.info("gate of account %s unreachable (%s); job %s waits", account, exc, job.id)
            traces.event("gate.wait", {"phase": P.WAITING_ACCOUNT, "reason": "gate-unreachable"})
            return facts, rd.GateBusy(reason="gate-unreachable")
        if not acquired.proceed:
            log.debug("job %s waits for account %s (held by %s)", job.id, account, acquired.holder)
            traces.event("gate.wait", {"phase": P.WAITING_ACCOUNT, "holder": acquired.holder})
            return facts, rd.GateBusy()
        traces.event("gate.acquired", {"decision": acquired.decision})
        self.leases.holds_gate(ctx, account, me)
        if acquired.decision == "acquired" and facts.waiting_since_ms is not None:
            self._observe_handoff(account, facts.waiting_since_ms)
        return replace(facts, holds_gate=True), None

    def _body(
        self,
        body: Callable[[JobContext], Any],
        ctx: JobContext,
        job_type: JobType,
        *,
        started: bool,
        limit_ms: int,
    ) -> rd.Outcome:
        # A job without a gate was started by its claim (one statement); an admitted one starts here.
        if not started and not self._write(lambda: self._start(job_type, ctx), ctx.job.id):
            ctx.lost.set()
            return rd.Paused(current_millis(), P.WAITING_ACCOUNT, "lease-lost")
        try:
            with body_running(ctx, limit_ms), traces.span("job body"):
                if ctx.cancelled.is_set():
                    raise JobCancelled()
                result = body(ctx)
            return rd.Completed(result)
        except JobPaused as exc:
            log.info("job %s paused until %d (%s)", ctx.job.id, exc.resume_at_ms, exc.reason)
            if exc.reason == P.WB_429:
                self._note_pause(ctx, exc)
            return rd.Paused(exc.resume_at_ms, exc.phase, exc.reason, error_info(exc))
        except RunTimeLimitExceeded as exc:
            return self._overdue(ctx, limit_ms, exc)
        except PermanentJobError as exc:
            log.warning("job %s failed for good: %s", ctx.job.id, exc)
            return rd.FailedPermanently(error_info(exc))
        except RetryLater as exc:
            log.info(
                "job %s attempt %d failed; not again before %d ms", ctx.job.id, ctx.job.attempt, exc.after_ms
            )
            return rd.Failed(error_info(exc), retry_after_ms=exc.after_ms)
        except Exception as exc:
            if ctx.overdue():  # what the deadline cut short (a WB call, a POST) is the time limit
                return self._overdue(ctx, limit_ms, exc)
            log.warning("job %s attempt %d failed", ctx.job.id, ctx.job.attempt, exc_info=True)
            return rd.Failed(error_info(exc))

    def _start(self, job_type: JobType, ctx: JobContext) -> bool:
        """Record the start; a job that announces its phase changes raises it in the same transaction."""
        progress = P.stored(P.RUNNING)
        event = progress_event(job_type, ctx.job, progress, attempt=ctx.job.attempt, was=ctx.job.progress)
        if event is None:
            return self.jobs.start(ctx.claim, progress)
        with self.uow.begin() as tx:
            started = self.jobs.start(ctx.claim, progress, tx=tx)
            if started:
                tx.publish(event)
        return started

    def _overdue(self, ctx: JobContext, limit_ms: int, exc: Exception) -> rd.Outcome:
        how = "interrupted" if ctx.interrupted else f"stopped ({type(exc).__name__}: {exc})"
        log.warning(
            "job %s attempt %d ran past its time limit of %d ms; %s",
            ctx.job.id,
            ctx.job.attempt,
            limit_ms,
            how,
        )
        metrics.JOBS_TIME_LIMITED.labels(type=ctx.job.type).inc()
        return rd.Failed(
            {
                "code": RunTimeLimitExceeded.code,
                "message": f"the run went past its time limit of {limit_ms} ms",
            }
        )

    def _note_pause(self, ctx: JobContext, exc: JobPaused) -> None:
        """WB said 429: the account's recent pauses (for operators) get this one; never fails the job."""
        if ctx.job.account_id is None:
            return
        try:
            self.pauses.record(
                str(ctx.job.account_id),
                ctx.job.id,
                at_ms=current_millis(),
                resume_at_ms=exc.resume_at_ms,
                reason=exc.reason,
            )
        except RedisError as err:
            log.warning(
                "job %s: its WB pause could not be noted for account %s (%s)",
                ctx.job.id,
                ctx.job.account_id,
                err,
            )

    # -- applying a transition -------------------------------------------------------

    def _apply(self, ctx: JobContext, t: rd.Transition, job_type: JobType) -> None:
        job, claim = ctx.job, ctx.claim
        if t.kind in ("complete", "skip", "fail"):
            state = "failed" if t.kind == "fail" else "completed"
            # A WB token's missing category is named in the status poll («…категории «Финансы»…»).
            category = (t.error or {}).get("category") if t.reason == WbScopeDenied.code else None
            progress = P.stored(t.phase, reason=t.reason, **({"category": category} if category else {}))
            # A skip while an operator holds the account is not the gate's: no starvation count.
            if job.tier == "scheduled" and job_type.gate is not None and t.reason != rd.ACCOUNT_PAUSED:
                self._count_skips(ctx, skipped=t.kind == "skip")
            self._write(lambda: self._finish(job_type, claim, state, progress, t, ctx.wb_token), job.id)
            metrics.JOBS_FINISHED.labels(type=job.type, outcome=FINISHED[t.kind]).inc()
            _observe_run(ctx, FINISHED[t.kind])
            if t.kind == "skip":
                log.info("scheduled job %s skipped: account %s stayed busy", job.id, job.account_id)
            elif t.kind == "fail":
                log.error("job %s failed after attempt %d: %s", job.id, job.attempt, t.error)
            self._gate_effect(ctx, t.gate)
            return
        extra = {"waitingSince": t.waiting_since_ms} if t.waiting_since_ms is not None else {}
        progress = P.stored(t.phase, resume_at_ms=t.eta_ms, reason=t.reason, **extra)

        # A phase change a user job announces (wb.job.progress) is raised in the transaction that writes it.
        event = progress_event(
            job_type, job, progress, attempt=job.attempt + int(t.consumes_attempt), was=job.progress
        )

        def reschedule() -> None:
            with self.uow.begin() if event else self.uow.autocommit() as tx:
                moved = self.jobs.reschedule(
                    tx,
                    claim,
                    eta_ms=t.eta_ms,
                    progress=progress,
                    consume_attempt=t.consumes_attempt,
                    error=t.error,
                )
                if moved and event:
                    tx.publish(event)
                # The gate effect before the message goes out (at the end of the unit of work): a kept
                # lease must be extended before the job can run again.
                self._gate_effect(ctx, t.gate)

        self._write(reschedule, job.id)
        if t.kind == "retry":
            metrics.JOBS_FINISHED.labels(type=job.type, outcome="retrying").inc()
        elif t.phase == P.WAITING_ACCOUNT:
            metrics.WB_RESCHEDULES.labels(scope="account-gate").inc()
        elif t.phase == P.RATE_LIMITED:
            metrics.WB_RESCHEDULES.labels(scope=t.reason).inc()
        _observe_run(ctx, "retrying" if t.kind == "retry" else "parked")

    def _count_skips(self, ctx: JobContext, *, skipped: bool) -> None:
        """A scheduled gated run's end counts in its (account, type)'s skip streak (gatehouse.fanout).

        Before the row is finished, so a fan-out that finds the row finished finds the count too.
        A skip adds one; another end resets a streak the job was created with (none: nothing to do).
        """
        job = ctx.job
        if job.account_id is None or ctx.lost.is_set():
            return
        try:
            if skipped:
                self.streaks.skipped(job.type, job.account_id)
            elif job.payload.get(SKIP_STREAK_FIELD):
                self.streaks.reset(job.type, job.account_id)
        except RedisError as exc:
            log.warning("job %s: its account's skip streak is not counted (%s)", job.id, exc)

    def _finish(
        self,
        job_type: JobType,
        claim: Claim,
        state: str,
        progress: dict,
        t: rd.Transition,
        wb_token: str | None,
    ) -> None:
        """The outcome; a type that emits raises its event in the same transaction (a retried write starts
        afresh), as does a job WB rejected the account's token (``wb_token``) on: the account is marked
        (the token, or only the category WB said it lacks); a completed run also records the datasets
        its type refreshes (gatehouse.freshness)."""
        ended = FINISHED[t.kind]  # the attempt record's outcome: completed, skipped or failed
        of_token = claim.job.account_id is not None and wb_token is not None
        rejected = of_token and t.reason == WbUnauthorized.code
        scope = (t.error or {}).get("category") if of_token and t.reason == WbScopeDenied.code else None
        if not (
            job_type.emits or job_type.refreshes or rejected or scope
        ):  # one statement: batched with the others'
            self.rows.finish(Outcome(claim, state, progress, t.result, t.error, ended))
            return
        with self.uow.begin() as tx:
            if not self.jobs.finish(
                tx, claim, state=state, progress=progress, result=t.result, error=t.error, ended=ended
            ):
                return
            if job_type.emits:
                tx.publish(
                    outcome_event(job_type, claim.job, FINISHED[t.kind], result=t.result, error=t.error)
                )
            if rejected and (
                event := self.accounts.token_rejected(
                    tx, claim.job.account_id, wb_token, job_id=claim.job.id, status=401
                )
            ):
                tx.publish(event)
            if scope:
                self.accounts.scope_denied(tx, claim.job.account_id, wb_token, scope)
            if t.kind == "complete" and job_type.refreshes and claim.job.account_id is not None:
                self.freshness.record(tx, claim.job.account_id, job_type.refreshes, claim.job.id)

    def _write(self, write: Callable[[], Any], job_id: uuid.UUID) -> Any:
        """A row write that rides out a short PostgreSQL outage, up to the row's lease.

        Past that the row may be requeued by another worker anyway, and this
        run's write would be fenced out; the row stays as it was, recoverable.
        """
        deadline = time.monotonic() + self.g.job_lease_ms / 1000
        pause = 0.1
        while True:
            try:
                return write()
            except DB_DOWN as exc:
                if time.monotonic() > deadline:
                    log.error(
                        "job %s: its outcome could not be written (%s); it will be requeued", job_id, exc
                    )
                    return None
                log.warning("job %s: PostgreSQL unavailable (%s); writing its outcome again", job_id, exc)
                time.sleep(pause)
                pause = min(pause * 2, 2.0)

    def _gate_effect(self, ctx: JobContext, effect: rd.GateEffect) -> None:
        if effect.action == "none":
            return
        job = ctx.job
        account, me = str(job.account_id), owner(job.queue, job.id)
        self.leases.drop_gate(ctx)
        if effect.action == "forget":
            self._gate(lambda: self.gate.forget(account, me))
        elif effect.action == "release":
            self._gate(lambda: self._release(account, me))
        elif effect.action == "yield":
            self._gate(lambda: self._yield_or_keep(account, me, effect.lease_ms))
        else:  # keep
            self._gate(lambda: self.gate.extend(account, me, lease_ms=effect.lease_ms))

    def _gate(self, step: Callable[[], Any]) -> None:
        try:
            step()
        except (RedisError, *DB_DOWN) as exc:
            log.warning("gate step failed (%s); the lease expires on its own", exc)

    def _release(self, account: str, me: str) -> None:
        released = self.gate.release(account, me)
        if released.released:
            self._wake(account, released.best_waiter)

    def _yield_or_keep(self, account: str, me: str, lease_ms: int) -> None:
        yielded = self.gate.yield_if_wanted(account, me)
        if yielded.released:
            self._wake(account, yielded.best_waiter)
        else:
            self.gate.extend(account, me, lease_ms=lease_ms)

    def _wake(self, account: str, best: str | None) -> None:
        """Make the best waiter due now; the row claim turns its old delayed copy into a no-op."""
        for _ in range(WAKE_TRIES):
            if best is None:
                return
            with self.uow.autocommit() as tx:
                woken = self.jobs.wake(tx, job_of(best), phase=P.WAITING_ACCOUNT)
            if woken:
                return
            self.gate.forget(account, best)  # finished, or no longer parked on the gate
            best = self.gate.inspect(account).best_waiter

    def _observe_handoff(self, account: str, waiting_since_ms: int) -> None:
        now = current_millis()
        metrics.GATE_WAIT.observe((now - waiting_since_ms) / 1000)
        try:
            released = self.gate.handed_off(account)
        except RedisError:
            return
        if released is not None:
            metrics.GATE_HANDOFF.observe(max(0, now - released) / 1000)


def _observe_run(ctx: JobContext, outcome: str) -> None:
    metrics.JOB_DURATION.labels(type=ctx.job.type, outcome=outcome).observe(time.monotonic() - ctx.claimed_at)


def declare(
    broker: Broker, runtime: JobRuntime, job_type: JobType, body: Callable[[JobContext], Any]
) -> Actor:
    """The Dramatiq actor of a job type: the job id and the message's number are its arguments."""

    def run(job_id: str, number: int | None = None) -> None:
        with logs.bound(job_id=job_id, job_type=job_type.name):  # every line of the run carries them
            if (
                number is None
            ):  # a message of an older release (its number was an option): the row's is sent again
                log.warning(
                    "job %s: a message without its number is dropped; reconciliation sends it again", job_id
                )
                return
            runtime.run(job_type, body, job_id, number)

    run.__name__ = run.__qualname__ = job_type.name.replace(".", "_").replace("-", "_").replace(":", "_")
    return Actor(
        run, broker=broker, actor_name=job_type.name, queue_name=job_type.queue, priority=0, options={}
    )
