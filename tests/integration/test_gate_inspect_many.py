"""RedisGate.inspect_many: one round trip for a page of accounts, each answer what inspect says."""

from __future__ import annotations

import time
import uuid

from gatehouse.gate import GateState, owner


def test_inspect_many_is_inspect_of_each_account_in_order(gh):
    gate, now = gh.gate, int(time.time() * 1000)
    free, held, lined_up, scheduled = (str(uuid.uuid4()) for _ in range(4))
    ask = dict(lease_ms=60_000, wanted_ttl_ms=30_000, waiting_ttl_ms=30_000)
    # held: one holder; lined_up: a holder, a user job that wants it and two waiters (user before scheduled)
    assert gate.acquire(held, owner("q", uuid.uuid4()), tier="user", first_wait_ms=now, **ask).proceed
    holder = owner("q", uuid.uuid4())
    assert gate.acquire(lined_up, holder, tier="scheduled", first_wait_ms=now, **ask).proceed
    late_user, early_sched = owner("q", uuid.uuid4()), owner("q", uuid.uuid4())
    assert not gate.acquire(lined_up, early_sched, tier="scheduled", first_wait_ms=now - 5_000, **ask).proceed
    assert not gate.acquire(lined_up, late_user, tier="user", first_wait_ms=now, **ask).proceed
    # scheduled: no holder, only a waiter left behind (its holder released without waking it)
    sched_holder = owner("q", uuid.uuid4())
    assert gate.acquire(scheduled, sched_holder, tier="scheduled", first_wait_ms=now, **ask).proceed
    assert not gate.acquire(
        scheduled, owner("q", uuid.uuid4()), tier="scheduled", first_wait_ms=now, **ask
    ).proceed
    gate.release(scheduled, sched_holder)

    accounts = [lined_up, free, held, scheduled, free]
    many = gate.inspect_many(accounts)

    one_by_one = [gate.inspect(a) for a in accounts]
    assert [strip_ttls(s) for s in many] == [strip_ttls(s) for s in one_by_one]
    assert many[1] == GateState() and many[4] == GateState()
    assert [w.owner for w in many[0].waiting] == [late_user, early_sched]
    assert many[0].holder == holder and many[0].wanted == late_user
    assert 0 < many[2].lease_ms_left <= 60_000 and many[3].holder is None and len(many[3].waiting) == 1
    assert gate.inspect_many([]) == []


def strip_ttls(state: GateState) -> tuple:
    """The keys' values and whether each TTL is set (the milliseconds tick between the two reads)."""
    return (
        state.holder,
        state.lease_ms_left is not None,
        state.wanted,
        state.wanted_ms_left is not None,
        state.waiting,
        state.waiting_ms_left is not None,
    )


def test_inspect_many_is_one_round_trip(gh, monkeypatch):
    sent = []
    execute = type(gh.redis.pipeline()).execute

    def counted(pipe, *args, **kwargs):
        sent.append(len(pipe.command_stack))
        return execute(pipe, *args, **kwargs)

    monkeypatch.setattr(type(gh.redis.pipeline()), "execute", counted)
    gh.gate.inspect_many([str(uuid.uuid4()) for _ in range(50)])
    assert sent == [300]
