"""The Lua token bucket equals its pure reference: generated takes run on both, side by side.

Each example seeds arbitrary bucket hashes, then runs a sequence of takes
(several accounts and WB buckets, clocks that move forward, stand still or
step back a little, costs above one, parameters that change) against
``evaluate_bucket_take`` and ``RedisTokenBucket`` (``take.lua`` on real
Redis). Time is the explicit ``now_ms``, so the hash fields must be equal to
the byte; the key's TTL must be what the reference set, less the real time
since the example began.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import pytest
import redis
from hypothesis import given, settings
from hypothesis import strategies as st

from gatehouse.bucket import RedisTokenBucket
from gatehouse.bucket.reference import BucketState, TakeRequest, bucket_key, evaluate_bucket_take

PREFIX = "gatehouse-test"
ACCOUNTS = ("1001", "кабинет-2")
BUCKETS = ("statistics", "content", "finance")
START_MS = 1_700_000_000_000
CLOCK_SLACK_MS = 50  # millisecond truncation of PEXPIRE and PTTL, beyond the measured real time

# WB-like limits, plus anything.
PARAMS = st.one_of(
    st.sampled_from(
        [
            dict(burst=1, limit=1, period_ms=60_000),
            dict(burst=5, limit=1, period_ms=6_000),
            dict(burst=10, limit=100, period_ms=60_000),
            dict(burst=3, limit=3, period_ms=1_000),
        ]
    ),
    st.fixed_dictionaries(
        {"burst": st.integers(1, 50), "limit": st.integers(1, 1_000), "period_ms": st.integers(1, 3_600_000)}
    ),
)


@dataclass(frozen=True)
class Take:
    account: str
    bucket: str
    dt_ms: int  # the shared clock moves by this much first
    skew_ms: int  # this caller's clock is off by this much (another worker)
    params: dict
    cost: int


@st.composite
def takes(draw: st.DrawFn, params_of: dict[tuple[str, str], dict]) -> Take:
    account, bucket = draw(st.sampled_from(ACCOUNTS)), draw(st.sampled_from(BUCKETS))
    # Mostly the bucket's own parameters; now and then a reconfigured one.
    params = draw(PARAMS) if draw(st.integers(0, 9)) == 0 else params_of[account, bucket]
    return Take(
        account=account,
        bucket=bucket,
        dt_ms=draw(st.one_of(st.just(0), st.integers(0, 2_000), st.integers(0, 600_000))),
        skew_ms=draw(st.one_of(st.just(0), st.integers(-5_000, 5_000))),
        params=params,
        cost=draw(st.integers(1, params["burst"])),
    )


@st.composite
def seeded(draw: st.DrawFn, params: dict) -> BucketState | None:
    """Any hash the key may hold: six-decimal tokens up to (a little over) burst, a ts around the start."""
    if draw(st.booleans()):
        return None
    micro = draw(st.integers(0, (params["burst"] + 1) * 1_000_000))
    return BucketState(
        tokens=micro / 1_000_000,
        ts_ms=START_MS + draw(st.integers(-600_000, 600_000)),
        ttl_ms=draw(st.integers(2_000, 120_000)),
    )


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[dict, dict, list[Take]]:
    keys = [(a, b) for a in ACCOUNTS for b in BUCKETS]
    params_of = {key: draw(PARAMS) for key in keys}
    seeds = {key: draw(seeded(params_of[key])) for key in keys}
    return params_of, seeds, draw(st.lists(takes(params_of), min_size=1, max_size=30))


def read(client: redis.Redis, key: str) -> tuple[dict[bytes, bytes], int]:
    pipe = client.pipeline(transaction=True)
    pipe.hgetall(key)
    pipe.pttl(key)
    fields, ttl = pipe.execute()
    return fields, ttl


@pytest.fixture(scope="module")
def client(redis_url: str):
    client = redis.Redis.from_url(redis_url)
    yield client
    client.flushdb()
    client.close()


@settings(max_examples=300, deadline=None)
@given(scenario=scenarios())
def test_the_lua_bucket_equals_the_reference(client: redis.Redis, scenario) -> None:
    _, seeds, ops = scenario
    client.flushdb()
    started = time.monotonic()
    buckets = RedisTokenBucket(client, prefix=PREFIX)
    ref: dict[tuple[str, str], BucketState | None] = {}
    for (account, bucket), state in seeds.items():
        ref[account, bucket] = state
        if state is not None:
            key = bucket_key(PREFIX, account, bucket)
            client.hset(key, mapping={"tokens": state.stored_tokens, "ts": str(state.ts_ms)})
            client.pexpire(key, state.ttl_ms)

    clock = START_MS
    for op in ops:
        clock += op.dt_ms
        now_ms = clock + op.skew_ms
        req = TakeRequest(now_ms=now_ms, cost=op.cost, **op.params)
        expected, ref[op.account, op.bucket] = evaluate_bucket_take(ref[op.account, op.bucket], req)

        wait_ms = buckets.take(op.account, op.bucket, now_ms=now_ms, cost=op.cost, **op.params)

        assert wait_ms == expected.wait_ms, op
        state = ref[op.account, op.bucket]
        fields, ttl = read(client, bucket_key(PREFIX, op.account, op.bucket))
        if state is None:
            assert (fields, ttl) == ({}, -2), op
            continue
        assert fields == {b"tokens": state.stored_tokens.encode(), b"ts": str(state.ts_ms).encode()}, op
        drift = int((time.monotonic() - started) * 1000) + CLOCK_SLACK_MS
        assert state.ttl_ms - drift <= ttl <= state.ttl_ms + 1, (op, state, ttl)


def test_the_loader_takes_and_refuses_like_the_reference(client: redis.Redis) -> None:
    client.flushdb()
    buckets = RedisTokenBucket(client, prefix=PREFIX)
    params = dict(burst=2, limit=1, period_ms=1_000)

    waits = [buckets.take("1001", "statistics", now_ms=START_MS, **params) for _ in range(3)]
    later = buckets.take("1001", "statistics", now_ms=START_MS + 250, **params)

    assert waits == [0, 0, 1_000]
    assert later == 750
    assert client.hgetall(bucket_key(PREFIX, "1001", "statistics")) == {
        b"tokens": b"0.000000",
        b"ts": str(START_MS).encode(),
    }
    # Another bucket of the account, and another account, are their own buckets.
    assert buckets.take("1001", "content", now_ms=START_MS, **params) == 0
    assert buckets.take("1002", "statistics", now_ms=START_MS, **params) == 0
