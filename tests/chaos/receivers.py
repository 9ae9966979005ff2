"""A webhook receiver that sometimes fails and, when told, hangs (tests.support.receiver underneath)."""

from __future__ import annotations

import random
import threading
import time

from tests.support.receiver import Receiver, Reply

FAIL_SHARE = 0.15  # answers 500 or 503 this often
HANG_S = 4.0  # a hanging receiver holds each request this long (longer than WEBHOOK_TIMEOUT_MS)


class ChaosReceiver(Receiver):
    def __init__(self, seed: int) -> None:
        super().__init__()
        self._rng = random.Random(seed)
        self._rng_lock = threading.Lock()
        self.hang_until = 0.0

    def hang(self, seconds: float) -> None:
        self.hang_until = time.time() + seconds

    def _next_reply(self) -> Reply:
        if time.time() < self.hang_until:
            return Reply(status=200, hold_s=HANG_S)
        with self._rng_lock:
            roll = self._rng.random()
        if roll < FAIL_SHARE:
            return Reply(status=500 if roll < FAIL_SHARE / 2 else 503, body="receiver fault")
        return Reply()
