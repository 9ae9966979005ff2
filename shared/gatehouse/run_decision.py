"""The run decision: what becomes of a claimed job, as a pure function.

    decide(run, policy, outcome, timings, now_ms) -> Transition

``run`` is what the claim knows of the job (attempt, tier, gate, lease),
``outcome`` what happened: the gate said wait (``GateBusy``) or the body ran
and completed, paused, failed permanently or failed. The transition says how
the row moves — complete, park (no attempt used), retry (attempt + 1 on the
policy's schedule), fail, skip — and what happens to the account's gate. The
worker applies it (gatehouse_worker.pipeline) and decides nothing itself;
tests/unit/test_run_decision.py walks every row of the table below.

| outcome            | condition                                   | transition | gate          |
|--------------------|---------------------------------------------|------------|---------------|
| Completed          |                                             | complete   | release       |
| GateBusy           | scheduled, waited longer than its max wait  | skip       | forget waiter |
| GateBusy           | otherwise                                   | park poll  | —             |
| AccountHeld        | scheduled (waits as such)                   | skip       | forget waiter |
| AccountHeld        | otherwise                                   | park poll  | —             |
| Paused             | longer than the longest pause allowed       | as Failed  | as Failed     |
| Paused             | the run lost its lease                      | park       | — (not ours)  |
| Paused rate-limited| user job holding the gate                   | park       | keep          |
| Paused rate-limited| scheduled job holding the gate              | park       | yield or keep |
| Paused             | otherwise                                   | park       | release       |
| FailedPermanently  |                                             | fail       | release       |
| Failed             | attempts left (not before its retry-after)  | retry      | release       |
| Failed             | last attempt                                | fail       | release       |

"release" and "keep" apply only to a run that holds the gate and has not
lost it; a run that lost its lease must not touch what its successor holds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from gatehouse import progress as P
from gatehouse.job_types import RetryPolicy

SKIPPED = {"skipped": True, "reason": "account-busy"}
ACCOUNT_PAUSED = "account-paused"  # an operator holds the account (gatehouse.pauses)


# -- what happened -------------------------------------------------------------------


@dataclass(frozen=True)
class Completed:
    result: dict[str, Any] | None = None


@dataclass(frozen=True)
class GateBusy:
    """Admission: another job holds the account's gate (or Redis could not tell: ``reason``)."""

    reason: str = "account-gate"


@dataclass(frozen=True)
class AccountHeld:
    """Admission: an operator paused the job's account; it does not ask for the gate."""


@dataclass(frozen=True)
class Paused:
    """The body stopped and runs again at ``until_ms`` (a WB pause, a bucket wait, a lost lease)."""

    until_ms: int
    phase: str
    reason: str
    error: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class FailedPermanently:
    error: dict[str, Any]


@dataclass(frozen=True)
class Failed:
    error: dict[str, Any]
    retry_after_ms: int | None = None  # the next attempt waits at least this long (unscaled)


Outcome = Completed | GateBusy | AccountHeld | Paused | FailedPermanently | Failed


# -- what the decision needs to know -----------------------------------------------------


@dataclass(frozen=True)
class RunFacts:
    """The claimed run as the decision sees it."""

    attempt: int
    max_attempts: int
    tier: str
    enqueued_ms: int  # when its wait for the gate began: when it was due (a spread job's eta), else created
    gated: bool = False  # its job type takes the gate
    holds_gate: bool = False  # this run acquired it
    lost: bool = False  # this run lost its row or gate lease to another
    max_wait_ms: int | None = None  # scheduled + gated: give up waiting after this long
    waiting_since_ms: int | None = None  # when it first parked on the gate


@dataclass(frozen=True)
class Timings:
    poll_delay_ms: int  # a parked job looks at the gate again after this long
    pause_margin_ms: int  # a paused holder keeps the gate this much longer than its pause
    max_pause_ms: int  # a pause longer than this counts as a failed attempt
    delay_scale: float = 1.0  # every retry delay is multiplied by this

    @classmethod
    def from_settings(cls, settings: Any) -> Timings:
        return cls(
            poll_delay_ms=settings.gate_poll_delay_ms,
            pause_margin_ms=settings.gate_pause_margin_ms,
            max_pause_ms=settings.wb_max_pause_ms,
            delay_scale=settings.retry_delay_scale,
        )


# -- what to do ------------------------------------------------------------------------

Kind = Literal["complete", "park", "retry", "fail", "skip"]
GateAction = Literal["none", "release", "keep", "yield", "forget"]


@dataclass(frozen=True)
class GateEffect:
    """``keep``: lease = ``lease_ms``; ``yield``: hand over if a user job wants it, else keep."""

    action: GateAction = "none"
    lease_ms: int | None = None


NO_GATE = GateEffect()
RELEASE = GateEffect("release")


@dataclass(frozen=True)
class Transition:
    kind: Kind
    phase: str  # the progress phase stored on the row
    reason: str | None = None
    eta_ms: int | None = None  # park/retry: when the job is due again
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    gate: GateEffect = NO_GATE
    waiting_since_ms: int | None = None  # park on the gate: when the wait began

    @property
    def consumes_attempt(self) -> bool:
        return self.kind == "retry"


def decide(run: RunFacts, policy: RetryPolicy, outcome: Outcome, timings: Timings, now_ms: int) -> Transition:
    ours = run.holds_gate and not run.lost
    release = RELEASE if ours else NO_GATE

    if isinstance(outcome, Completed):
        return Transition("complete", P.COMPLETED, result=outcome.result, gate=release)

    if isinstance(outcome, GateBusy):
        if (
            run.tier == "scheduled"
            and run.max_wait_ms is not None
            and now_ms - run.enqueued_ms > run.max_wait_ms
        ):
            return Transition(
                "skip", P.COMPLETED, reason=SKIPPED["reason"], result=dict(SKIPPED), gate=GateEffect("forget")
            )
        return Transition(
            "park",
            P.WAITING_ACCOUNT,
            reason=outcome.reason,
            eta_ms=now_ms + timings.poll_delay_ms,
            waiting_since_ms=run.waiting_since_ms or now_ms,
        )

    if isinstance(outcome, AccountHeld):
        if run.tier == "scheduled":
            skipped = {"skipped": True, "reason": ACCOUNT_PAUSED}
            return Transition(
                "skip", P.COMPLETED, reason=ACCOUNT_PAUSED, result=skipped, gate=GateEffect("forget")
            )
        return Transition("park", P.PAUSED, reason=ACCOUNT_PAUSED, eta_ms=now_ms + timings.poll_delay_ms)

    if isinstance(outcome, Paused):
        pause_ms = max(0, outcome.until_ms - now_ms)
        if pause_ms > timings.max_pause_ms:
            # WB asks for an unreasonable wait: that is a failed attempt, not a pause.
            return _failed(run, policy, outcome.error or {"code": outcome.reason}, timings, now_ms, release)
        if not ours:
            gate = NO_GATE
        elif outcome.phase == P.RATE_LIMITED:
            # The holder keeps the account over the pause, so no other job spends its WB windows;
            # a scheduled holder hands it over here, and only here, when a user job wants it.
            lease = pause_ms + timings.pause_margin_ms
            gate = GateEffect("yield" if run.tier == "scheduled" else "keep", lease)
        else:
            gate = RELEASE
        return Transition("park", outcome.phase, reason=outcome.reason, eta_ms=outcome.until_ms, gate=gate)

    if isinstance(outcome, FailedPermanently):
        return Transition(
            "fail", P.FAILED, reason=outcome.error.get("code"), error=outcome.error, gate=release
        )

    return _failed(run, policy, outcome.error, timings, now_ms, release, outcome.retry_after_ms)


def _failed(
    run: RunFacts,
    policy: RetryPolicy,
    error: dict[str, Any],
    timings: Timings,
    now_ms: int,
    release: GateEffect,
    retry_after_ms: int | None = None,
) -> Transition:
    code = error.get("code")
    if run.attempt >= min(run.max_attempts, policy.attempts):
        return Transition("fail", P.FAILED, reason=code, error=error, gate=release)
    # The receiver's own word (Retry-After) is a real duration: it is not scaled.
    delay = max(round(policy.delay_ms(run.attempt) * timings.delay_scale), retry_after_ms or 0)
    return Transition("retry", P.RETRYING, reason=code, eta_ms=now_ms + delay, error=error, gate=release)
