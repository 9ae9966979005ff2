"""Seller accounts with their gates (admin): who holds each, who waits, WB's recent 429 pauses.

``GateViews`` is the one reading of a page of accounts: two Redis round trips for the whole
page (``RedisGate.inspect_many`` and ``AccountPauses.recent_many``), whatever its size. The JSON
API and the console (gatehouse_api.console.accounts) both answer from it.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime

import falcon
from redis import Redis

from gatehouse.accounts import AccountListing, Accounts
from gatehouse.errors import ValidationFailed
from gatehouse.gate import GateState, RedisGate, job_of
from gatehouse.hot import HotAccounts
from gatehouse.models import Account
from gatehouse.wb import pauses
from gatehouse.wb.pauses import AccountPauses
from gatehouse_api.auth import require_admin
from gatehouse_api.openapi import contract, page_params, query
from gatehouse_api.paging import choice, decode_cursor, encode_cursor, page_limit
from gatehouse_api.schemas import AccountGatePage, AccountGateView, GateView, PauseView, WaiterView

# A hot-only page walks the accounts that may be hot (gatehouse.hot: those a park or a pause noted,
# not every account) newest first, this many at a time, until the page is full.
HOT_CHUNK = 200
# Which accounts of a chunk may be hot, judged in Redis in one call (KEYS: each account's gate,
# waiting set and pauses list, three by three): held with a waiter, or a pause kept. Only those
# are read whole and judged by ``is_hot`` — a page of 1,000 quiet accounts is one round trip,
# not seven reads each.
MAYBE_HOT = """
local out = {}
for i = 1, #KEYS, 3 do
  if (redis.call('EXISTS', KEYS[i]) == 1 and redis.call('ZCARD', KEYS[i + 1]) > 0)
      or redis.call('LLEN', KEYS[i + 2]) > 0 then
    out[#out + 1] = (i - 1) / 3
  end
end
return out
"""
NAME_MAX = 200


def _job_id(owner: str | None) -> uuid.UUID | None:
    return job_of(owner) if owner else None


def gate_view(state: GateState, recent: list[pauses.Pause]) -> GateView:
    return GateView(
        holder=_job_id(state.holder),
        leaseMsLeft=state.lease_ms_left,
        wanted=_job_id(state.wanted),
        waiting=[job_of(w.owner) for w in state.waiting],
        waiters=[
            WaiterView(
                jobId=job_of(w.owner),
                tier=w.tier,
                waitingSince=datetime.fromtimestamp(w.first_wait_ms / 1000, UTC),
            )
            for w in state.waiting
        ],
        recentPauses=[
            PauseView(jobId=p.job_id, at=p.at, resumeAt=p.resume_at, reason=p.reason) for p in recent
        ],
    )


def is_hot(state: GateState, recent: list[pauses.Pause]) -> bool:
    """Held with jobs in line behind the holder, or WB paused one of its jobs lately."""
    return (state.holder is not None and bool(state.waiting)) or bool(recent)


# Accounts as read or as listed: both have the id, name and created_at a view shows.
AnyAccount = Account | AccountListing
Reading = tuple[AnyAccount, GateState, list[pauses.Pause]]


def _view(account: AnyAccount, state: GateState, recent: list[pauses.Pause]) -> dict:
    return AccountGateView(
        accountId=account.id,
        name=account.name,
        createdAt=account.created_at,
        hot=is_hot(state, recent),
        gate=gate_view(state, recent),
    ).model_dump(mode="json")


class GateViews:
    """Accounts with their gates as the API and the console show them."""

    def __init__(
        self, accounts: Accounts, gate: RedisGate, pauses: AccountPauses, hot: HotAccounts, redis: Redis
    ) -> None:
        self.accounts, self.gate, self.pauses, self.hot = accounts, gate, pauses, hot
        self._maybe_hot_script = redis.register_script(MAYBE_HOT)

    def _read(self, accounts: list[AnyAccount]) -> list[Reading]:
        """Each account's gate and recent pauses, in two Redis round trips for all of them."""
        ids = [str(a.id) for a in accounts]
        return list(zip(accounts, self.gate.inspect_many(ids), self.pauses.recent_many(ids), strict=True))

    def _maybe_hot(self, accounts: list[AccountListing]) -> list[AccountListing]:
        keys = []
        for a in accounts:
            gate = self.gate.keys(str(a.id))
            keys += [gate.gate, gate.waiting, self.pauses.key(str(a.id))]
        return [accounts[i] for i in self._maybe_hot_script(keys=keys)] if keys else []

    def of(self, accounts: list[AnyAccount]) -> list[dict]:
        """Each account with its gate and recent pauses (AccountGateView), in two Redis round trips."""
        return [_view(*reading) for reading in self._read(accounts)]

    def account(self, account_id: uuid.UUID) -> dict:
        return self.of([self.accounts.get(account_id)])[0]

    def page(self, param: Callable[[str], str | None], *, limit: int) -> dict:
        """A page (AccountGatePage) of accounts newest first, by ``param``'s name (a part of it, any
        case), hot (``true``: hot ones only) and cursor."""
        name = param("name")
        if name is not None and len(name) > NAME_MAX:
            raise ValidationFailed(f"name must be at most {NAME_MAX} characters", field="name")
        hot_only = choice(param("hot"), "hot", ("true", "false")) == "true"
        cursor = param("cursor")
        before = decode_cursor(cursor) if cursor else None
        found: list[Reading] = []
        ids = [uuid.UUID(a) for a in self.hot.candidates()] if hot_only else None
        while ids != []:  # hot-only and no account may be hot: nothing to walk
            chunk = self.accounts.page(
                name=name, ids=ids, limit=HOT_CHUNK if hot_only else limit + 1, before=before
            )
            if hot_only:
                found += [r for r in self._read(self._maybe_hot(chunk)) if is_hot(r[1], r[2])]
            else:
                found += self._read(chunk)
            if not hot_only or len(found) > limit or len(chunk) < HOT_CHUNK:
                break
            before = (chunk[-1].created_at, chunk[-1].id)
        page, more = found[:limit], len(found) > limit
        return AccountGatePage(
            items=[_view(*r) for r in page], nextCursor=encode_cursor(page[-1][0]) if more else None
        ).model_dump(mode="json")


class AccountGates:
    """Every seller account with its gate (admin), newest first: GET /v1/admin/accounts."""

    def __init__(self, views: GateViews) -> None:
        self.views = views

    @contract(
        "Every seller account with its gate and WB's 429 pauses of the last 24 h, newest first (admin)",
        (200, AccountGatePage, "a page of accounts"),
        (401, 403, 422),
        params=page_params(
            query("name", "a part of the name, any case", maxLength=200),
            query("hot", "true: only accounts that are hot", enum=["true", "false"]),
        ),
    )
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        require_admin(req)
        resp.media = self.views.page(req.get_param, limit=page_limit(req.get_param("limit")))
