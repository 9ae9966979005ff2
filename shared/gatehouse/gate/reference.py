"""The per-account gate as pure functions of its Redis state: the reference the Lua scripts mirror.

Each ``evaluate_gate_*`` takes the account's state (the three keys, with
their remaining TTLs) and a request, and returns ``(result, new_state)``.
The scripts beside this module do the same to the real keys in one atomic
step; ``tests/integration/test_gate_equivalence.py`` runs both side by side
and demands equal results and equal resulting keys.

Keys of account A (``vocabulary.gate_keys``; ``<prefix>`` is the deployment's
``BROKER_NAMESPACE``; the braces are a Redis Cluster hash tag, so one script may
touch all three):

- ``<prefix>:wb:gate:{A}`` – string, the holder ``<queue>:<jobId>``, TTL = its lease;
- ``<prefix>:wb:gate:{A}:wanted`` – string, the user job that last wanted the gate;
- ``<prefix>:wb:gate:{A}:waiting`` – sorted set of parked owners, score
  ``tier_rank * 10**13 + first_wait_ms``: the lowest is "user before
  scheduled, then oldest".

``RedisGate`` also keeps ``<prefix>:wb:gate:{A}:released``, the moment the gate
was last released to a waiter, for the hand-off latency metric; no rule reads
it, so it is no part of this state.

Redis deletes an empty sorted set, so the state never holds an empty
``waiting`` with a TTL.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from gatehouse.gate.vocabulary import Tier

Decision = Literal["acquired", "reentrant", "busy", "deferred"]

TIER_RANK: dict[str, int] = {"user": 0, "scheduled": 1}
# Scores of one tier stay below the next tier's; epoch ms stay below 10**13 until the year 2286.
# Scores up to 2 * 10**13 are exact in a double (Redis scores, Lua numbers).
TIER_SPAN = 10**13


def waiting_score(tier: Tier, first_wait_ms: int) -> int:
    return TIER_RANK[tier] * TIER_SPAN + first_wait_ms


def _order(owner: str, score: int) -> tuple[int, bytes]:
    # Redis orders equal scores by the member's bytes.
    return (score, owner.encode())


@dataclass(frozen=True)
class Waiter:
    owner: str
    score: int

    @property
    def tier(self) -> Tier:
        return "user" if self.score < TIER_SPAN else "scheduled"

    @property
    def first_wait_ms(self) -> int:
        return self.score - TIER_RANK[self.tier] * TIER_SPAN


@dataclass(frozen=True)
class GateState:
    """The three keys of one account; a ``*_ms_left`` is the key's PTTL, None when the key is absent.

    A TTL of -1 (a key without expiry, which these rules never write) is
    kept as is and never runs out.
    """

    holder: str | None = None
    lease_ms_left: int | None = None
    wanted: str | None = None
    wanted_ms_left: int | None = None
    waiting: tuple[Waiter, ...] = ()
    waiting_ms_left: int | None = None

    def __post_init__(self) -> None:
        if (self.holder is None) != (self.lease_ms_left is None):
            raise ValueError("holder and lease_ms_left are both set or both None")
        if (self.wanted is None) != (self.wanted_ms_left is None):
            raise ValueError("wanted and wanted_ms_left are both set or both None")
        if (not self.waiting) != (self.waiting_ms_left is None):
            raise ValueError("an empty waiting set has no TTL (Redis deletes empty sorted sets)")
        if len({w.owner for w in self.waiting}) != len(self.waiting):
            raise ValueError("waiting owners are unique")
        if list(self.waiting) != sorted(self.waiting, key=lambda w: _order(w.owner, w.score)):
            raise ValueError("waiting is in Redis order: by score, then by member bytes")

    @property
    def best_waiter(self) -> str | None:
        return self.waiting[0].owner if self.waiting else None

    @property
    def waiting_owners(self) -> tuple[str, ...]:
        return tuple(w.owner for w in self.waiting)


EMPTY = GateState()


# -- requests and results ---------------------------------------------------------


def _positive(name: str, value: int) -> None:
    # PEXPIRE/PX with 0 or less would delete the key or fail; bool is an int, but never a duration.
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{name} must be a positive int of milliseconds, got {value!r}")


def _owner(owner: str) -> None:
    if not isinstance(owner, str) or not owner:
        raise ValueError(f"owner must be a non-empty string, got {owner!r}")


@dataclass(frozen=True)
class AcquireRequest:
    owner: str
    tier: Tier
    lease_ms: int
    wanted_ttl_ms: int
    waiting_ttl_ms: int
    first_wait_ms: int

    def __post_init__(self) -> None:
        _owner(self.owner)
        if self.tier not in TIER_RANK:
            raise ValueError(f"tier must be 'user' or 'scheduled', got {self.tier!r}")
        _positive("lease_ms", self.lease_ms)
        _positive("wanted_ttl_ms", self.wanted_ttl_ms)
        _positive("waiting_ttl_ms", self.waiting_ttl_ms)
        if isinstance(self.first_wait_ms, bool) or not isinstance(self.first_wait_ms, int):
            raise ValueError(f"first_wait_ms must be an int, got {self.first_wait_ms!r}")
        if not 0 <= self.first_wait_ms < TIER_SPAN:
            raise ValueError(f"first_wait_ms must be in [0, 10**13), got {self.first_wait_ms}")

    @property
    def score(self) -> int:
        return waiting_score(self.tier, self.first_wait_ms)


@dataclass(frozen=True)
class HeartbeatRequest:
    owner: str
    lease_ms: int

    def __post_init__(self) -> None:
        _owner(self.owner)
        _positive("lease_ms", self.lease_ms)


@dataclass(frozen=True)
class ExtendRequest:
    """Extend-for-pause: ``lease_ms`` is the WB pause plus the margin."""

    owner: str
    lease_ms: int

    def __post_init__(self) -> None:
        _owner(self.owner)
        _positive("lease_ms", self.lease_ms)


@dataclass(frozen=True)
class ReleaseRequest:
    owner: str

    def __post_init__(self) -> None:
        _owner(self.owner)


@dataclass(frozen=True)
class YieldRequest:
    owner: str

    def __post_init__(self) -> None:
        _owner(self.owner)


@dataclass(frozen=True)
class ForgetRequest:
    owner: str

    def __post_init__(self) -> None:
        _owner(self.owner)


@dataclass(frozen=True)
class AcquireResult:
    """``holder`` is the owner after the call (None if free); ``lease_ms_left`` its lease (None if free)."""

    decision: Decision
    holder: str | None
    lease_ms_left: int | None

    @property
    def proceed(self) -> bool:
        return self.decision in ("acquired", "reentrant")


@dataclass(frozen=True)
class ReleaseResult:
    """``best_waiter`` (left in the waiting set) is the one to wake now; None when nothing was released."""

    released: bool
    best_waiter: str | None = None


# -- helpers ----------------------------------------------------------------------


def _park(state: GateState, owner: str, score: int, waiting_ttl_ms: int) -> GateState:
    # ZADD NX (a re-parked waiter keeps its first score), then PEXPIRE on every park.
    waiting = state.waiting
    if owner not in state.waiting_owners:
        waiting = tuple(sorted((*waiting, Waiter(owner, score)), key=lambda w: _order(w.owner, w.score)))
    return replace(state, waiting=waiting, waiting_ms_left=waiting_ttl_ms)


def _unpark(state: GateState, owner: str) -> GateState:
    waiting = tuple(w for w in state.waiting if w.owner != owner)
    return replace(state, waiting=waiting, waiting_ms_left=state.waiting_ms_left if waiting else None)


def _without_wanted(state: GateState) -> GateState:
    return replace(state, wanted=None, wanted_ms_left=None)


def _released(state: GateState) -> tuple[ReleaseResult, GateState]:
    new = replace(state, holder=None, lease_ms_left=None)
    return ReleaseResult(True, new.best_waiter), new


# -- the rules --------------------------------------------------------------------


def evaluate_gate_acquire(state: GateState, req: AcquireRequest) -> tuple[AcquireResult, GateState]:
    if state.holder == req.owner:
        decision: Decision = "reentrant"
        new = replace(state, lease_ms_left=req.lease_ms)
    elif state.holder is None:
        if req.tier == "scheduled" and state.wanted is not None:
            # A user job wants the gate: a scheduled one does not take it while it is free.
            return AcquireResult("deferred", None, None), _park(
                state, req.owner, req.score, req.waiting_ttl_ms
            )
        decision = "acquired"
        new = replace(state, holder=req.owner, lease_ms_left=req.lease_ms)
    else:
        new = _park(state, req.owner, req.score, req.waiting_ttl_ms)
        if req.tier == "user":
            new = replace(new, wanted=req.owner, wanted_ms_left=req.wanted_ttl_ms)
        return AcquireResult("busy", state.holder, state.lease_ms_left), new

    new = _unpark(new, req.owner)
    if req.tier == "user":
        # The marker names a user job that still waits (the next in line), or goes: it
        # would otherwise keep scheduled jobs out for a user job that is now running.
        next_user = next((w.owner for w in new.waiting if w.tier == "user"), None)
        if next_user is None:
            new = _without_wanted(new)
        elif new.wanted is not None:
            new = replace(new, wanted=next_user)  # same TTL: only the name is made true
    return AcquireResult(decision, req.owner, req.lease_ms), new


def evaluate_gate_heartbeat(state: GateState, req: HeartbeatRequest) -> tuple[bool, GateState]:
    if state.holder != req.owner:
        return False, state
    return True, replace(state, lease_ms_left=req.lease_ms)


def evaluate_gate_extend(state: GateState, req: ExtendRequest) -> tuple[bool, GateState]:
    # Same rule as the heartbeat; a separate operation so the pause path can change alone.
    if state.holder != req.owner:
        return False, state
    return True, replace(state, lease_ms_left=req.lease_ms)


def evaluate_gate_release(state: GateState, req: ReleaseRequest) -> tuple[ReleaseResult, GateState]:
    if state.holder != req.owner:
        return ReleaseResult(False), state
    return _released(state)


def evaluate_gate_yield(state: GateState, req: YieldRequest) -> tuple[ReleaseResult, GateState]:
    # Only a wanted gate is handed over; ``wanted`` stays so no scheduled job slips in first.
    if state.holder != req.owner or state.wanted is None:
        return ReleaseResult(False), state
    return _released(state)


def evaluate_gate_forget(state: GateState, req: ForgetRequest) -> tuple[bool, GateState]:
    # A forgotten user job no longer wants the gate either.
    if state.wanted == req.owner:
        state = _without_wanted(state)
    if req.owner not in state.waiting_owners:
        return False, state
    return True, _unpark(state, req.owner)


def advance(state: GateState, dt_ms: int) -> GateState:
    """The same keys ``dt_ms`` later: every TTL shrinks by ``dt_ms``; a key whose TTL runs out is gone."""
    if dt_ms < 0:
        raise ValueError("time does not run backwards")

    def left(ttl: int | None) -> int | None:
        if ttl is None or ttl < 0:
            return ttl
        return ttl - dt_ms if ttl > dt_ms else None

    lease, wanted, waiting = (
        left(state.lease_ms_left),
        left(state.wanted_ms_left),
        left(state.waiting_ms_left),
    )
    return GateState(
        holder=state.holder if lease is not None else None,
        lease_ms_left=lease,
        wanted=state.wanted if wanted is not None else None,
        wanted_ms_left=wanted,
        waiting=state.waiting if waiting is not None else (),
        waiting_ms_left=waiting,
    )
