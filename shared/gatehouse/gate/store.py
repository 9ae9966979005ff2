"""The per-account gate on Redis: the Lua scripts beside this module, one call each.

Every rule is one atomic script over the account's keys (see
``vocabulary.gate_keys``, under the prefix the gate is given); its pure twin in
``reference`` is the spec. The requests validate the arguments before anything
reaches Redis. Beside the rules the gate keeps one metric fact: when it was
last handed to a waiter (``handed_off``).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, cast

from redis import Redis
from redis.commands.core import Script

from gatehouse import hot
from gatehouse.gate.reference import (
    AcquireRequest,
    AcquireResult,
    Decision,
    ExtendRequest,
    ForgetRequest,
    GateState,
    HeartbeatRequest,
    ReleaseRequest,
    ReleaseResult,
    Tier,
    Waiter,
    YieldRequest,
)
from gatehouse.gate.vocabulary import GateKeys, gate_keys, released_key

_HERE = Path(__file__).parent
SCRIPTS = ("acquire", "heartbeat", "extend", "release", "yield", "forget")


def _text(value: bytes | str | None) -> str | None:
    # The client may or may not decode responses.
    if value is None or isinstance(value, str):
        return value
    return value.decode()


def _ttl(pttl: int) -> int | None:
    # PTTL -2: no key. -1 (no expiry) is kept: these scripts never write it.
    return None if pttl == -2 else pttl


class RedisGate:
    """The gate rules of ``gatehouse.gate.reference``, run atomically on Redis.

    Construction only reads the scripts and hashes them; the first call
    loads each script into Redis (EVALSHA, then SCRIPT LOAD on NOSCRIPT).
    Every key starts with ``prefix``. A release that has a waiter to wake
    marks its moment for ``released_ttl_ms`` (one lease: a waiter that takes
    the gate later was not handed it).
    """

    def __init__(self, client: Redis, *, prefix: str, released_ttl_ms: int = 90_000) -> None:
        self.client = client
        self.prefix = prefix
        self.released_ttl_ms = released_ttl_ms
        self._scripts: dict[str, Script] = {
            name: client.register_script((_HERE / f"{name}.lua").read_text(encoding="utf-8"))
            for name in SCRIPTS
        }

    def keys(self, account_id: str) -> GateKeys:
        return gate_keys(self.prefix, account_id)

    def acquire(
        self,
        account_id: str,
        owner: str,
        *,
        tier: Tier,
        lease_ms: int,
        wanted_ttl_ms: int,
        waiting_ttl_ms: int,
        first_wait_ms: int,
    ) -> AcquireResult:
        req = AcquireRequest(owner, tier, lease_ms, wanted_ttl_ms, waiting_ttl_ms, first_wait_ms)
        decision, holder, lease_left = self._scripts["acquire"](
            keys=list(self.keys(account_id)),
            args=[
                req.owner,
                req.tier,
                req.lease_ms,
                req.wanted_ttl_ms,
                req.waiting_ttl_ms,
                req.first_wait_ms,
            ],
        )
        result = AcquireResult(
            cast(Decision, _text(decision)), _text(holder), None if holder is None else _ttl(lease_left)
        )
        if not result.proceed:
            # Parked: the account may be hot (held, someone in line) until its waiting set expires.
            pipe = self.client.pipeline(transaction=False)
            hot.note(pipe, self.prefix, account_id, until_ms=hot.now_ms() + req.waiting_ttl_ms)
            pipe.execute()
        return result

    def heartbeat(self, account_id: str, owner: str, *, lease_ms: int) -> bool:
        """Renew the lease; False means the lease was lost and the job must stop touching WB."""
        req = HeartbeatRequest(owner, lease_ms)
        keys = self.keys(account_id)
        return bool(self._scripts["heartbeat"](keys=[keys.gate], args=[req.owner, req.lease_ms]))

    def heartbeat_many(self, holds: list[tuple[str, str]], *, lease_ms: int) -> set[tuple[str, str]]:
        """Renew many leases in one round trip (a pipeline of heartbeats: an account's keys
        are its own Cluster slot, so no single script may span accounts).

        ``holds`` are (account_id, owner); returns those whose lease was lost.
        """
        if not holds:
            return set()
        script = self._scripts["heartbeat"]
        pipe = self.client.pipeline(transaction=False)
        for account_id, owner in holds:
            req = HeartbeatRequest(owner, lease_ms)
            script(keys=[self.keys(account_id).gate], args=[req.owner, req.lease_ms], client=pipe)
        kept = pipe.execute()
        return {hold for hold, ok in zip(holds, kept, strict=True) if not ok}

    def extend(self, account_id: str, owner: str, *, lease_ms: int) -> bool:
        """Keep the gate over a WB rate-limit pause: ``lease_ms`` = pause + margin."""
        req = ExtendRequest(owner, lease_ms)
        keys = self.keys(account_id)
        return bool(self._scripts["extend"](keys=[keys.gate], args=[req.owner, req.lease_ms]))

    def release(self, account_id: str, owner: str) -> ReleaseResult:
        req = ReleaseRequest(owner)
        keys = self.keys(account_id)
        released, best = self._scripts["release"](keys=[keys.gate, keys.waiting], args=[req.owner])
        return self._handing_off(account_id, ReleaseResult(bool(released), _text(best)))

    def yield_if_wanted(self, account_id: str, owner: str) -> ReleaseResult:
        req = YieldRequest(owner)
        released, best = self._scripts["yield"](keys=list(self.keys(account_id)), args=[req.owner])
        return self._handing_off(account_id, ReleaseResult(bool(released), _text(best)))

    def _handing_off(self, account_id: str, result: ReleaseResult) -> ReleaseResult:
        # The moment a waiter is to be woken: the hand-off ends when it takes the gate (handed_off).
        if result.best_waiter is not None:
            now_ms = int(time.time() * 1000)
            self.client.set(released_key(self.prefix, account_id), now_ms, px=self.released_ttl_ms)
        return result

    def handed_off(self, account_id: str) -> int | None:
        """When the gate just taken was released to a waiter (epoch ms), once: None if it was not."""
        released = self.client.getdel(released_key(self.prefix, account_id))
        return None if released is None else int(released)

    def forget(self, account_id: str, owner: str) -> bool:
        req = ForgetRequest(owner)
        keys = self.keys(account_id)
        return bool(self._scripts["forget"](keys=[keys.waiting, keys.wanted], args=[req.owner]))

    def inspect(self, account_id: str) -> GateState:
        """A consistent snapshot of the account's keys (one MULTI; read-only)."""
        return self.inspect_many([account_id])[0]

    def inspect_many(self, account_ids: list[str]) -> list[GateState]:
        """``inspect`` of each account (in their order) in one round trip: one MULTI of their reads.

        Read-only and short (six reads an account); a caller with many accounts asks for a
        page at a time. One MULTI, not a script an account: the console reads a page of
        accounts on one Redis, and each snapshot stays as consistent as ``inspect``'s.
        """
        if not account_ids:
            return []
        pipe = self.client.pipeline(transaction=True)
        for account_id in account_ids:
            keys = self.keys(account_id)
            pipe.get(keys.gate)
            pipe.pttl(keys.gate)
            pipe.get(keys.wanted)
            pipe.pttl(keys.wanted)
            pipe.zrange(keys.waiting, 0, -1, withscores=True)
            pipe.pttl(keys.waiting)
        replies = pipe.execute()
        return [_state(*replies[i : i + 6]) for i in range(0, len(replies), 6)]


def _state(
    holder: Any, lease: int, wanted: Any, wanted_ttl: int, waiting: Any, waiting_ttl: int
) -> GateState:
    waiters = tuple(Waiter(cast(str, _text(member)), int(score)) for member, score in waiting)
    return GateState(
        holder=_text(holder),
        lease_ms_left=None if holder is None else _ttl(lease),
        wanted=_text(wanted),
        wanted_ms_left=None if wanted is None else _ttl(wanted_ttl),
        waiting=waiters,
        waiting_ms_left=_ttl(waiting_ttl) if waiters else None,
    )
