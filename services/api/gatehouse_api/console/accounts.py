"""Accounts & gates: every seller account with its gate, and one account's gate, pauses and timeline."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import falcon

from gatehouse.accounts import KEY_PREFIX
from gatehouse.accounts import Accounts as AccountStore
from gatehouse.freshness import FreshnessStore
from gatehouse.job_types import REGISTRY
from gatehouse.wb import tokens
from gatehouse_api.console.web import Console, Page, query
from gatehouse_api.resources.accounts import freshness_view, key_list
from gatehouse_api.resources.gates import GateViews
from gatehouse_api.resources.holds import HoldViews
from gatehouse_api.resources.jobs import JobViews, job_view

PAGE = 50
RECENT_JOBS = 50
TIMELINE_SPAN = timedelta(hours=24)
TIMELINE_MIN = timedelta(seconds=10)  # the shortest window drawn: a run that just began is not all of it
# The timeline's drawing: viewBox units (the SVG scales to the page's width).
WIDTH, LANE, GAP = 1000, 30, 8


def _until(now: datetime, ms: int | None) -> datetime | None:
    return None if ms is None else now + timedelta(milliseconds=ms)


class Accounts(Page):
    """GET /console/accounts: the twin of GET /v1/admin/accounts (name, hot, cursor)."""

    def __init__(self, console: Console, gates: GateViews) -> None:
        super().__init__(console)
        self.gates = gates

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        param = query(req)
        found = self.gates.page(param, limit=PAGE)
        now = datetime.now(UTC)
        leases = {a["accountId"]: _until(now, a["gate"]["leaseMsLeft"]) for a in found["items"]}
        self.console.render(
            req,
            resp,
            "accounts.html",
            accounts=found["items"],
            next_cursor=found["nextCursor"],
            leases=leases,
            name=param("name") or "",
            hot=param("hot") == "true",
        )


@dataclass(frozen=True)
class Run:
    """One run interval of a gated job on the timeline (x and width in viewBox units)."""

    job: dict
    lane: int
    start: datetime
    end: datetime
    running: bool
    x: float
    width: float


def timeline(jobs: list[dict], now: datetime) -> tuple[list[str], list[Run], datetime]:
    """The gated jobs' runs (started → finished, or now) of the last 24 h: lanes by job type."""
    since = now - TIMELINE_SPAN
    spans = []
    for j in jobs:
        job_type = REGISTRY.get(j["type"])
        if job_type is None or job_type.gate is None or not j["startedAt"]:
            continue
        start = datetime.fromisoformat(j["startedAt"])
        end = datetime.fromisoformat(j["finishedAt"]) if j["finishedAt"] else now
        if end >= since:
            spans.append((j, max(start, since), end, not j["finishedAt"]))
    if not spans:
        return [], [], now
    origin = min(min(s for _, s, _, _ in spans), now - TIMELINE_MIN)
    total = (now - origin).total_seconds()
    lanes = sorted({j["type"] for j, *_ in spans})
    runs = []
    for j, start, end, running in sorted(spans, key=lambda s: s[1]):
        x = (start - origin).total_seconds() / total * WIDTH
        width = max((end - start).total_seconds() / total * WIDTH, 2.0)
        runs.append(
            Run(j, lanes.index(j["type"]), start, end, running, round(x, 1), round(min(width, WIDTH - x), 1))
        )
    return lanes, runs, origin


class Account(Page):
    """GET /console/accounts/{accountId}: its WB token (GET /v1/accounts/{id}: categories, seller,
    expiry, warned within WB_TOKEN_EXPIRY_WARNING_MS), its gate (GET /v1/admin/accounts/{id}/gate), its
    recent 429 pauses, the timeline of its gated jobs, its data freshness (GET /v1/accounts/{id}/freshness), its recent jobs (GET /v1/accounts/{id}/jobs)
    and its keys (GET /v1/accounts/{id}/keys)."""

    def __init__(
        self,
        console: Console,
        gates: GateViews,
        jobs: JobViews,
        accounts: AccountStore,
        freshness: FreshnessStore,
        holds: HoldViews,
    ) -> None:
        super().__init__(console)
        self.gates, self.jobs, self.accounts = gates, jobs, accounts
        self.freshness, self.holds = freshness, holds

    def on_get(self, req: falcon.Request, resp: falcon.Response, account_id: uuid.UUID) -> None:
        view = self.gates.account(account_id)
        jobs = [job_view(j) for j in self.jobs.recent(account_id, limit=RECENT_JOBS)]
        now = datetime.now(UTC)
        stored = self.accounts.get(account_id)
        lanes, runs, origin = timeline(jobs, now)
        by_id = {j["jobId"]: j for j in jobs}
        self.console.render(
            req,
            resp,
            "account.html",
            account=view,
            hold=self.holds.account(account_id),
            gate=view["gate"],
            lease_until=_until(now, view["gate"]["leaseMsLeft"]),
            waited={
                w["jobId"]: int((now - datetime.fromisoformat(w["waitingSince"])).total_seconds() * 1000)
                for w in view["gate"]["waiters"]
            },
            jobs=jobs,
            keys=key_list(self.accounts.keys(account_id))["items"],
            token={
                "access": tokens.access_view(stored.token_access),
                "seller": stored.seller,
                "expiresAt": stored.token_expires_at,
                "invalid": stored.token_invalid,
                "warning": self.jobs.token_warning_of(stored.token_expires_at, now),
            },
            freshness=freshness_view(self.freshness.of_account(account_id))["datasets"],
            key_prefix=KEY_PREFIX,
            by_id=by_id,
            lanes=lanes,
            runs=runs,
            origin=origin,
            geometry={
                "width": WIDTH,
                "lane": LANE,
                "gap": GAP,
                "height": max(len(lanes), 1) * (LANE + GAP) + 20,
            },
        )
