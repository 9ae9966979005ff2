"""The WB token bucket as a pure function of its Redis hash: the reference ``take.lua`` mirrors.

One bucket per (seller account, WB bucket): ``<prefix>:wb:bucket:{A}:<bucket>``
(``<prefix>``: the deployment's ``BROKER_NAMESPACE``; the braces: the account's
Redis Cluster hash tag, as the gate's), a hash ``tokens`` (fractional, stored
as ``"%.6f"``) and ``ts`` (ms of the last take). It holds at most ``burst``
tokens and refills ``limit`` per ``period_ms``. The caller passes ``now_ms``
(its wall clock), which keeps the rule deterministic.

The arithmetic is written operation for operation as in the Lua (both are
IEEE doubles, evaluated one operation at a time), and the refill is rounded
to the stored six decimals before it is compared or stored, so the two give
the same bits; ``tests/integration/test_bucket_equivalence.py`` checks it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# An idle bucket's key outlives the moment it is full again by this much, then vanishes
# (a missing key reads as full, so its expiry changes nothing).
IDLE_GRACE_MS = 1000


def bucket_key(prefix: str, account_id: str, bucket: str) -> str:
    if not account_id or "{" in account_id or "}" in account_id:
        # A brace would change the hash tag; the account's keys share one Redis Cluster slot.
        raise ValueError(f"account id must be non-empty and brace-free, got {account_id!r}")
    if not bucket:
        raise ValueError("bucket must be non-empty")
    return f"{prefix}:wb:bucket:{{{account_id}}}:{bucket}"


def quantize(x: float) -> float:
    """The stored precision: what ``tonumber(string.format("%.6f", x))`` gives in Lua."""
    return float(format_tokens(x))


def format_tokens(x: float) -> str:
    # Both sides round the exact binary value correctly (CPython's dtoa, glibc printf).
    return f"{x:.6f}"


@dataclass(frozen=True)
class BucketState:
    """The hash fields (``tokens`` as stored, parsed) and the key's TTL as last set."""

    tokens: float
    ts_ms: int
    ttl_ms: int

    @property
    def stored_tokens(self) -> str:
        return format_tokens(self.tokens)


@dataclass(frozen=True)
class TakeRequest:
    now_ms: int
    burst: int
    limit: int
    period_ms: int
    cost: int = 1

    def __post_init__(self) -> None:
        for name in ("now_ms", "burst", "limit", "period_ms", "cost"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"{name} must be an int, got {value!r}")
        if self.now_ms < 0 or self.now_ms >= 2**53:
            raise ValueError(f"now_ms out of range: {self.now_ms}")
        if self.burst <= 0 or self.limit <= 0 or self.period_ms <= 0 or self.cost <= 0:
            raise ValueError("burst, limit, period_ms and cost must be positive")
        if self.cost > self.burst:
            raise ValueError(f"cost {self.cost} can never be paid from a bucket of {self.burst}")


@dataclass(frozen=True)
class TakeResult:
    """``wait_ms`` = 0: the tokens were taken; otherwise nothing was taken, retry after ``wait_ms``."""

    wait_ms: int

    @property
    def granted(self) -> bool:
        return self.wait_ms == 0


def evaluate_bucket_take(
    state: BucketState | None, req: TakeRequest
) -> tuple[TakeResult, BucketState | None]:
    """``state`` None = no key = a full bucket. A refused take writes nothing."""
    burst = float(req.burst)
    cost = float(req.cost)
    now = float(req.now_ms)
    rate = float(req.limit) / float(req.period_ms)

    if state is None:
        tokens, ts = burst, now
    else:
        tokens, ts = state.tokens, float(state.ts_ms)
    # Clocks of several workers disagree: an earlier now_ms refills nothing, and ts never moves back.
    elapsed = now - ts
    if elapsed < 0:
        elapsed = 0.0
    refill = quantize(min(burst, tokens + elapsed * rate))

    if refill < cost:
        return TakeResult(math.ceil((cost - refill) / rate)), state

    left = quantize(refill - cost)
    ttl = math.ceil((burst - left) / rate) + IDLE_GRACE_MS
    return TakeResult(0), BucketState(tokens=left, ts_ms=int(max(ts, now)), ttl_ms=ttl)
