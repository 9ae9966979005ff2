"""Per-endpoint concurrency (WEBHOOK_MAX_PER_ENDPOINT) across every worker: a leased semaphore in Redis;
and an endpoint's rate limit (``rateLimitPerSecond``): a GCRA token bucket beside it.

A slot is a member of the endpoint's sorted set scored by its lease end, so a
worker that died mid-attempt frees its slot when the lease runs out (the
request timeout plus a margin). An attempt that finds no free slot does not
run and does not spend an attempt: it waits a moment (JobPaused), leaving its
worker thread to deliveries of other endpoints.
"""

from __future__ import annotations

from redis import Redis

# KEYS[1] the endpoint's slots; ARGV: holder, lease ms, limit. The server's clock, so workers agree.
ACQUIRE = """
local now = redis.call('TIME')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now_ms)
if redis.call('ZSCORE', KEYS[1], ARGV[1]) or redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[3]) then
  redis.call('ZADD', KEYS[1], now_ms + tonumber(ARGV[2]), ARGV[1])
  redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]))
  return 1
end
return 0
"""

# KEYS[1] the endpoint's pace; ARGV: its rate per second. The generic cell rate algorithm: the key
# holds when the next send is due at the steady rate (epoch ms); up to a second's worth may go at
# once. Returns 0 (send now, the due time moved on) or how many ms until a send may go.
PACE = """
local now = redis.call('TIME')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local interval = 1000 / tonumber(ARGV[1])
local due = math.max(tonumber(redis.call('GET', KEYS[1]) or now_ms), now_ms)
local wait = due - now_ms - (1000 - interval)
if wait > 0 then
  return math.ceil(wait)
end
redis.call('SET', KEYS[1], tostring(due + interval), 'PX', math.ceil(due + interval - now_ms) + 1000)
return 0
"""


def slots_key(prefix: str, endpoint_id: str) -> str:
    return f"{prefix}:webhook:{{{endpoint_id}}}:slots"


def pace_key(prefix: str, endpoint_id: str) -> str:
    return f"{prefix}:webhook:{{{endpoint_id}}}:pace"


class EndpointSlots:
    """The endpoints' slots, every key starting with ``prefix`` (the deployment's)."""

    def __init__(self, redis: Redis, *, prefix: str) -> None:
        self.redis = redis
        self.prefix = prefix
        self._acquire = redis.register_script(ACQUIRE)
        self._pace = redis.register_script(PACE)

    def acquire(self, endpoint_id: str, holder: str, *, limit: int, lease_ms: int) -> bool:
        return bool(self._acquire(keys=[slots_key(self.prefix, endpoint_id)], args=[holder, lease_ms, limit]))

    def release(self, endpoint_id: str, holder: str) -> None:
        self.redis.zrem(slots_key(self.prefix, endpoint_id), holder)

    def pace(self, endpoint_id: str, per_second: int) -> int:
        """Take the endpoint's turn to send at ``per_second``: 0, or the ms to wait before one may go."""
        return int(self._pace(keys=[pace_key(self.prefix, endpoint_id)], args=[per_second]))
