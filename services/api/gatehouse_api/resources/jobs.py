"""Creating jobs (202 + alreadyRunning), reading their status, and an operator's retry and cancel."""

from __future__ import annotations

import uuid
from collections.abc import Callable

import falcon

from gatehouse import progress
from gatehouse.composition import Components
from gatehouse.errors import NotFound, ValidationFailed
from gatehouse.job_types import AUTOBIDDER_SYNC_USER, IMPORT_KINDS, REGISTRY, JobType
from gatehouse.jobs import JobRecord
from gatehouse.models import STATES, TIERS
from gatehouse.paging import instant
from gatehouse_api.auth import principal, require_account, require_admin
from gatehouse_api.body import read_json
from gatehouse_api.paging import choice, decode_cursor, encode_cursor, page_limit, uuid_param
from gatehouse_api.schemas import AutobidderSyncRequest, ImportRequest, JobAccepted, JobPage, JobView


def job_view(job: JobRecord) -> dict:
    return JobView(
        jobId=job.id,
        type=job.type,
        accountId=job.account_id,
        tier=job.tier,
        state=job.state,
        progress=progress.render(
            job.progress,
            job_type=job.type,
            attempt=job.attempt,
            max_attempts=job.max_attempts,
            result=job.result,
        ),
        result=job.result,
        error=job.error,
        createdAt=job.created_at,
        startedAt=job.started_at,
        finishedAt=job.finished_at,
    ).model_dump(mode="json")


def accept(
    req: falcon.Request,
    gh: Components,
    resp: falcon.Response,
    job_type: JobType,
    account_id: uuid.UUID,
    payload: dict,
) -> None:
    """Write the row and enqueue (or find the live job), then answer 202."""
    if principal(req).account_id != account_id:
        # An account's own key proves the account exists (its keys go with it); anyone else's
        # request reads it: one round trip less on the hot path of an account's creates.
        gh.accounts.get(account_id)
    job, created = gh.job_handlers.submit(job_type, account_id=account_id, payload=payload)
    resp.status = 202
    resp.location = f"/v1/jobs/{job.id}"
    resp.media = JobAccepted(jobId=job.id, alreadyRunning=not created).model_dump(mode="json")


class DigitizationImports:
    def __init__(self, gh: Components) -> None:
        self.gh = gh

    def on_post(self, req: falcon.Request, resp: falcon.Response, account_id: uuid.UUID) -> None:
        require_account(req, account_id)
        body = read_json(req, ImportRequest, max_bytes=self.gh.settings.max_body_bytes)
        if body.dateFrom > body.dateTo:
            raise ValidationFailed("dateFrom must not be after dateTo", field="dateTo")
        payload = {"dateFrom": body.dateFrom.isoformat(), "dateTo": body.dateTo.isoformat()}
        accept(req, self.gh, resp, IMPORT_KINDS[body.kind], account_id, payload)


class AutobidderSync:
    def __init__(self, gh: Components) -> None:
        self.gh = gh

    def on_post(self, req: falcon.Request, resp: falcon.Response, account_id: uuid.UUID) -> None:
        require_account(req, account_id)
        read_json(req, AutobidderSyncRequest, max_bytes=self.gh.settings.max_body_bytes, allow_empty=True)
        accept(req, self.gh, resp, AUTOBIDDER_SYNC_USER, account_id, {})


class JobStatus:
    def __init__(self, gh: Components) -> None:
        self.gh = gh

    def on_get(self, req: falcon.Request, resp: falcon.Response, job_id: uuid.UUID) -> None:
        job = self.gh.jobs.get(job_id)
        if job is None or not principal(req).may_see(job.account_id):
            raise NotFound(f"job {job_id} not found")
        resp.media = job_view(job)


class JobRetry:
    """A failed job runs again with fresh attempts (admin): 202 and the job, waiting."""

    def __init__(self, gh: Components) -> None:
        self.gh = gh

    def on_post(self, req: falcon.Request, resp: falcon.Response, job_id: uuid.UUID) -> None:
        require_admin(req)
        job = self.gh.job_handlers.retry(job_id, actor=principal(req).actor)
        resp.status = 202
        resp.location = f"/v1/jobs/{job.id}"
        resp.media = job_view(job)


class JobCancel:
    """A waiting or delayed job ends failed, error code ``cancelled`` (admin): 200 and the job."""

    def __init__(self, gh: Components) -> None:
        self.gh = gh

    def on_post(self, req: falcon.Request, resp: falcon.Response, job_id: uuid.UUID) -> None:
        require_admin(req)
        resp.media = job_view(self.gh.job_handlers.cancel(job_id, actor=principal(req).actor))


class AccountJobs:
    def __init__(self, gh: Components) -> None:
        self.gh = gh

    def on_get(self, req: falcon.Request, resp: falcon.Response, account_id: uuid.UUID) -> None:
        require_account(req, account_id)
        self.gh.accounts.get(account_id)
        state = choice(req.get_param("state"), "state", STATES)
        job_type = choice(req.get_param("type"), "type", set(REGISTRY))
        limit = page_limit(req.get_param("limit"))
        cursor = req.get_param("cursor")
        before = decode_cursor(cursor) if cursor else None
        jobs = self.gh.jobs.list_jobs(
            account_id=account_id, state=state, type=job_type, limit=limit + 1, before=before
        )
        page, more = jobs[:limit], len(jobs) > limit
        resp.media = JobPage(
            items=[job_view(j) for j in page], nextCursor=encode_cursor(page[-1]) if more else None
        ).model_dump(mode="json")


def job_page(gh: Components, param: Callable[[str], str | None], *, limit: int) -> dict:
    """A page (JobPage) of every account's jobs, newest first, by ``param``'s state, phase, type, tier,
    accountId, createdAfter, createdBefore and cursor."""
    account = param("accountId")
    account_id = uuid_param(account, "accountId")
    cursor = param("cursor")
    jobs = gh.jobs.list_jobs(
        account_id=account_id,
        state=choice(param("state"), "state", STATES),
        phase=choice(param("phase"), "phase", progress.PHASES),
        type=choice(param("type"), "type", set(REGISTRY)),
        tier=choice(param("tier"), "tier", TIERS),
        created_after=instant(param("createdAfter"), "createdAfter"),
        created_before=instant(param("createdBefore"), "createdBefore"),
        limit=limit + 1,
        before=decode_cursor(cursor) if cursor else None,
    )
    page, more = jobs[:limit], len(jobs) > limit
    return JobPage(
        items=[job_view(j) for j in page], nextCursor=encode_cursor(page[-1]) if more else None
    ).model_dump(mode="json")


class AdminJobs:
    """Every account's jobs (admin), newest first, filtered like the console's jobs page."""

    def __init__(self, gh: Components) -> None:
        self.gh = gh

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        require_admin(req)
        resp.media = job_page(self.gh, req.get_param, limit=page_limit(req.get_param("limit")))
