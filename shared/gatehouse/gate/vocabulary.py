"""The gate's words: its Redis keys, who holds it (the owner) and how a job type opts in (the spec).

Every gate key of an account is built here and nowhere else, under the
deployment's prefix (``BROKER_NAMESPACE``, given by the composition root), so
two deployments on one Redis database never see each other's gates. The braces
are a Redis Cluster hash tag: all keys of one account live in one slot, so one
Lua script may touch them together.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

Tier = Literal["user", "scheduled"]
TIERS: tuple[Tier, ...] = ("user", "scheduled")
# The payload field a schedule's tick uses to override its job type's max wait.
MAX_WAIT_FIELD = "maxWaitMs"
# The payload fields a schedule's fan-out writes on each job (gatehouse.fanout): when the job is due
# (its spread eta, epoch ms: its max wait counts from there, not from the tick), and, for one run
# after repeated account-busy skips, the tier whose priority it waits for the gate with ("user").
DUE_AT_FIELD = "dueAtMs"
GATE_TIER_FIELD = "gateTier"


class GateKeys(NamedTuple):
    """The account's keys, in the KEYS order of every gate script."""

    gate: str
    wanted: str
    waiting: str


def _base(prefix: str, account_id: str) -> str:
    if not account_id or "{" in account_id or "}" in account_id:
        # A brace would change the hash tag and split the account over slots.
        raise ValueError(f"account id must be non-empty and brace-free, got {account_id!r}")
    return f"{prefix}:wb:gate:{{{account_id}}}"


def gate_keys(prefix: str, account_id: str) -> GateKeys:
    base = _base(prefix, account_id)
    return GateKeys(gate=base, wanted=f"{base}:wanted", waiting=f"{base}:waiting")


def released_key(prefix: str, account_id: str) -> str:
    """When the account's gate was last handed to a waiter: the hand-off latency metric reads it."""
    return f"{_base(prefix, account_id)}:released"


def owner(queue: str, job_id: uuid.UUID | str) -> str:
    """The holder's name, ``<queue>:<jobId>``: every run of one job is the same owner (re-entrant)."""
    return f"{queue}:{job_id}"


def job_of(owner_name: str) -> uuid.UUID:
    """The job id of an owner ``<queue>:<jobId>`` (a queue name may itself hold colons)."""
    return uuid.UUID(owner_name.rsplit(":", 1)[1])


@dataclass(frozen=True)
class GateSpec:
    """A job type's one-line opt-in to the gate.

    ``max_wait_ms`` (scheduled jobs only): how long after its enqueue the job
    may wait for the gate before it ends skipped (``account-busy``); a
    schedule may override it per tick. User jobs wait as long as it takes.
    """

    tier: Tier
    max_wait_ms: int | None = None

    def __post_init__(self) -> None:
        if self.tier not in TIERS:
            raise ValueError(f"gate tier must be one of {TIERS}, got {self.tier!r}")
        if self.tier == "user" and self.max_wait_ms is not None:
            raise ValueError("a user job never gives up waiting: max_wait_ms is for scheduled jobs")

    def max_wait_of(self, payload: Mapping[str, Any]) -> int | None:
        """One job's max wait: its schedule's override (in its payload), else the type's."""
        return payload.get(MAX_WAIT_FIELD, self.max_wait_ms)

    def waits_from(self, payload: Mapping[str, Any], created_ms: int) -> int:
        """When one job's wait for the gate begins (epoch ms): when its tick made it due, else its creation."""
        return payload.get(DUE_AT_FIELD, created_ms)

    def tier_of(self, payload: Mapping[str, Any]) -> Tier:
        """The tier one job waits for the gate as: a scheduled one promoted for a run waits as a user job."""
        return "user" if payload.get(GATE_TIER_FIELD) == "user" else self.tier


USER_GATE = GateSpec("user")
