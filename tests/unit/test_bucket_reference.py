"""The token bucket's rule, on the pure reference (no Redis)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gatehouse.bucket.reference import (
    IDLE_GRACE_MS,
    BucketState,
    TakeRequest,
    TakeResult,
    bucket_key,
    evaluate_bucket_take,
)

NOW = 1_700_000_000_000
# 5 tokens of burst, 1 token per 2 s.
PARAMS = dict(burst=5, limit=1, period_ms=2_000)


def take(now_ms: int, cost: int = 1, **params) -> TakeRequest:
    return TakeRequest(now_ms=now_ms, cost=cost, **(PARAMS | params))


def test_a_missing_bucket_is_full():
    result, state = evaluate_bucket_take(None, take(NOW))

    assert result == TakeResult(0) and result.granted
    assert state == BucketState(tokens=4.0, ts_ms=NOW, ttl_ms=2_000 + IDLE_GRACE_MS)
    assert state.stored_tokens == "4.000000"


def test_tokens_refill_in_proportion_to_the_time_passed():
    given_state = BucketState(tokens=0.0, ts_ms=NOW, ttl_ms=1)

    result, state = evaluate_bucket_take(given_state, take(NOW + 3_000))

    assert result.granted
    assert state.tokens == 0.5 and state.ts_ms == NOW + 3_000


def test_the_refill_stops_at_burst():
    given_state = BucketState(tokens=4.0, ts_ms=NOW, ttl_ms=1)

    _, state = evaluate_bucket_take(given_state, take(NOW + 3_600_000))

    assert state.tokens == 4.0


def test_a_take_without_enough_tokens_takes_nothing_and_says_how_long_to_wait():
    given_state = BucketState(tokens=0.25, ts_ms=NOW, ttl_ms=1)

    result, state = evaluate_bucket_take(given_state, take(NOW + 500))

    # 0.25 + 500 ms * 0.0005 = 0.5 tokens; 0.5 more need 1000 ms.
    assert result == TakeResult(1_000) and not result.granted
    assert state is given_state


def test_a_refused_take_rounds_the_wait_up_to_a_whole_millisecond():
    given_state = BucketState(tokens=0.0, ts_ms=NOW, ttl_ms=1)

    result, _ = evaluate_bucket_take(given_state, take(NOW, limit=3, period_ms=1_000))

    assert result.wait_ms == 334  # 1 / 0.003 = 333.3…


def test_a_cost_above_one_takes_that_many_tokens_or_none():
    given_state = BucketState(tokens=2.0, ts_ms=NOW, ttl_ms=1)

    assert evaluate_bucket_take(given_state, take(NOW, cost=3))[0] == TakeResult(2_000)
    result, state = evaluate_bucket_take(given_state, take(NOW, cost=2))
    assert result.granted and state.tokens == 0.0


def test_an_earlier_clock_refills_nothing_and_does_not_move_ts_back():
    given_state = BucketState(tokens=3.0, ts_ms=NOW, ttl_ms=1)

    result, state = evaluate_bucket_take(given_state, take(NOW - 60_000))

    assert result.granted
    assert state.tokens == 2.0 and state.ts_ms == NOW


def test_the_key_lives_until_the_bucket_would_be_full_again_plus_a_grace():
    given_state = BucketState(tokens=1.0, ts_ms=NOW, ttl_ms=1)

    _, state = evaluate_bucket_take(given_state, take(NOW))

    assert state.tokens == 0.0
    assert state.ttl_ms == 5 * 2_000 + IDLE_GRACE_MS


def test_the_bucket_key_is_under_the_prefix_and_tagged_with_the_account():
    assert bucket_key("gh", "4242", "statistics") == "gh:wb:bucket:{4242}:statistics"
    with pytest.raises(ValueError):
        bucket_key("gh", "{x", "statistics")


@pytest.mark.parametrize(
    "bad", [dict(burst=0), dict(limit=-1), dict(period_ms=0), dict(cost=0), dict(cost=6)]
)
def test_a_malformed_take_is_refused(bad):
    with pytest.raises(ValueError):
        TakeRequest(**(dict(now_ms=NOW, cost=1) | PARAMS | bad))


params = st.fixed_dictionaries(
    {
        "burst": st.integers(1, 1_000),
        "limit": st.integers(1, 1_000),
        "period_ms": st.integers(1, 86_400_000),
    }
)


@settings(max_examples=300, deadline=None)
@given(params=params, history=st.lists(st.integers(0, 600_000), min_size=1, max_size=8), data=st.data())
def test_the_key_expiring_changes_nothing(params, history, data):
    """Expiry is harmless: at the key's expiry the stored bucket acts exactly like a missing one."""
    state, now = None, NOW
    for dt in history:
        now += dt
        cost = data.draw(st.integers(1, params["burst"]))
        _, state = evaluate_bucket_take(state, TakeRequest(now_ms=now, cost=cost, **params))
    assert state is not None
    expiry = state.ts_ms + state.ttl_ms
    later = expiry + data.draw(st.integers(0, 10_000_000))
    cost = data.draw(st.integers(1, params["burst"]))

    request = TakeRequest(now_ms=later, cost=cost, **params)
    assert evaluate_bucket_take(state, request) == evaluate_bucket_take(None, request)


@settings(max_examples=300, deadline=None)
@given(
    params=params,
    tokens=st.integers(0, 1_000_000_000).map(lambda n: n / 1_000_000),
    dt=st.integers(0, 10_000_000),
)
def test_a_refused_take_succeeds_once_its_wait_has_passed(params, tokens, dt):
    state = BucketState(tokens=min(tokens, params["burst"]), ts_ms=NOW, ttl_ms=1)
    request = TakeRequest(now_ms=NOW + dt, **params)

    result, _ = evaluate_bucket_take(state, request)

    if not result.granted:
        retry = TakeRequest(now_ms=NOW + dt + result.wait_ms, **params)
        assert evaluate_bucket_take(state, retry)[0].granted
