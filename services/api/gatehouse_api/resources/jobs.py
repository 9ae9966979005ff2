"""Creating jobs (202 + alreadyRunning) and reading their status."""

from __future__ import annotations

import uuid

import falcon

from gatehouse import progress
from gatehouse.composition import Gatehouse
from gatehouse.errors import NotFound, ValidationFailed
from gatehouse.job_types import AUTOBIDDER_SYNC_USER, IMPORT_KINDS, REGISTRY, JobType
from gatehouse.jobs import JobRecord
from gatehouse.models import STATES
from gatehouse_api.auth import principal, require_account
from gatehouse_api.body import read_json
from gatehouse_api.paging import choice, decode_cursor, encode_cursor, page_limit
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
    gh: Gatehouse, resp: falcon.Response, job_type: JobType, account_id: uuid.UUID, payload: dict
) -> None:
    """Write the row and enqueue (or find the live job), then answer 202."""
    gh.accounts.get(account_id)
    job, created = gh.submit(job_type, account_id=account_id, payload=payload)
    resp.status = 202
    resp.location = f"/v1/jobs/{job.id}"
    resp.media = JobAccepted(jobId=job.id, alreadyRunning=not created).model_dump(mode="json")


class DigitizationImports:
    def __init__(self, gh: Gatehouse) -> None:
        self.gh = gh

    def on_post(self, req: falcon.Request, resp: falcon.Response, account_id: uuid.UUID) -> None:
        require_account(req, account_id)
        body = read_json(req, ImportRequest, max_bytes=self.gh.settings.max_body_bytes)
        if body.dateFrom > body.dateTo:
            raise ValidationFailed("dateFrom must not be after dateTo", field="dateTo")
        payload = {"dateFrom": body.dateFrom.isoformat(), "dateTo": body.dateTo.isoformat()}
        accept(self.gh, resp, IMPORT_KINDS[body.kind], account_id, payload)


class AutobidderSync:
    def __init__(self, gh: Gatehouse) -> None:
        self.gh = gh

    def on_post(self, req: falcon.Request, resp: falcon.Response, account_id: uuid.UUID) -> None:
        require_account(req, account_id)
        read_json(req, AutobidderSyncRequest, max_bytes=self.gh.settings.max_body_bytes, allow_empty=True)
        accept(self.gh, resp, AUTOBIDDER_SYNC_USER, account_id, {})


class JobStatus:
    def __init__(self, gh: Gatehouse) -> None:
        self.gh = gh

    def on_get(self, req: falcon.Request, resp: falcon.Response, job_id: uuid.UUID) -> None:
        job = self.gh.jobs.get(job_id)
        if job is None or not principal(req).may_see(job.account_id):
            raise NotFound(f"job {job_id} not found")
        resp.media = job_view(job)


class AccountJobs:
    def __init__(self, gh: Gatehouse) -> None:
        self.gh = gh

    def on_get(self, req: falcon.Request, resp: falcon.Response, account_id: uuid.UUID) -> None:
        require_account(req, account_id)
        self.gh.accounts.get(account_id)
        state = choice(req.get_param("state"), "state", STATES)
        job_type = choice(req.get_param("type"), "type", set(REGISTRY))
        limit = page_limit(req.get_param("limit"))
        cursor = req.get_param("cursor")
        before = decode_cursor(cursor) if cursor else None
        jobs = self.gh.jobs.list_for_account(
            account_id, state=state, type=job_type, limit=limit + 1, before=before
        )
        page, more = jobs[:limit], len(jobs) > limit
        resp.media = JobPage(
            items=[job_view(j) for j in page], nextCursor=encode_cursor(page[-1]) if more else None
        ).model_dump(mode="json")
