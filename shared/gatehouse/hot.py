"""Which seller accounts may be hot: one sorted set, so a hot-only list reads them, not every account.

An account is hot (``gatehouse_api.resources.gates.is_hot``) while its gate is held with jobs in
line behind the holder, or for a day after WB paused one of its jobs (429). Whoever can make it so
notes the account here, with the time until which it may stay hot:

- the gate, when it parks a waiter (``RedisGate.acquire``): a waiter stays in line at most the
  waiting set's TTL after its last park, which every park renews;
- the pauses (``AccountPauses.record``): a pause counts for ``pauses.TTL_MS`` after it.

``<prefix>:accounts:hot`` maps account id → until when (epoch ms; ZADD GT keeps the latest), and
every note drops the members whose time has passed. It is a superset: a reader still judges each
account on its own keys. Accounts that became hot before the set existed (an upgrade) join it at
their next park or pause.
"""

from __future__ import annotations

import time

from redis import Redis
from redis.client import Pipeline

# The writers' and the reader's clocks may differ this much; a member kept longer costs only a look.
MARGIN_MS = 60_000


def hot_key(prefix: str) -> str:
    return f"{prefix}:accounts:hot"


def now_ms() -> int:
    return int(time.time() * 1000)


def note(pipe: Pipeline, prefix: str, account_id: str, *, until_ms: int) -> None:
    """Queue on ``pipe``: the account may be hot until ``until_ms``; members past theirs go."""
    key = hot_key(prefix)
    pipe.zadd(key, {account_id: until_ms}, gt=True)
    pipe.zremrangebyscore(key, "-inf", f"({now_ms() - MARGIN_MS}")


class HotAccounts:
    """The reading side: the accounts that may be hot now."""

    def __init__(self, redis: Redis, *, prefix: str) -> None:
        self.redis = redis
        self.key = hot_key(prefix)

    def candidates(self) -> list[str]:
        return [
            m.decode() if isinstance(m, bytes) else m
            for m in self.redis.zrangebyscore(self.key, now_ms() - MARGIN_MS, "+inf")
        ]
