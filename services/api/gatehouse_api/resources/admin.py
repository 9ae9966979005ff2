"""Operator views (admin token only)."""

from __future__ import annotations

import uuid

import falcon

from gatehouse.composition import Gatehouse
from gatehouse_api.auth import require_admin
from gatehouse_api.schemas import GateView


def _job_id(owner: str | None) -> str | None:
    return owner.rsplit(":", 1)[1] if owner else None


class AccountGate:
    """Who holds an account's gate, for how long, who wants it and who waits (best first)."""

    def __init__(self, gh: Gatehouse) -> None:
        self.gh = gh

    def on_get(self, req: falcon.Request, resp: falcon.Response, account_id: uuid.UUID) -> None:
        require_admin(req)
        self.gh.accounts.get(account_id)
        state = self.gh.gate.inspect(str(account_id))
        resp.media = GateView(
            holder=_job_id(state.holder),
            leaseMsLeft=state.lease_ms_left,
            wanted=_job_id(state.wanted),
            waiting=[_job_id(w.owner) for w in state.waiting],
        ).model_dump(mode="json")
