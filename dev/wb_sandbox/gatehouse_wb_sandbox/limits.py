"""WB's documented rate limits and the sandbox's token buckets.

``WB_LIMITS`` and ``Limit`` (gatehouse.wb.limits) are the one place that holds
WB's Personal/Service-token limits per bucket; the sandbox serves them and the
WB client keeps to them, so the two cannot drift apart.

A WB bucket holds ``burst`` tokens and refills one token every
``period_ms / limit`` milliseconds; every call takes one token. Buckets are
per seller account (all tokens of a seller share them) and per bucket name
(``/ping``, which WB limits per host, has a bucket per host).
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from gatehouse.wb.limits import WB_LIMITS, Limit


def _rate(lim: Limit) -> float:
    """Tokens per second."""
    return lim.limit * 1000 / lim.period_ms


def load_limits(time_scale: float = 1.0, path: Path | str | None = None) -> dict[str, Limit]:
    """WB_LIMITS, with the entries of a limits file merged over them, every period divided by ``time_scale``.

    The file is JSON ``{bucket: {"period_ms": …, "limit": …, "burst": …}}``; an
    entry may give only some of the three. An unknown bucket is an error (a typo
    would otherwise be silently ignored).
    """
    if time_scale <= 0:
        raise ValueError("time scale must be positive")
    limits = {name: Limit(*values) for name, values in WB_LIMITS.items()}
    if path is not None:
        overrides = json.loads(Path(path).read_text())
        if not isinstance(overrides, dict):
            raise ValueError("limits file: expected a JSON object of buckets")
        for name, entry in overrides.items():
            if name not in limits:
                raise ValueError(f"limits file: unknown bucket {name!r} (known: {', '.join(limits)})")
            if not isinstance(entry, dict) or set(entry) - {"period_ms", "limit", "burst"}:
                raise ValueError(f"limits file: {name}: expected period_ms, limit and/or burst")
            merged = replace(limits[name], **entry)
            if not (merged.period_ms > 0 and merged.limit >= 1 and merged.burst >= 1):
                raise ValueError(f"limits file: {name}: period_ms, limit and burst must be positive")
            limits[name] = merged
    return {name: replace(lim, period_ms=lim.period_ms / time_scale) for name, lim in limits.items()}


@dataclass(frozen=True)
class Verdict:
    allowed: bool
    remaining: int  # whole tokens left after this call
    retry_s: float  # until one token is back (0 when allowed)
    reset_s: float  # until the bucket is full again
    burst: int


@dataclass
class _Bucket:
    tokens: float
    at: float


class Buckets:
    """Token buckets per (seller, bucket); thread-safe."""

    def __init__(self, limits: dict[str, Limit], clock: Callable[[], float] = time.monotonic) -> None:
        self.limits = limits
        self._clock = clock
        self._lock = threading.Lock()
        self._buckets: dict[tuple[str, str], _Bucket] = {}

    def _refilled(self, seller: str, bucket: str) -> tuple[_Bucket, Limit]:
        lim = self.limits[bucket]
        now = self._clock()
        state = self._buckets.setdefault((seller, bucket), _Bucket(float(lim.burst), now))
        state.tokens = min(float(lim.burst), state.tokens + (now - state.at) * _rate(lim))
        state.at = now
        return state, lim

    def take(self, seller: str, bucket: str) -> Verdict:
        """Take one token, or say how long to wait; a refused call takes nothing."""
        with self._lock:
            state, lim = self._refilled(seller, bucket)
            allowed = state.tokens >= 1
            if allowed:
                state.tokens -= 1
            return Verdict(
                allowed=allowed,
                remaining=math.floor(state.tokens),
                retry_s=0.0 if allowed else (1 - state.tokens) / _rate(lim),
                reset_s=(lim.burst - state.tokens) / _rate(lim),
                burst=lim.burst,
            )

    def remaining(self, seller: str, bucket: str) -> int:
        with self._lock:
            state, _ = self._refilled(seller, bucket)
            return math.floor(state.tokens)

    def clear(self) -> None:
        with self._lock:
            self._buckets.clear()


def seconds_header(value: float, *, exact: bool) -> str:
    """A duration for X-Ratelimit-Retry/-Reset.

    Real WB sends whole seconds (rounded up here, so waiting that long always
    suffices). At a time scale or with a limits file the waits are fractions of
    a second, so ``exact`` sends decimals with up to 3 places, rounded up to the
    millisecond ("0.25").
    """
    if not exact:
        return str(math.ceil(value - 1e-9))
    millis = math.ceil(value * 1000 - 1e-6)
    return f"{millis / 1000:.3f}".rstrip("0").rstrip(".")
