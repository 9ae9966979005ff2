"""Throttled authentication: failed attempts counted per client address in Redis, then a lockout.

After ``max_failures`` failed attempts from one address within ``WINDOW_MS`` (counted from its
first failure), the address is locked out for ``lockout_ms``: every attempt from it, a correct
credential too, is refused until the lock expires. Redis holds both keys, so every API process
agrees. A success does not reset the count: an attacker holding one valid key of its own could
otherwise interleave it to guess for ever.

Redis is consulted on every authenticated request, so its calls have their own short timeout
(``CALL_TIMEOUT_MS``) and fail open: a Redis that is down or frozen turns the throttle off, with
a warning, instead of refusing or stalling every request (the API keeps serving what needs no Redis).
"""

from __future__ import annotations

import ipaddress
import logging

from redis import Redis, RedisError

log = logging.getLogger(__name__)

WINDOW_MS = 60_000
# A throttle check waits at most this long for Redis (or REDIS_TIMEOUT_MS if shorter), then lets the request in.
CALL_TIMEOUT_MS = 250

# KEYS: failures, locked. ARGV: max failures, window ms, lockout ms. Returns the lock's ms (0: not locked).
_FAIL = """
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
if n >= tonumber(ARGV[1]) then
  redis.call('SET', KEYS[2], '1', 'PX', ARGV[3])
  redis.call('DEL', KEYS[1])
  return tonumber(ARGV[3])
end
return 0
"""


def address_key(address: str) -> str:
    """What one client is counted under: the address itself, an IPv6 one by its /64 (one client's
    share of a network), an IPv4-mapped IPv6 one as IPv4; anything else (a Unix socket) as given."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.ip_network(f"{ip}/64", strict=False))
    return str(ip)


class AuthThrottle:
    """The failed attempts and lockouts of client addresses, under ``<prefix>:auth:{<address>}:…``."""

    def __init__(self, redis: Redis, *, prefix: str, max_failures: int, lockout_ms: int) -> None:
        self.redis, self.prefix = redis, prefix
        self.max_failures, self.lockout_ms = max_failures, lockout_ms
        self._fail = redis.register_script(_FAIL)

    def _keys(self, address: str) -> tuple[str, str]:
        # One hash tag: both keys of an address in one Redis Cluster slot, for the script.
        base = f"{self.prefix}:auth:{{{address_key(address)}}}"
        return f"{base}:failures", f"{base}:locked"

    def locked_ms(self, address: str) -> int:
        """How much longer ``address`` is locked out (ms); 0: it may try."""
        try:
            left = self.redis.pttl(self._keys(address)[1])
        except RedisError as exc:
            log.warning("auth throttle: Redis did not answer (%s); the request is let through", exc)
            return 0
        return max(int(left), 0)

    def failed(self, address: str) -> None:
        """Count a failed attempt of ``address``; the one that reaches the maximum locks it out."""
        try:
            locked = int(
                self._fail(keys=self._keys(address), args=[self.max_failures, WINDOW_MS, self.lockout_ms])
            )
        except RedisError as exc:
            log.warning("auth throttle: Redis did not answer (%s); a failed attempt went uncounted", exc)
            return
        if locked:
            log.warning(
                "auth throttle: %s locked out for %d ms after %d failed attempts",
                address_key(address),
                locked,
                self.max_failures,
            )
