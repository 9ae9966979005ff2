"""The per-account gate: one WB-heavy job per seller account at a time, user jobs first.

``vocabulary`` holds its words (keys under the deployment's prefix, owner,
spec); ``reference`` holds the rules as pure functions; the ``*.lua`` scripts
mirror them on Redis and ``store.RedisGate`` runs those scripts.
"""

from gatehouse.gate.reference import AcquireResult, Decision, GateState, ReleaseResult, Waiter, waiting_score
from gatehouse.gate.store import RedisGate
from gatehouse.gate.vocabulary import (
    USER_GATE,
    GateKeys,
    GateSpec,
    Tier,
    gate_keys,
    job_of,
    owner,
)

__all__ = [
    "USER_GATE",
    "AcquireResult",
    "Decision",
    "GateKeys",
    "GateSpec",
    "GateState",
    "RedisGate",
    "ReleaseResult",
    "Tier",
    "Waiter",
    "gate_keys",
    "job_of",
    "owner",
    "waiting_score",
]
