"""The WB token bucket on Redis: ``take.lua`` beside this module, one call per take."""

from __future__ import annotations

from pathlib import Path

from redis import Redis

from gatehouse.bucket.reference import TakeRequest, bucket_key

_HERE = Path(__file__).parent


class RedisTokenBucket:
    """``gatehouse.bucket.reference.evaluate_bucket_take`` run atomically on Redis.

    Construction only reads and hashes the script; nothing connects until the first take.
    Every key starts with ``prefix``.
    """

    def __init__(self, client: Redis, *, prefix: str) -> None:
        self.client = client
        self.prefix = prefix
        self._take = client.register_script((_HERE / "take.lua").read_text(encoding="utf-8"))

    def take(
        self,
        account_id: str,
        bucket: str,
        *,
        burst: int,
        limit: int,
        period_ms: int,
        now_ms: int,
        cost: int = 1,
    ) -> int:
        """Take ``cost`` tokens: 0 when taken, else the ms to wait before trying again (nothing taken)."""
        req = TakeRequest(now_ms=now_ms, burst=burst, limit=limit, period_ms=period_ms, cost=cost)
        wait_ms = self._take(
            keys=[bucket_key(self.prefix, account_id, bucket)],
            args=[req.now_ms, req.burst, req.limit, req.period_ms, req.cost],
        )
        return int(wait_ms)
