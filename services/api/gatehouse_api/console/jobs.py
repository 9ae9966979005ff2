"""Jobs: every account's jobs by state, phase, type, tier, account and time; one job's row; retry, cancel."""

from __future__ import annotations

import json
import uuid
from typing import Any

import falcon

from gatehouse import progress
from gatehouse.errors import Conflict
from gatehouse.handlers import JobHandlers
from gatehouse.job_types import REGISTRY
from gatehouse.models import STATES, TIERS
from gatehouse_api.console.web import PREFIX, Console, Page, back, query
from gatehouse_api.resources.jobs import JobViews, job_view

PAGE = 50
FILTERS = ("state", "phase", "type", "tier", "accountId", "createdAfter", "createdBefore")


class Jobs(Page):
    """GET /console/jobs: the twin of GET /v1/admin/jobs (the same filters and cursor)."""

    def __init__(self, console: Console, jobs: JobViews) -> None:
        super().__init__(console)
        self.jobs = jobs

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        param = query(req)
        found = self.jobs.page(param, limit=PAGE)
        filters = {name: param(name) or "" for name in FILTERS}
        self.console.render(
            req,
            resp,
            "jobs.html",
            jobs=found["items"],
            next_cursor=found["nextCursor"],
            filters=filters,
            choices={
                "state": STATES,
                "phase": progress.PHASES,
                "type": sorted(REGISTRY),
                "tier": TIERS,
            },
        )


def _pretty(value: Any) -> str | None:
    return None if value is None else json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)


def render_job(
    console: Console,
    jobs: JobViews,
    req: falcon.Request,
    resp: falcon.Response,
    job_id: uuid.UUID,
    refused: str | None = None,
) -> None:
    job = jobs.get(job_id)
    console.render(
        req,
        resp,
        "job.html",
        job=job_view(job),
        row=job,
        stored=job.progress or {},
        checkpoint=_pretty(job.checkpoint),
        payload=_pretty(job.payload),
        result=_pretty(job.result),
        refused=refused,
    )


class Job(Page):
    """GET /console/jobs/{jobId}: the status poll's view (GET /v1/jobs/{jobId}) and what its row tells."""

    def __init__(self, console: Console, jobs: JobViews) -> None:
        super().__init__(console)
        self.jobs = jobs

    def on_get(self, req: falcon.Request, resp: falcon.Response, job_id: uuid.UUID) -> None:
        render_job(self.console, self.jobs, req, resp, job_id)


class _Action(Page):
    """A job action's form: the same domain call as its JSON twin, then back to the job's page.

    A refusal (Conflict: the job is not in a state this action takes) shows the job page
    again with the reason, and changes nothing.
    """

    def __init__(self, console: Console, jobs: JobViews, handlers: JobHandlers) -> None:
        super().__init__(console)
        self.jobs, self.handlers = jobs, handlers

    def act(self, job_id: uuid.UUID, actor: str) -> None:
        raise NotImplementedError

    def on_post(self, req: falcon.Request, resp: falcon.Response, job_id: uuid.UUID) -> None:
        try:
            self.act(job_id, req.context.principal.actor)
        except Conflict as exc:
            resp.status = falcon.HTTP_409
            render_job(self.console, self.jobs, req, resp, job_id, refused=exc.detail)
            return
        back(resp, f"{PREFIX}/jobs/{job_id}")


class RetryJob(_Action):
    """The form twin of POST /v1/jobs/{jobId}/retry: a failed job runs again with fresh attempts."""

    def act(self, job_id: uuid.UUID, actor: str) -> None:
        self.handlers.retry(job_id, actor=actor)


class CancelJob(_Action):
    """The form twin of POST /v1/jobs/{jobId}/cancel: a waiting or delayed job ends failed (cancelled)."""

    def act(self, job_id: uuid.UUID, actor: str) -> None:
        self.handlers.cancel(job_id, actor=actor)
