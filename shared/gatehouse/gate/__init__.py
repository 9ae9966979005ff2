"""The per-account gate: one WB-heavy job per seller account at a time, user jobs first.

``reference`` holds the rules as pure functions; the ``*.lua`` scripts mirror
them on Redis and ``store.RedisGate`` runs those scripts.
"""

from gatehouse.gate.reference import (
    AcquireResult,
    Decision,
    GateKeys,
    GateState,
    ReleaseResult,
    Tier,
    Waiter,
    gate_keys,
    waiting_score,
)
from gatehouse.gate.store import RedisGate

__all__ = [
    "AcquireResult",
    "Decision",
    "GateKeys",
    "GateState",
    "RedisGate",
    "ReleaseResult",
    "Tier",
    "Waiter",
    "gate_keys",
    "waiting_score",
]
