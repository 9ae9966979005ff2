"""The per-seller request log that tests read back (``GET /__sandbox/log``)."""

from __future__ import annotations

import threading
from collections import deque
from typing import Any

# A long `make run` session must not grow without bound; tests stay far below this.
MAX_ENTRIES = 100_000


class RequestLog:
    """Every WB call in arrival order; thread-safe."""

    def __init__(self, max_entries: int = MAX_ENTRIES) -> None:
        self._lock = threading.Lock()
        self._entries: deque[dict[str, Any]] = deque(maxlen=max_entries)

    def append(self, entry: dict[str, Any]) -> None:
        with self._lock:
            self._entries.append(entry)

    def entries(self, seller: str | None = None) -> list[dict[str, Any]]:
        with self._lock:
            return [e for e in self._entries if seller is None or e["seller"] == seller]

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
