"""The run decision, row by row: (run, policy, outcome) → transition and gate effect. No stores."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gatehouse import progress as P
from gatehouse.job_types import ONCE, WB_USER_RETRY, RetryPolicy
from gatehouse.run_decision import (
    ACCOUNT_PAUSED,
    NO_GATE,
    RELEASE,
    SKIPPED,
    AccountHeld,
    Completed,
    Failed,
    FailedPermanently,
    GateBusy,
    GateEffect,
    Paused,
    RunFacts,
    Timings,
    Transition,
    decide,
)

NOW = 1_800_000_000_000
TIMINGS = Timings(poll_delay_ms=15_000, pause_margin_ms=60_000, max_pause_ms=1_800_000)
USER = RunFacts(attempt=1, max_attempts=5, tier="user", enqueued_ms=NOW - 1_000, gated=True, holds_gate=True)
SCHEDULED = RunFacts(
    attempt=1, max_attempts=1, tier="scheduled", enqueued_ms=NOW - 1_000, gated=True, holds_gate=True,
    max_wait_ms=300_000,
)  # fmt: skip
UNGATED = RunFacts(attempt=1, max_attempts=1, tier="user", enqueued_ms=NOW - 1_000)
WB_DOWN = {"code": "wb-unavailable", "message": "WB failed"}


def test_completed_completes_and_releases_the_gate():
    t = decide(USER, WB_USER_RETRY, Completed({"rows": 3}), TIMINGS, NOW)

    assert t == Transition("complete", P.COMPLETED, result={"rows": 3}, gate=RELEASE)


def test_an_ungated_run_touches_no_gate_whatever_happens():
    for outcome in (
        Completed(),
        Failed(WB_DOWN),
        FailedPermanently(WB_DOWN),
        Paused(NOW + 5, P.RATE_LIMITED, "wb-429"),
    ):
        assert decide(UNGATED, ONCE, outcome, TIMINGS, NOW).gate == NO_GATE


def test_gate_busy_parks_for_the_poll_delay_without_an_attempt():
    waiting = replace(USER, holds_gate=False)

    t = decide(waiting, WB_USER_RETRY, GateBusy(), TIMINGS, NOW)

    assert t == Transition(
        "park", P.WAITING_ACCOUNT, reason="account-gate", eta_ms=NOW + 15_000, waiting_since_ms=NOW
    )
    assert not t.consumes_attempt


def test_a_held_account_parks_a_user_job_without_an_attempt_and_skips_a_scheduled_one():
    user = decide(replace(USER, holds_gate=False), WB_USER_RETRY, AccountHeld(), TIMINGS, NOW)
    scheduled = decide(replace(SCHEDULED, holds_gate=False), ONCE, AccountHeld(), TIMINGS, NOW)

    assert user == Transition("park", P.PAUSED, reason=ACCOUNT_PAUSED, eta_ms=NOW + 15_000)
    assert not user.consumes_attempt
    assert scheduled == Transition(
        "skip", P.COMPLETED, reason=ACCOUNT_PAUSED, result={"skipped": True, "reason": ACCOUNT_PAUSED},
        gate=GateEffect("forget"),
    )  # fmt: skip


def test_a_parked_job_keeps_the_moment_it_began_to_wait():
    waiting = replace(USER, holds_gate=False, waiting_since_ms=NOW - 40_000)

    assert decide(waiting, WB_USER_RETRY, GateBusy(), TIMINGS, NOW).waiting_since_ms == NOW - 40_000


def test_a_gate_redis_could_not_answer_parks_with_its_own_reason():
    t = decide(replace(USER, holds_gate=False), WB_USER_RETRY, GateBusy("gate-unreachable"), TIMINGS, NOW)

    assert (t.kind, t.reason, t.gate) == ("park", "gate-unreachable", NO_GATE)


def test_a_scheduled_job_past_its_max_wait_is_skipped_and_leaves_the_line():
    late = replace(SCHEDULED, holds_gate=False, enqueued_ms=NOW - 300_001)

    t = decide(late, ONCE, GateBusy(), TIMINGS, NOW)

    assert t == Transition(
        "skip", P.COMPLETED, reason="account-busy", result=SKIPPED, gate=GateEffect("forget")
    )


def test_a_scheduled_job_within_its_max_wait_parks():
    on_time = replace(SCHEDULED, holds_gate=False, enqueued_ms=NOW - 300_000)

    assert decide(on_time, ONCE, GateBusy(), TIMINGS, NOW).kind == "park"


def test_a_user_job_never_skips_however_long_it_waited():
    ancient = replace(USER, holds_gate=False, enqueued_ms=0, max_wait_ms=1)

    assert decide(ancient, WB_USER_RETRY, GateBusy(), TIMINGS, NOW).kind == "park"


def test_a_user_holder_paused_by_wb_keeps_the_gate_for_pause_plus_margin():
    t = decide(USER, WB_USER_RETRY, Paused(NOW + 120_000, P.RATE_LIMITED, "wb-429"), TIMINGS, NOW)

    assert t == Transition(
        "park", P.RATE_LIMITED, reason="wb-429", eta_ms=NOW + 120_000, gate=GateEffect("keep", 180_000)
    )
    assert not t.consumes_attempt


def test_a_scheduled_holder_paused_by_wb_yields_to_a_wanting_user_or_keeps_the_gate():
    t = decide(SCHEDULED, ONCE, Paused(NOW + 2_000, P.RATE_LIMITED, "bucket"), TIMINGS, NOW)

    assert (t.kind, t.eta_ms, t.gate) == ("park", NOW + 2_000, GateEffect("yield", 62_000))


def test_a_pause_longer_than_allowed_is_a_failed_attempt():
    too_long = Paused(NOW + 1_800_001, P.RATE_LIMITED, "wb-429", {"code": "wb-429", "message": "429"})

    t = decide(USER, WB_USER_RETRY, too_long, TIMINGS, NOW)

    assert (t.kind, t.reason, t.eta_ms, t.gate) == ("retry", "wb-429", NOW + 60_000, RELEASE)
    assert t.consumes_attempt


def test_a_run_that_lost_its_lease_parks_and_leaves_the_gate_to_its_successor():
    lost = replace(USER, lost=True)

    t = decide(lost, WB_USER_RETRY, Paused(NOW + 15_000, P.WAITING_ACCOUNT, "lease-lost"), TIMINGS, NOW)

    assert (t.kind, t.phase, t.gate) == ("park", P.WAITING_ACCOUNT, NO_GATE)


@pytest.mark.parametrize(
    "outcome",
    [Completed(), Failed(WB_DOWN), FailedPermanently(WB_DOWN)],
    ids=["completed", "failed", "permanent"],
)
def test_a_run_that_lost_its_lease_never_releases_what_its_successor_holds(outcome):
    assert decide(replace(USER, lost=True), WB_USER_RETRY, outcome, TIMINGS, NOW).gate == NO_GATE


def test_a_pause_that_is_not_a_rate_limit_releases_the_gate():
    t = decide(USER, WB_USER_RETRY, Paused(NOW + 5_000, P.WAITING_ACCOUNT, "other"), TIMINGS, NOW)

    assert (t.kind, t.gate) == ("park", RELEASE)


def test_a_permanent_failure_fails_at_once_with_attempts_left():
    error = {"code": "wb-unauthorized", "message": "401"}

    t = decide(USER, WB_USER_RETRY, FailedPermanently(error), TIMINGS, NOW)

    assert t == Transition("fail", P.FAILED, reason="wb-unauthorized", error=error, gate=RELEASE)


@pytest.mark.parametrize(("attempt", "delay"), [(1, 60_000), (2, 120_000), (3, 240_000), (4, 480_000)])
def test_a_failure_with_attempts_left_retries_on_the_ladder(attempt, delay):
    t = decide(replace(USER, attempt=attempt), WB_USER_RETRY, Failed(WB_DOWN), TIMINGS, NOW)

    assert t == Transition(
        "retry", P.RETRYING, reason="wb-unavailable", eta_ms=NOW + delay, error=WB_DOWN, gate=RELEASE
    )


def test_the_last_attempt_fails():
    t = decide(replace(USER, attempt=5), WB_USER_RETRY, Failed(WB_DOWN), TIMINGS, NOW)

    assert (t.kind, t.phase, t.error, t.gate) == ("fail", P.FAILED, WB_DOWN, RELEASE)


def test_a_job_type_without_retries_fails_on_its_first_failure():
    assert decide(UNGATED, ONCE, Failed(WB_DOWN), TIMINGS, NOW).kind == "fail"


def test_an_explicit_schedule_and_the_delay_scale_set_the_retry_eta():
    policy = RetryPolicy.schedule(5_000, 300_000)
    run = replace(UNGATED, max_attempts=3, attempt=2)

    t = decide(run, policy, Failed(WB_DOWN), replace(TIMINGS, delay_scale=0.001), NOW)

    assert (t.kind, t.eta_ms) == ("retry", NOW + 300)


@pytest.mark.parametrize(
    ("retry_after_ms", "eta"), [(2_000, NOW + 2_000), (100, NOW + 300), (None, NOW + 300)]
)
def test_a_retry_after_is_a_lower_bound_on_the_scaled_delay_and_is_not_scaled(retry_after_ms, eta):
    policy = RetryPolicy.schedule(5_000, 300_000)
    run = replace(UNGATED, max_attempts=3, attempt=2)

    t = decide(run, policy, Failed(WB_DOWN, retry_after_ms), replace(TIMINGS, delay_scale=0.001), NOW)

    assert (t.kind, t.eta_ms) == ("retry", eta)


def test_a_retry_after_on_the_last_attempt_still_fails():
    policy = RetryPolicy.schedule(5_000)
    t = decide(replace(UNGATED, max_attempts=2, attempt=2), policy, Failed(WB_DOWN, 2_000), TIMINGS, NOW)
    assert t.kind == "fail"
