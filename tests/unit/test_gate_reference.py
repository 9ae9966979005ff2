"""The gate's decision table, on the pure reference (no Redis).

Each test: given a state of the account's keys, when one operation runs,
then the result and the resulting keys.
"""

from __future__ import annotations

import uuid

import pytest

from gatehouse.gate import GateSpec, gate_keys, job_of, owner
from gatehouse.gate.reference import (
    EMPTY,
    TIER_SPAN,
    AcquireRequest,
    AcquireResult,
    ExtendRequest,
    ForgetRequest,
    GateState,
    HeartbeatRequest,
    ReleaseRequest,
    ReleaseResult,
    Waiter,
    YieldRequest,
    advance,
    evaluate_gate_acquire,
    evaluate_gate_extend,
    evaluate_gate_forget,
    evaluate_gate_heartbeat,
    evaluate_gate_release,
    evaluate_gate_yield,
    waiting_score,
)
from gatehouse.gate.vocabulary import released_key

USER = "import-user-feeds:u1"
USER2 = "import-user-report:u2"
SCHED = "digitization-sync:s1"
SCHED2 = "rnp-ads-sync:s2"

LEASE = 90_000
WANTED_TTL = 60_000
WAITING_TTL = 600_000


def acquire(owner: str, tier: str, *, first_wait_ms: int = 1_000, lease_ms: int = LEASE) -> AcquireRequest:
    return AcquireRequest(owner, tier, lease_ms, WANTED_TTL, WAITING_TTL, first_wait_ms)  # type: ignore[arg-type]


def held_by(owner: str, lease_ms_left: int = 30_000, **rest) -> GateState:
    return GateState(holder=owner, lease_ms_left=lease_ms_left, **rest)


def waiting(*entries: tuple[str, str, int], ttl: int = 100_000) -> dict:
    waiters = sorted(
        (Waiter(owner, waiting_score(tier, t)) for owner, tier, t in entries),  # type: ignore[arg-type]
        key=lambda w: (w.score, w.owner.encode()),
    )
    return {"waiting": tuple(waiters), "waiting_ms_left": ttl}


WANTED_BY_USER2 = {"wanted": USER2, "wanted_ms_left": 20_000}


# -- acquire ----------------------------------------------------------------------


def test_a_free_gate_is_acquired_by_a_user_job():
    result, state = evaluate_gate_acquire(EMPTY, acquire(USER, "user"))

    assert result == AcquireResult("acquired", USER, LEASE)
    assert state == GateState(holder=USER, lease_ms_left=LEASE)


def test_a_free_gate_is_acquired_by_a_scheduled_job_when_no_user_wants_it():
    result, state = evaluate_gate_acquire(EMPTY, acquire(SCHED, "scheduled"))

    assert result.decision == "acquired" and result.proceed
    assert state == GateState(holder=SCHED, lease_ms_left=LEASE)


def test_a_scheduled_job_is_deferred_from_a_free_gate_a_user_job_wants():
    given = GateState(**WANTED_BY_USER2)

    result, state = evaluate_gate_acquire(given, acquire(SCHED, "scheduled", first_wait_ms=7))

    assert result == AcquireResult("deferred", None, None) and not result.proceed
    assert state.holder is None
    assert state.waiting == (Waiter(SCHED, TIER_SPAN + 7),)
    assert state.waiting_ms_left == WAITING_TTL
    assert (state.wanted, state.wanted_ms_left) == (USER2, 20_000)


def test_a_user_job_takes_a_free_gate_even_when_another_user_wants_it():
    given = GateState(**WANTED_BY_USER2, **waiting((USER2, "user", 5)))

    result, state = evaluate_gate_acquire(given, acquire(USER, "user"))

    assert result.decision == "acquired"
    # USER2 still waits, so its marker stays.
    assert state.wanted == USER2 and state.waiting_owners == (USER2,)


def test_the_holder_reacquiring_is_reentrant_and_gets_a_fresh_lease():
    given = held_by(SCHED, lease_ms_left=5)

    result, state = evaluate_gate_acquire(given, acquire(SCHED, "scheduled", lease_ms=70_000))

    assert result == AcquireResult("reentrant", SCHED, 70_000)
    assert state == GateState(holder=SCHED, lease_ms_left=70_000)


def test_reentrant_holder_is_reentrant_even_when_a_user_wants_the_gate():
    given = held_by(SCHED, **WANTED_BY_USER2, **waiting((USER2, "user", 5)))

    result, state = evaluate_gate_acquire(given, acquire(SCHED, "scheduled"))

    assert result.decision == "reentrant"
    assert state.wanted == USER2 and state.waiting_owners == (USER2,)


def test_acquiring_takes_the_owner_out_of_the_waiting_set():
    given = GateState(**waiting((SCHED, "scheduled", 1), (SCHED2, "scheduled", 2)))

    _, state = evaluate_gate_acquire(given, acquire(SCHED, "scheduled"))

    assert state.waiting_owners == (SCHED2,)
    assert state.waiting_ms_left == 100_000  # untouched


def test_the_last_waiter_acquiring_leaves_no_waiting_key():
    given = GateState(**waiting((SCHED, "scheduled", 1)))

    _, state = evaluate_gate_acquire(given, acquire(SCHED, "scheduled"))

    assert state.waiting == () and state.waiting_ms_left is None


def test_a_busy_gate_parks_a_user_job_and_marks_the_gate_wanted():
    given = held_by(SCHED, lease_ms_left=12_345)

    result, state = evaluate_gate_acquire(given, acquire(USER, "user", first_wait_ms=42))

    assert result == AcquireResult("busy", SCHED, 12_345)
    assert state.holder == SCHED and state.lease_ms_left == 12_345
    assert state.waiting == (Waiter(USER, 42),) and state.waiting_ms_left == WAITING_TTL
    assert (state.wanted, state.wanted_ms_left) == (USER, WANTED_TTL)


def test_a_busy_gate_parks_a_scheduled_job_without_marking_it_wanted():
    given = held_by(USER)

    result, state = evaluate_gate_acquire(given, acquire(SCHED, "scheduled", first_wait_ms=42))

    assert result.decision == "busy"
    assert state.waiting == (Waiter(SCHED, TIER_SPAN + 42),)
    assert state.wanted is None


def test_a_user_job_refreshes_the_wanted_marker_at_each_poll_and_takes_it_over():
    given = held_by(SCHED, **WANTED_BY_USER2)

    _, state = evaluate_gate_acquire(given, acquire(USER, "user"))

    assert (state.wanted, state.wanted_ms_left) == (USER, WANTED_TTL)


def test_a_reparked_waiter_keeps_its_first_score_and_refreshes_the_set_ttl():
    given = held_by(SCHED, **waiting((USER, "user", 5), ttl=10))

    _, state = evaluate_gate_acquire(given, acquire(USER, "user", first_wait_ms=999))

    assert state.waiting == (Waiter(USER, 5),)
    assert state.waiting_ms_left == WAITING_TTL


def test_a_user_acquiring_clears_wanted_when_no_other_user_waits():
    given = GateState(
        wanted=USER, wanted_ms_left=5_000, **waiting((USER, "user", 1), (SCHED, "scheduled", 0))
    )

    result, state = evaluate_gate_acquire(given, acquire(USER, "user"))

    assert result.decision == "acquired"
    assert state.wanted is None and state.wanted_ms_left is None
    assert state.waiting_owners == (SCHED,)


def test_a_user_acquiring_hands_wanted_to_the_next_user_that_waits():
    # The marker stays (another user job still waits) and names that job, not the one now running.
    given = GateState(wanted=USER, wanted_ms_left=5_000, **waiting((USER, "user", 1), (USER2, "user", 2)))

    _, state = evaluate_gate_acquire(given, acquire(USER, "user"))

    assert (state.wanted, state.wanted_ms_left) == (USER2, 5_000)
    assert state.waiting_owners == (USER2,)


def test_a_reentrant_user_clears_wanted_when_no_other_user_waits():
    given = held_by(USER, wanted=USER, wanted_ms_left=5_000)

    result, state = evaluate_gate_acquire(given, acquire(USER, "user"))

    assert result.decision == "reentrant"
    assert state.wanted is None


def test_a_scheduled_acquire_never_clears_wanted():
    # The marker expired into a free gate for the scheduled job; a stale user entry may remain.
    given = held_by(SCHED, wanted=USER, wanted_ms_left=5_000)

    _, state = evaluate_gate_acquire(given, acquire(SCHED, "scheduled"))

    assert state.wanted == USER


# -- heartbeat and extend ---------------------------------------------------------


@pytest.mark.parametrize(
    ("evaluate", "request_type"),
    [(evaluate_gate_heartbeat, HeartbeatRequest), (evaluate_gate_extend, ExtendRequest)],
    ids=["heartbeat", "extend"],
)
def test_the_holder_renews_its_lease(evaluate, request_type):
    given = held_by(SCHED, lease_ms_left=3, **WANTED_BY_USER2)

    ok, state = evaluate(given, request_type(SCHED, 150_000))

    assert ok is True
    assert state == held_by(SCHED, lease_ms_left=150_000, **WANTED_BY_USER2)


@pytest.mark.parametrize(
    ("evaluate", "request_type"),
    [(evaluate_gate_heartbeat, HeartbeatRequest), (evaluate_gate_extend, ExtendRequest)],
    ids=["heartbeat", "extend"],
)
@pytest.mark.parametrize("given", [EMPTY, held_by(USER)], ids=["expired", "taken-over"])
def test_a_job_that_lost_its_lease_learns_it_and_changes_nothing(evaluate, request_type, given):
    ok, state = evaluate(given, request_type(SCHED, 150_000))

    assert ok is False
    assert state is given


# -- release ----------------------------------------------------------------------


def test_release_frees_the_gate_and_names_the_best_waiter_user_before_scheduled():
    given = held_by(SCHED, **waiting((SCHED2, "scheduled", 1), (USER2, "user", 900), (USER, "user", 800)))

    result, state = evaluate_gate_release(given, ReleaseRequest(SCHED))

    assert result == ReleaseResult(True, USER)  # user first, then the oldest of them
    assert state.holder is None and state.lease_ms_left is None
    assert state.waiting == given.waiting  # the waiter is woken, not dequeued


def test_release_names_the_oldest_scheduled_waiter_when_no_user_waits():
    given = held_by(USER, **waiting((SCHED2, "scheduled", 2), (SCHED, "scheduled", 1)))

    result, _ = evaluate_gate_release(given, ReleaseRequest(USER))

    assert result == ReleaseResult(True, SCHED)


def test_release_with_nobody_waiting_names_no_one():
    result, state = evaluate_gate_release(held_by(USER), ReleaseRequest(USER))

    assert result == ReleaseResult(True, None)
    assert state == EMPTY


@pytest.mark.parametrize(
    "given", [EMPTY, held_by(USER, **waiting((SCHED, "scheduled", 1)))], ids=["free", "held"]
)
def test_release_by_a_non_owner_does_nothing(given):
    result, state = evaluate_gate_release(given, ReleaseRequest(SCHED2))

    assert result == ReleaseResult(False, None)
    assert state is given


# -- yield ------------------------------------------------------------------------


def test_a_scheduled_holder_yields_when_a_user_wants_the_gate():
    given = held_by(SCHED, **WANTED_BY_USER2, **waiting((USER2, "user", 5), (SCHED2, "scheduled", 1)))

    result, state = evaluate_gate_yield(given, YieldRequest(SCHED))

    assert result == ReleaseResult(True, USER2)
    assert state.holder is None
    # The marker stays, so no scheduled job slips into the freed gate first.
    assert state.wanted == USER2
    assert state.waiting == given.waiting


def test_a_scheduled_holder_keeps_the_gate_when_nobody_wants_it():
    given = held_by(SCHED, **waiting((SCHED2, "scheduled", 1)))

    result, state = evaluate_gate_yield(given, YieldRequest(SCHED))

    assert result == ReleaseResult(False, None)
    assert state is given


def test_only_the_holder_can_yield():
    given = held_by(SCHED, **WANTED_BY_USER2)

    result, state = evaluate_gate_yield(given, YieldRequest(SCHED2))

    assert result == ReleaseResult(False, None)
    assert state is given


# -- forget -----------------------------------------------------------------------


def test_forget_takes_a_waiter_out_of_line():
    given = GateState(**waiting((USER, "user", 1), (SCHED, "scheduled", 1)))

    was_there, state = evaluate_gate_forget(given, ForgetRequest(USER))

    assert was_there is True
    assert state.waiting_owners == (SCHED,) and state.waiting_ms_left == 100_000


def test_forgetting_the_last_waiter_leaves_no_waiting_key():
    was_there, state = evaluate_gate_forget(GateState(**waiting((USER, "user", 1))), ForgetRequest(USER))

    assert was_there is True
    assert state == EMPTY


def test_forgetting_someone_not_waiting_changes_nothing():
    given = held_by(USER)

    was_there, state = evaluate_gate_forget(given, ForgetRequest(SCHED))

    assert was_there is False and state is given


# -- time, keys, scores, validation ----------------------------------------------


def test_advance_shrinks_every_ttl_and_drops_the_keys_that_run_out():
    given = held_by(
        USER, lease_ms_left=1_000, wanted=USER2, wanted_ms_left=999, **waiting((USER2, "user", 1))
    )

    state = advance(given, 999)

    assert state == held_by(USER, lease_ms_left=1, **waiting((USER2, "user", 1), ttl=100_000 - 999))
    assert advance(state, 1) == GateState(**waiting((USER2, "user", 1), ttl=100_000 - 1_000))


def test_ties_in_score_are_broken_by_member_bytes_as_redis_does():
    a = Waiter("b:1", 5)
    b = Waiter("a:2", 5)
    given = held_by(USER, waiting=(b, a), waiting_ms_left=1)

    assert given.best_waiter == "a:2"
    with pytest.raises(ValueError, match="Redis order"):
        GateState(waiting=(a, b), waiting_ms_left=1)


def test_scores_put_every_user_before_every_scheduled_job():
    assert waiting_score("user", TIER_SPAN - 1) < waiting_score("scheduled", 0)
    assert Waiter(SCHED, waiting_score("scheduled", 7)).tier == "scheduled"
    assert Waiter(SCHED, waiting_score("scheduled", 7)).first_wait_ms == 7
    assert Waiter(USER, waiting_score("user", 7)).tier == "user"


def test_the_account_keys_are_under_the_prefix_and_share_one_hash_tag():
    keys = gate_keys("gh", "4242")

    assert keys == ("gh:wb:gate:{4242}", "gh:wb:gate:{4242}:wanted", "gh:wb:gate:{4242}:waiting")
    with pytest.raises(ValueError):
        gate_keys("gh", "a}b")
    assert released_key("gh", "4242") == "gh:wb:gate:{4242}:released"  # the same slot as the others


def test_an_owner_is_its_queue_and_job_and_parses_back():
    job_id = uuid.uuid4()

    assert owner("wb-user", job_id) == f"wb-user:{job_id}"
    assert job_of(owner("wb:odd:queue", job_id)) == job_id


def test_a_gate_spec_is_typed_and_a_user_job_never_gives_up():
    assert GateSpec("scheduled", 5).max_wait_of({}) == 5
    assert GateSpec("scheduled", 5).max_wait_of({"maxWaitMs": 9}) == 9  # a schedule's override
    with pytest.raises(ValueError):
        GateSpec("admin")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        GateSpec("user", 1000)


@pytest.mark.parametrize(
    "bad",
    [
        dict(tier="admin"),
        dict(lease_ms=0),
        dict(wanted_ttl_ms=-1),
        dict(waiting_ttl_ms=1.5),
        dict(first_wait_ms=-1),
        dict(first_wait_ms=TIER_SPAN),
        dict(owner=""),
    ],
)
def test_a_malformed_acquire_is_refused_before_it_reaches_redis(bad):
    args = dict(owner=USER, tier="user", lease_ms=1, wanted_ttl_ms=1, waiting_ttl_ms=1, first_wait_ms=0) | bad
    with pytest.raises(ValueError):
        AcquireRequest(**args)
