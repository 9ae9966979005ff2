"""RedisGate on real Redis: the keys it writes, the hand-over, and the client it works with."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import redis
from redis.crc import key_slot

from gatehouse.bucket import RedisTokenBucket, bucket_key
from gatehouse.gate import AcquireResult, GateState, RedisGate, ReleaseResult, Waiter, gate_keys
from gatehouse.gate.reference import TIER_SPAN
from gatehouse.gate.vocabulary import released_key

PREFIX = "gatehouse-test"
A = "4242"
USER = "import-user-feeds:u1"
USER2 = "import-user-report:u2"
SCHED = "digitization-sync:s1"
SCHED2 = "rnp-ads-sync:s2"
T0 = 1_700_000_000_000
TIMINGS = dict(lease_ms=90_000, wanted_ttl_ms=60_000, waiting_ttl_ms=300_000)


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url)
    client.flushdb()
    yield client
    client.flushdb()
    client.close()


@pytest.fixture
def gate(client: redis.Redis) -> RedisGate:
    return RedisGate(client, prefix=PREFIX)


def acquire(
    gate: RedisGate, owner: str, tier: str, first_wait_ms: int = T0, account: str = A
) -> AcquireResult:
    return gate.acquire(account, owner, tier=tier, first_wait_ms=first_wait_ms, **TIMINGS)  # type: ignore[arg-type]


def test_constructing_the_loaders_touches_no_redis():
    nowhere = redis.Redis(host="127.0.0.1", port=1, socket_connect_timeout=0.1)

    RedisGate(nowhere, prefix=PREFIX)
    RedisTokenBucket(nowhere, prefix=PREFIX)  # neither raises: nothing connected


def test_all_keys_of_an_account_share_one_cluster_slot():
    slots = {key_slot(key.encode()) for key in gate_keys(PREFIX, A)} | {
        key_slot(bucket_key(PREFIX, A, "statistics").encode())
    }

    assert slots == {key_slot(A.encode())}


def test_acquire_writes_the_documented_keys(client, gate):
    keys = gate_keys(PREFIX, A)

    assert acquire(gate, SCHED, "scheduled") == AcquireResult("acquired", SCHED, 90_000)
    busy = acquire(gate, USER, "user", first_wait_ms=T0 + 5)
    acquire(gate, SCHED2, "scheduled", first_wait_ms=T0 + 1)

    assert busy.decision == "busy" and busy.holder == SCHED
    assert 89_000 < busy.lease_ms_left <= 90_000  # type: ignore[operator]
    assert client.get(keys.gate) == SCHED.encode()
    assert 89_000 < client.pttl(keys.gate) <= 90_000
    assert client.get(keys.wanted) == USER.encode()
    assert 59_000 < client.pttl(keys.wanted) <= 60_000
    assert client.zrange(keys.waiting, 0, -1, withscores=True) == [
        (USER.encode(), float(T0 + 5)),
        (SCHED2.encode(), float(TIER_SPAN + T0 + 1)),
    ]
    assert 299_000 < client.pttl(keys.waiting) <= 300_000


def test_release_is_compare_and_delete_and_names_the_best_waiter(client, gate):
    acquire(gate, SCHED, "scheduled")
    acquire(gate, SCHED2, "scheduled", first_wait_ms=T0 - 10)
    acquire(gate, USER2, "user", first_wait_ms=T0 + 2)
    acquire(gate, USER, "user", first_wait_ms=T0 + 1)

    assert gate.release(A, SCHED2) == ReleaseResult(False, None)
    assert client.get(gate_keys(PREFIX, A).gate) == SCHED.encode()
    assert gate.release(A, SCHED) == ReleaseResult(True, USER)
    assert client.exists(gate_keys(PREFIX, A).gate) == 0
    # The woken user takes it; the other user still waits, so the marker stays and names that one,
    # with the TTL it had (only the name changes).
    ttl = gate.inspect(A).wanted_ms_left
    assert acquire(gate, USER, "user").decision == "acquired"
    state = gate.inspect(A)
    assert (state.holder, state.wanted) == (USER, USER2)
    assert 0 < state.wanted_ms_left <= ttl
    assert acquire(gate, SCHED2, "scheduled").decision == "busy"


def test_a_scheduled_waiter_at_first_wait_zero_is_not_a_user(gate):
    # Score exactly 10**13 is the first scheduled score: it must not keep the marker alive.
    acquire(gate, SCHED, "scheduled")
    acquire(gate, SCHED2, "scheduled", first_wait_ms=0)
    acquire(gate, USER, "user")
    gate.release(A, SCHED)

    acquire(gate, USER, "user")

    assert gate.inspect(A).wanted is None


def test_a_wanted_gate_is_handed_over_at_the_scheduled_owners_pause(gate):
    acquire(gate, SCHED, "scheduled")
    assert gate.yield_if_wanted(A, SCHED) == ReleaseResult(False, None)  # nobody wants it: keep going
    assert gate.extend(A, SCHED, lease_ms=180_000) is True

    acquire(gate, USER, "user")
    assert gate.yield_if_wanted(A, SCHED) == ReleaseResult(True, USER)

    # The freed gate is kept for the user job: a scheduled one is deferred.
    assert acquire(gate, SCHED2, "scheduled").decision == "deferred"
    assert acquire(gate, USER, "user").decision == "acquired"
    assert acquire(gate, SCHED, "scheduled").decision == "busy"
    assert gate.heartbeat(A, SCHED, lease_ms=90_000) is False


def test_a_release_to_a_waiter_marks_its_moment_for_the_one_who_takes_the_gate(client, gate):
    # Given a holder with a user job parked behind it
    acquire(gate, SCHED, "scheduled")
    acquire(gate, USER, "user")
    before = int(time.time() * 1000)

    # When the holder releases (its best waiter is to be woken) and the waiter takes the gate
    gate.release(A, SCHED)
    acquire(gate, USER, "user")

    # Then the release's moment is under the gate's keys, for at most a lease, and is read once
    assert 0 < client.pttl(released_key(PREFIX, A)) <= 90_000
    assert before <= gate.handed_off(A) <= int(time.time() * 1000)  # type: ignore[operator]
    assert gate.handed_off(A) is None


def test_a_yield_to_a_waiter_is_marked_too_and_a_release_with_nobody_in_line_is_not(gate):
    acquire(gate, SCHED, "scheduled")
    acquire(gate, USER, "user")
    assert gate.yield_if_wanted(A, SCHED).released
    assert gate.handed_off(A) is not None

    acquire(gate, USER, "user")
    gate.release(A, USER)
    assert gate.handed_off(A) is None


def test_inspect_shows_the_holder_the_marker_and_the_line(gate):
    assert gate.inspect(A) == GateState()
    acquire(gate, SCHED, "scheduled")
    acquire(gate, SCHED2, "scheduled", first_wait_ms=7)
    acquire(gate, USER, "user", first_wait_ms=9)

    state = gate.inspect(A)

    assert (state.holder, state.wanted, state.waiting_owners) == (SCHED, USER, (USER, SCHED2))
    assert state.waiting == (Waiter(USER, 9), Waiter(SCHED2, TIER_SPAN + 7))
    assert state.waiting[1].tier == "scheduled" and state.waiting[1].first_wait_ms == 7
    assert 0 < state.lease_ms_left <= 90_000  # type: ignore[operator]
    assert gate.forget(A, SCHED2) is True
    assert gate.forget(A, SCHED2) is False
    assert gate.inspect(A).waiting_owners == (USER,)
    # A forgotten user job (given up, finished, cancelled) no longer wants the gate either
    assert gate.forget(A, USER) is True
    assert (gate.inspect(A).wanted, gate.inspect(A).waiting_owners) == (None, ())


def test_accounts_do_not_share_a_gate(gate):
    acquire(gate, SCHED, "scheduled", account="1")

    assert acquire(gate, USER, "user", account="2").decision == "acquired"
    assert gate.inspect("1").wanted is None


def test_a_decoding_client_gets_the_same_results(redis_url, client):
    gate = RedisGate(redis.Redis.from_url(redis_url, decode_responses=True), prefix=PREFIX)

    acquire(gate, SCHED, "scheduled")
    busy = acquire(gate, "очередь:задача-1", "user")

    assert (busy.decision, busy.holder) == ("busy", SCHED)
    assert gate.release(A, SCHED) == ReleaseResult(True, "очередь:задача-1")
    assert gate.inspect(A).waiting_owners == ("очередь:задача-1",)


def test_a_malformed_call_never_reaches_redis():
    gate = RedisGate(redis.Redis(host="127.0.0.1", port=1, socket_connect_timeout=0.1), prefix=PREFIX)

    with pytest.raises(ValueError):
        gate.acquire(A, USER, tier="admin", first_wait_ms=T0, **TIMINGS)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        gate.heartbeat("a{b", USER, lease_ms=1)
    with pytest.raises(ValueError):
        gate.extend(A, USER, lease_ms=0)
