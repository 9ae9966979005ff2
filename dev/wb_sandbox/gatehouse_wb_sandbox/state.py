"""One sandbox's configuration and mutable state (buckets, faults, log, changed bids)."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path

from gatehouse_wb_sandbox.data import MSK, DataSpec, moscow_today
from gatehouse_wb_sandbox.faults import Faults
from gatehouse_wb_sandbox.limits import Buckets, load_limits
from gatehouse_wb_sandbox.log import RequestLog


@dataclass(frozen=True)
class SandboxConfig:
    time_scale: float = 1.0
    limits_file: Path | str | None = None
    page_size: int = 80_000  # statistics rows per call, like WB
    rows_per_day: int = 5  # orders per seller and day
    seed: int = 0
    error_rate: float = 0.0
    latency_ms: int = 0
    anchor: date | None = None  # the data's "today"; None: today in Moscow


class BidBook:
    """Bids changed through PATCH /api/advert/v1/bids, over the generated ones; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._bids: dict[tuple[str, int, int, str], int] = {}
        self._changed: dict[tuple[str, int], datetime] = {}

    def get(self, seller: str, advert_id: int, nm_id: int, placement: str, default: int) -> int:
        with self._lock:
            return self._bids.get((seller, advert_id, nm_id, placement), default)

    def changed(self, seller: str, advert_id: int) -> datetime | None:
        with self._lock:
            return self._changed.get((seller, advert_id))

    def set(self, seller: str, changes: list[tuple[int, int, str, int]]) -> None:
        """(advert_id, nm_id, placement, kopecks) changes, applied together."""
        now = datetime.now(MSK)
        with self._lock:
            for advert_id, nm_id, placement, kopecks in changes:
                self._bids[seller, advert_id, nm_id, placement] = kopecks
                self._changed[seller, advert_id] = now

    def clear(self) -> None:
        with self._lock:
            self._bids.clear()
            self._changed.clear()


class Sandbox:
    def __init__(self, config: SandboxConfig) -> None:
        if config.page_size < 1 or config.rows_per_day < 0:
            raise ValueError("page size must be positive and rows per day not negative")
        self.config = config
        self.spec = DataSpec(config.seed, config.anchor or moscow_today(), config.rows_per_day)
        self.limits = load_limits(config.time_scale, config.limits_file)
        # Real WB sends whole seconds; scaled or custom limits need fractions.
        self.exact_headers = config.time_scale != 1 or config.limits_file is not None
        self.buckets = Buckets(self.limits)
        self.faults = Faults(config.seed, error_rate=config.error_rate, latency_ms=config.latency_ms)
        self.log = RequestLog()
        self.bids = BidBook()

    def reset(self) -> None:
        """Back to a fresh start: no faults, full buckets, empty log, generated bids."""
        self.faults.reset()
        self.buckets.clear()
        self.log.clear()
        self.bids.clear()
