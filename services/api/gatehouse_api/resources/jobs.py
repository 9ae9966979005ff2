"""Creating jobs (202 + alreadyRunning) and reading their status."""

from __future__ import annotations

import base64
import uuid
from datetime import datetime

import falcon

from gatehouse import progress
from gatehouse.composition import Gatehouse
from gatehouse.errors import NotFound, ValidationFailed
from gatehouse.job_types import AUTOBIDDER_SYNC_USER, IMPORT_KINDS, REGISTRY, JobType
from gatehouse.models import STATES, Job
from gatehouse_api.auth import principal, require_account
from gatehouse_api.body import read_json
from gatehouse_api.schemas import AutobidderSyncRequest, ImportRequest, JobAccepted, JobPage, JobView

MAX_PAGE = 200


def job_view(job: Job) -> dict:
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


def encode_cursor(job: Job) -> str:
    return base64.urlsafe_b64encode(f"{job.created_at.isoformat()}|{job.id}".encode()).decode()


def decode_cursor(cursor: str) -> tuple[datetime, uuid.UUID]:
    try:
        created, _, job_id = base64.urlsafe_b64decode(cursor.encode()).decode().partition("|")
        return datetime.fromisoformat(created), uuid.UUID(job_id)
    except ValueError:
        raise ValidationFailed("cursor is not a cursor returned by this endpoint", field="cursor") from None


class AccountJobs:
    def __init__(self, gh: Gatehouse) -> None:
        self.gh = gh

    def on_get(self, req: falcon.Request, resp: falcon.Response, account_id: uuid.UUID) -> None:
        require_account(req, account_id)
        self.gh.accounts.get(account_id)
        state = req.get_param("state") or None
        if state is not None and state not in STATES:
            raise ValidationFailed(f"state must be one of {', '.join(STATES)}", field="state")
        job_type = req.get_param("type") or None
        if job_type is not None and job_type not in REGISTRY:
            raise ValidationFailed(f"type must be one of {', '.join(sorted(REGISTRY))}", field="type")
        limit = _limit(req.get_param("limit"))
        cursor = req.get_param("cursor")
        before = decode_cursor(cursor) if cursor else None
        jobs = self.gh.jobs.list_for_account(
            account_id, state=state, type=job_type, limit=limit + 1, before=before
        )
        page, more = jobs[:limit], len(jobs) > limit
        resp.media = JobPage(
            items=[job_view(j) for j in page], nextCursor=encode_cursor(page[-1]) if more else None
        ).model_dump(mode="json")


def _limit(raw: str | None) -> int:
    if raw is None or raw == "":
        return 50
    # ASCII digits only (str.isdigit() also takes "²" or "٣", which int() refuses or reads),
    # and few of them (int() refuses thousands of digits).
    if not (raw.isascii() and raw.isdigit() and len(raw) <= 10) or not 1 <= int(raw) <= MAX_PAGE:
        raise ValidationFailed(f"limit must be an integer from 1 to {MAX_PAGE}", field="limit")
    return int(raw)
