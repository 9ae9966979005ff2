"""Fault switches: random 5xx, added latency, a 429 on the Nth call, forced statuses.

Set at start by CLI flags and at runtime by ``POST /__sandbox/faults`` (top-level
keys merged; a rule list given replaces the old one and its calls are counted
from then). Faults are decided after authentication and before the rate
limiter, so a faulted call takes no token.
"""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass
from typing import Any

ERROR_STATUSES = (500, 502, 503)


class FaultError(ValueError):
    """A fault update that does not make sense; the message says why."""


@dataclass(frozen=True)
class Fault:
    status: int
    retry_s: float | None = None  # set for a 429
    reason: str = ""


def _matches(rule: dict[str, Any], seller: str, bucket: str | None) -> bool:
    return rule.get("seller") in (None, seller) and rule.get("bucket") in (None, bucket)


def _number(value: Any, name: str, *, low: float, high: float | None = None) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < low:
        raise FaultError(f"{name} must be a number >= {low}")
    if high is not None and value > high:
        raise FaultError(f"{name} must be <= {high}")
    return value


def _target(rule: Any, name: str) -> dict[str, Any]:
    if not isinstance(rule, dict):
        raise FaultError(f"{name}: each rule is an object")
    for key in ("seller", "bucket"):
        if rule.get(key) is not None and not isinstance(rule[key], str):
            raise FaultError(f"{name}: {key} must be a string")
    return {"seller": rule.get("seller"), "bucket": rule.get("bucket")}


def _rule_429(rule: Any) -> dict[str, Any]:
    target = _target(rule, "force_429")
    nth = int(_number(rule.get("nth", 1), "force_429.nth", low=1))
    retry_s = float(_number(rule.get("retry_s", 1), "force_429.retry_s", low=0.001))
    return {**target, "nth": nth, "retry_s": retry_s, "seen": 0}


def _rule_status(rule: Any) -> dict[str, Any]:
    target = _target(rule, "force_status")
    status = int(_number(rule.get("status"), "force_status.status", low=400, high=599))
    times = int(_number(rule.get("times", 1), "force_status.times", low=1))
    return {**target, "status": status, "times": times}


class Faults:
    """The current fault settings; thread-safe, deterministic for a given seed and call order."""

    def __init__(self, seed: int = 0, *, error_rate: float = 0.0, latency_ms: int = 0) -> None:
        self._seed = seed
        self._lock = threading.Lock()
        self.reset()
        self.update({"error_rate": error_rate, "latency_ms": latency_ms})

    def reset(self) -> None:
        with self._lock:
            self._rng = random.Random(self._seed)
            self.error_rate = 0.0
            self.latency_ms = 0
            self._force_429: list[dict[str, Any]] = []
            self._force_status: list[dict[str, Any]] = []

    def update(self, changes: Any) -> None:
        if not isinstance(changes, dict):
            raise FaultError("expected a JSON object")
        unknown = set(changes) - {"error_rate", "latency_ms", "force_429", "force_status"}
        if unknown:
            raise FaultError(f"unknown fault(s): {', '.join(sorted(unknown))}")
        new: dict[str, Any] = {}
        if "error_rate" in changes:
            new["error_rate"] = float(_number(changes["error_rate"], "error_rate", low=0, high=1))
        if "latency_ms" in changes:
            new["latency_ms"] = int(_number(changes["latency_ms"], "latency_ms", low=0))
        for key, parse in (("force_429", _rule_429), ("force_status", _rule_status)):
            if key in changes:
                if not isinstance(changes[key], list):
                    raise FaultError(f"{key} must be a list of rules")
                new[f"_{key}"] = [parse(rule) for rule in changes[key]]
        with self._lock:  # all or nothing: validated above
            for name, value in new.items():
                setattr(self, name, value)

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return {
                "error_rate": self.error_rate,
                "latency_ms": self.latency_ms,
                "force_429": [dict(rule) for rule in self._force_429],
                "force_status": [dict(rule) for rule in self._force_status],
            }

    def decide(self, seller: str, bucket: str | None) -> Fault | None:
        """The fault this call meets, if any: forced statuses first, then forced 429s, then chance."""
        with self._lock:
            for rule in self._force_status:
                if _matches(rule, seller, bucket):
                    rule["times"] -= 1
                    if rule["times"] == 0:
                        self._force_status.remove(rule)
                    return Fault(rule["status"], reason="force_status")
            fired = None
            for rule in self._force_429:
                if _matches(rule, seller, bucket):
                    rule["seen"] += 1  # every matching rule counts this call
                    if rule["seen"] >= rule["nth"] and fired is None:
                        fired = rule
            if fired is not None:
                self._force_429.remove(fired)
                return Fault(429, retry_s=fired["retry_s"], reason="force_429")
            if self.error_rate and self._rng.random() < self.error_rate:
                return Fault(self._rng.choice(ERROR_STATUSES), reason="error_rate")
            return None
