"""The Lua gate equals its pure reference: generated operations run on both, side by side.

A hypothesis state machine seeds arbitrary key states for a few accounts,
then runs acquires (user and scheduled owners), heartbeats, extends,
releases, yields, forgets and "time passes by dt" against
``gatehouse.gate.reference`` (pure state) and ``RedisGate`` (the Lua on real
Redis). After every step the results and the resulting keys must be equal:
values, waiting members and scores, and TTLs.

Time: the reference moves by ``advance(state, dt)``; on Redis the harness
does the same arithmetic to each key's PTTL (DEL when it runs out, else
PEXPIRE to the rest). Redis TTLs also shrink in real time while an example
runs, so a Redis TTL may be below the reference's by at most the real time
since the example began (``drift_ms``). Generated TTLs are 5–120 s, and a
generated dt is nudged off the boundary of any key's TTL, so that real time
can never decide whether a key survives.
"""

from __future__ import annotations

import time

import redis
from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule, run_state_machine_as_test

from gatehouse.gate import RedisGate, gate_keys
from gatehouse.gate.reference import (
    EMPTY,
    TIER_SPAN,
    AcquireRequest,
    ExtendRequest,
    ForgetRequest,
    GateState,
    HeartbeatRequest,
    ReleaseRequest,
    Tier,
    Waiter,
    YieldRequest,
    advance,
    evaluate_gate_acquire,
    evaluate_gate_extend,
    evaluate_gate_forget,
    evaluate_gate_heartbeat,
    evaluate_gate_release,
    evaluate_gate_yield,
)

PREFIX = "gatehouse-test"
ACCOUNTS = ("1001", "1002", "кабинет-3")
OWNERS: dict[str, Tier] = {
    "import-user-feeds:u1": "user",
    "import-user-report:u2": "user",
    "autobidder-sync-user:задача-3": "user",
    "digitization-sync:s1": "scheduled",
    "rnp-ads-sync:s2": "scheduled",
    "rnp-finance-sync:s3": "scheduled",
}
NAMES = sorted(OWNERS)
FOREIGN = "catalog-sync:x9"  # a holder outside the generated owners
# Resolved when the rule runs (to the holder, else the best waiter), so owner-only operations hit often.
HOLDER = "<the account's holder>"

# Real time a key that survives a time step may still lose before the example ends.
SURVIVAL_MARGIN_MS = 3_000
# PTTL is whole milliseconds of an absolute expiry: one ms of rounding either way.
ROUNDING_MS = 1
# Beyond the measured real time: millisecond truncation of each SET/PEXPIRE and PTTL, a few ms at most.
CLOCK_SLACK_MS = 50

accounts = st.sampled_from(ACCOUNTS)
owners = st.sampled_from(NAMES)
owners_or_holder = st.one_of(st.just(HOLDER), owners)
ttls = st.integers(5_000, 120_000)
first_waits = st.one_of(
    st.sampled_from([0, 1, 2, 1_700_000_000_000, TIER_SPAN - 1]), st.integers(0, TIER_SPAN - 1)
)
dts = st.one_of(st.integers(0, 5_000), st.integers(0, 150_000))
scores = st.one_of(
    st.sampled_from([0, 5, TIER_SPAN - 1, TIER_SPAN, TIER_SPAN + 5]), st.integers(0, 2 * TIER_SPAN - 1)
)


@st.composite
def gate_states(draw: st.DrawFn) -> GateState:
    """Any state the keys can be in, including ones the rules do not produce (a holder that also waits)."""
    holder = draw(st.none() | st.sampled_from([*NAMES, FOREIGN]))
    wanted = draw(st.none() | st.sampled_from(NAMES))
    entries = draw(st.dictionaries(owners, scores, max_size=4))
    waiting = tuple(
        sorted((Waiter(o, s) for o, s in entries.items()), key=lambda w: (w.score, w.owner.encode()))
    )
    return GateState(
        holder=holder,
        lease_ms_left=None if holder is None else draw(ttls),
        wanted=wanted,
        wanted_ms_left=None if wanted is None else draw(ttls),
        waiting=waiting,
        waiting_ms_left=draw(ttls) if waiting else None,
    )


def write(client: redis.Redis, account: str, state: GateState) -> None:
    keys = gate_keys(PREFIX, account)
    if state.holder is not None:
        client.set(keys.gate, state.holder, px=state.lease_ms_left)
    if state.wanted is not None:
        client.set(keys.wanted, state.wanted, px=state.wanted_ms_left)
    if state.waiting:
        client.zadd(keys.waiting, {w.owner: w.score for w in state.waiting})
        client.pexpire(keys.waiting, state.waiting_ms_left)  # type: ignore[arg-type]


def assert_ttl(ref: int | None, real: int | None, drift_ms: int, what: str) -> None:
    if ref is None or real is None:
        assert ref == real, f"{what}: reference TTL {ref}, Redis TTL {real}"
        return
    assert ref - drift_ms <= real <= ref + ROUNDING_MS, f"{what}: reference TTL {ref}, Redis TTL {real}"


def assert_same(ref: GateState, real: GateState, drift_ms: int, account: str) -> None:
    assert (real.holder, real.wanted, real.waiting) == (ref.holder, ref.wanted, ref.waiting), account
    assert_ttl(ref.lease_ms_left, real.lease_ms_left, drift_ms, f"{account} lease")
    assert_ttl(ref.wanted_ms_left, real.wanted_ms_left, drift_ms, f"{account} wanted")
    assert_ttl(ref.waiting_ms_left, real.waiting_ms_left, drift_ms, f"{account} waiting")


class GateMachine(RuleBasedStateMachine):
    client: redis.Redis  # set by the test

    def __init__(self) -> None:
        super().__init__()
        self.client.flushdb()
        self.gate = RedisGate(self.client, prefix=PREFIX)
        self.ref: dict[str, GateState] = dict.fromkeys(ACCOUNTS, EMPTY)
        self.started = time.monotonic()
        self.time_steps = 0

    def drift_ms(self) -> int:
        """How far Redis TTLs may have run ahead of the reference.

        The real time of this example, Redis' clock slack, and for every time
        step the rounding of its PTTL-then-PEXPIRE (each may lose a millisecond).
        """
        elapsed = int((time.monotonic() - self.started) * 1000)
        return elapsed + CLOCK_SLACK_MS + 2 * ROUNDING_MS * (self.time_steps + 1)

    def resolve(self, account: str, who: str) -> str:
        if who != HOLDER:
            return who
        state = self.ref[account]
        # A free gate: its best waiter, so that wake-ups (and deferrals) happen often.
        return state.holder or state.best_waiter or "digitization-sync:s1"

    @initialize(states=st.lists(gate_states(), min_size=len(ACCOUNTS), max_size=len(ACCOUNTS)))
    def seed(self, states: list[GateState]) -> None:
        for account, state in zip(ACCOUNTS, states, strict=True):
            write(self.client, account, state)
            self.ref[account] = state

    @rule(
        account=accounts,
        who=owners_or_holder,
        lease_ms=ttls,
        wanted_ttl_ms=ttls,
        waiting_ttl_ms=ttls,
        first_wait_ms=first_waits,
    )
    def acquire(
        self,
        account: str,
        who: str,
        lease_ms: int,
        wanted_ttl_ms: int,
        waiting_ttl_ms: int,
        first_wait_ms: int,
    ) -> None:
        owner = self.resolve(account, who)
        tier = OWNERS.get(owner, "scheduled")
        req = AcquireRequest(owner, tier, lease_ms, wanted_ttl_ms, waiting_ttl_ms, first_wait_ms)
        expected, self.ref[account] = evaluate_gate_acquire(self.ref[account], req)
        got = self.gate.acquire(
            account,
            owner,
            tier=tier,
            lease_ms=lease_ms,
            wanted_ttl_ms=wanted_ttl_ms,
            waiting_ttl_ms=waiting_ttl_ms,
            first_wait_ms=first_wait_ms,
        )
        event(f"acquire by {tier}: {expected.decision}")
        assert (got.decision, got.holder) == (expected.decision, expected.holder)
        assert_ttl(expected.lease_ms_left, got.lease_ms_left, self.drift_ms(), "acquire lease_ms_left")

    @rule(account=accounts, who=owners_or_holder, lease_ms=ttls)
    def heartbeat(self, account: str, who: str, lease_ms: int) -> None:
        owner = self.resolve(account, who)
        expected, self.ref[account] = evaluate_gate_heartbeat(
            self.ref[account], HeartbeatRequest(owner, lease_ms)
        )
        assert self.gate.heartbeat(account, owner, lease_ms=lease_ms) == expected

    @rule(account=accounts, who=owners_or_holder, lease_ms=ttls)
    def extend(self, account: str, who: str, lease_ms: int) -> None:
        owner = self.resolve(account, who)
        expected, self.ref[account] = evaluate_gate_extend(self.ref[account], ExtendRequest(owner, lease_ms))
        assert self.gate.extend(account, owner, lease_ms=lease_ms) == expected

    @rule(account=accounts, who=owners_or_holder)
    def release(self, account: str, who: str) -> None:
        owner = self.resolve(account, who)
        expected, self.ref[account] = evaluate_gate_release(self.ref[account], ReleaseRequest(owner))
        event(f"release: {expected}")
        assert self.gate.release(account, owner) == expected

    @rule(account=accounts, who=owners_or_holder)
    def yield_if_wanted(self, account: str, who: str) -> None:
        owner = self.resolve(account, who)
        expected, self.ref[account] = evaluate_gate_yield(self.ref[account], YieldRequest(owner))
        event(f"yield: released={expected.released}")
        assert self.gate.yield_if_wanted(account, owner) == expected

    @rule(account=accounts, who=owners)
    def forget(self, account: str, who: str) -> None:
        expected, self.ref[account] = evaluate_gate_forget(self.ref[account], ForgetRequest(who))
        event(f"forget: {expected}")
        assert self.gate.forget(account, who) == expected

    @rule(dt=dts)
    def time_passes(self, dt: int) -> None:
        dt = self.off_the_boundaries(dt)
        self.time_steps += 1
        for account in ACCOUNTS:
            self.ref[account] = advance(self.ref[account], dt)
            for key in gate_keys(PREFIX, account):
                left = self.client.pttl(key)
                if left == -2:
                    continue
                if left <= dt:
                    self.client.delete(key)
                else:
                    self.client.pexpire(key, left - dt)

    def off_the_boundaries(self, dt: int) -> int:
        """``dt``, moved up to a key's TTL wherever real-time drift could decide that key's fate.

        A key with reference TTL r and Redis TTL in [r - drift, r] expires on
        both sides when dt >= r, and survives on both, with more than the
        margin left, when dt < r - drift - margin.
        """
        ttls_left = [
            ttl
            for state in self.ref.values()
            for ttl in (state.lease_ms_left, state.wanted_ms_left, state.waiting_ms_left)
            if ttl is not None
        ]
        window = self.drift_ms() + SURVIVAL_MARGIN_MS
        moved = True
        while moved:
            moved = False
            for ttl in ttls_left:
                if ttl - window <= dt < ttl:
                    dt, moved = ttl, True
        return dt

    @invariant()
    def redis_holds_what_the_reference_holds(self) -> None:
        real = {account: self.gate.inspect(account) for account in ACCOUNTS}
        drift = self.drift_ms()  # after the reads: a pause (GC, a busy machine) before them counts
        for account in ACCOUNTS:
            assert_same(self.ref[account], real[account], drift, account)


def test_the_lua_gate_equals_the_reference(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)

    class Machine(GateMachine):
        pass

    Machine.client = client
    try:
        run_state_machine_as_test(
            Machine, settings=settings(max_examples=150, stateful_step_count=30, deadline=None)
        )
    finally:
        client.flushdb()
        client.close()
