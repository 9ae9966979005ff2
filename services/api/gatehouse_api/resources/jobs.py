"""Creating jobs (202 + alreadyRunning), reading their status, and an operator's retry and cancel."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import falcon
from redis import RedisError

from gatehouse import digitization, progress
from gatehouse.accounts import Accounts, require_active
from gatehouse.errors import NotFound, ValidationFailed
from gatehouse.gate import RedisGate, job_of, owner
from gatehouse.handlers import BulkAction, JobHandlers
from gatehouse.job_types import AUTOBIDDER_SYNC_USER, IMPORT_KINDS, INVENTORY_SYNC_USER, REGISTRY, JobType
from gatehouse.jobs import AttemptRecord, FinishedCount, JobRecord, JobStore
from gatehouse.models import STATES, TIERS
from gatehouse.paging import instant
from gatehouse.pauses import job_queues
from gatehouse.wb import tokens
from gatehouse_api.auth import principal, require_account, require_admin
from gatehouse_api.body import read_json
from gatehouse_api.openapi import contract, page_params, query
from gatehouse_api.paging import choice, decode_cursor, encode_cursor, page_limit, uuid_param
from gatehouse_api.schemas import (
    BulkAccepted,
    BulkJobsRequest,
    BulkMatched,
    ImportRequest,
    JobAccepted,
    JobAttempts,
    JobAttemptView,
    JobPage,
    JobView,
    SyncRequest,
)


def job_view(
    job: JobRecord, waiting: progress.Waiting | None = None, token_warning: str | None = None
) -> dict:
    """A job as the API shows it; ``waiting``: where it stands at its account's gate, ``token_warning``:
    its account's token expires soon (its status poll)."""
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
            waiting=waiting,
            token_warning=token_warning,
        ),
        result=job.result,
        error=job.error,
        createdAt=job.created_at,
        startedAt=job.started_at,
        finishedAt=job.finished_at,
        cancelRequestedAt=job.cancel_requested_at,
    ).model_dump(mode="json", exclude_unset=True)


def span_ms(start: datetime | None, end: datetime | None) -> int | None:
    """From ``start`` to ``end`` in ms; None while either is unknown."""
    return None if start is None or end is None else int((end - start).total_seconds() * 1000)


def attempt_view(a: AttemptRecord) -> dict:
    return JobAttemptView(
        attempt=a.attempt,
        worker=a.worker,
        startedAt=a.started_at,
        finishedAt=a.finished_at,
        durationMs=span_ms(a.started_at, a.finished_at),
        outcome=a.outcome,
        error={"code": a.error_code, "message": a.error_message} if a.error_code else None,
    ).model_dump(mode="json")


class JobViews:
    """The jobs as the API and the console show them (the read side of gatehouse.jobs)."""

    def __init__(
        self, jobs: JobStore, gate: RedisGate, accounts: Accounts, *, expiry_warning_ms: int
    ) -> None:
        self.jobs, self.gate, self.accounts = jobs, gate, accounts
        self.expiry_warning = timedelta(milliseconds=expiry_warning_ms)

    def get(self, job_id: uuid.UUID) -> JobRecord:
        return self.jobs.require(job_id)

    def token_warning(self, job: JobRecord) -> str | None:
        """What a poll of an account's job adds while the account's WB token expires within
        WB_TOKEN_EXPIRY_WARNING_MS (one prepared statement: the account's row)."""
        if job.account_id is None:
            return None
        return self.token_warning_of(self.accounts.get(job.account_id).token_expires_at, datetime.now(UTC))

    def token_warning_of(self, expires: datetime | None, now: datetime) -> str | None:
        """Until the token expires: once it has, WB's 401 says so (tokenInvalid)."""
        if expires is None or not now < expires <= now + self.expiry_warning:
            return None
        return progress.expiry_warning(expires, now)

    def waiting(self, job: JobRecord) -> progress.Waiting | None:
        """Where a job waiting for its account's gate stands (None for any other job): one Redis read
        of the gate, one row read of its holder (of the same account, so the caller may see it)."""
        if job.account_id is None or (job.progress or {}).get("phase") != progress.WAITING_ACCOUNT:
            return None
        me = owner(job.queue, job.id)
        try:
            gate = self.gate.inspect(str(job.account_id))
        except RedisError:
            return progress.Waiting()
        line = [w.owner for w in gate.waiting]
        position = line.index(me) + 1 if me in line else None
        holder = self.jobs.get(job_of(gate.holder)) if gate.holder and gate.holder != me else None
        if holder is None:
            return progress.Waiting(position=position)
        return progress.Waiting(
            holder_id=holder.id,
            holder_type=holder.type,
            holder_tier=holder.tier,
            holder_phase=(holder.progress or {}).get("phase"),
            position=position,
        )

    def attempts(self, job_id: uuid.UUID) -> list[dict]:
        """The job's runs (JobAttemptView each), oldest first; NotFound if there is no such job."""
        attempts = self.jobs.attempts(job_id)
        if not attempts:
            self.jobs.require(job_id)
        return [attempt_view(a) for a in attempts]

    def finished_counts(
        self, since: datetime, *, coarse_s: int, fine_from: datetime, fine_s: int
    ) -> list[FinishedCount]:
        return self.jobs.finished_counts(since, coarse_s=coarse_s, fine_from=fine_from, fine_s=fine_s)

    def recent(self, account_id: uuid.UUID, *, limit: int) -> list[JobRecord]:
        return self.jobs.list_jobs(account_id=account_id, limit=limit)

    def page(
        self, param: Callable[[str], str | None], *, limit: int, account_id: uuid.UUID | None = None
    ) -> dict:
        """A page (JobPage) of jobs newest first (one account's, with ``account_id``), by ``param``'s
        state, phase, type, tier, queue, accountId, createdAfter, createdBefore, finishedAfter, q and cursor."""
        cursor = param("cursor")
        jobs = self.jobs.list_jobs(
            account_id=account_id or uuid_param(param("accountId"), "accountId"),
            state=choice(param("state"), "state", STATES),
            phase=choice(param("phase"), "phase", progress.PHASES),
            type=choice(param("type"), "type", set(REGISTRY)),
            tier=choice(param("tier"), "tier", TIERS),
            queue=choice(param("queue"), "queue", set(job_queues())),
            created_after=instant(param("createdAfter"), "createdAfter"),
            created_before=instant(param("createdBefore"), "createdBefore"),
            finished_after=instant(param("finishedAfter"), "finishedAfter"),
            q=search_text(param("q")),
            limit=limit + 1,
            before=decode_cursor(cursor) if cursor else None,
        )
        page, more = jobs[:limit], len(jobs) > limit
        return JobPage(
            items=[job_view(j) for j in page], nextCursor=encode_cursor(page[-1]) if more else None
        ).model_dump(mode="json", exclude_unset=True)


INACTIVE_NOTE = (
    "ACCOUNT_INACTIVE: the account is switched off (PATCH /v1/accounts/{accountId}); TOKEN_SCOPE_MISSING "
    "(with `category`): WB said the account's token lacks a category this job needs"
)


class _Create:
    """Write the row and enqueue (or find the live job), then answer 202."""

    def __init__(self, handlers: JobHandlers, accounts: Accounts, *, max_body_bytes: int) -> None:
        self.handlers, self.accounts, self.max_body_bytes = handlers, accounts, max_body_bytes

    def accept(
        self,
        req: falcon.Request,
        resp: falcon.Response,
        job_type: JobType,
        account_id: uuid.UUID,
        payload: dict,
    ) -> None:
        caller = principal(req)
        # An account's own key proves the account exists (its keys go with it) and says whether it
        # is on and what WB refused its token; anyone else's request reads it: one round trip less on
        # the hot path of its creates.
        if caller.account_id == account_id:
            active, access = caller.account_active, caller.account_access
        else:
            account = self.accounts.get(account_id)
            active, access = account.active, account.token_access
        require_active(account_id, active)
        tokens.require_scopes(account_id, access, job_type.needs)
        job, created = self.handlers.submit(job_type, account_id=account_id, payload=payload)
        resp.status = 202
        resp.location = f"/v1/jobs/{job.id}"
        resp.media = JobAccepted(jobId=job.id, alreadyRunning=not created).model_dump(mode="json")


class DigitizationImports(_Create):
    @contract(
        "Start a digitization import (feeds or report) for a period",
        (202, JobAccepted, "accepted, or the live job of this type (alreadyRunning)"),
        (400, 401, 404, 409, 413, 415, 422),
        notes={
            409: INACTIVE_NOTE,
            422: "a field breaks a rule (`errors` lists each): e.g. dateFrom after today (UTC) or after dateTo",
        },
        body=(ImportRequest, True),
    )
    def on_post(self, req: falcon.Request, resp: falcon.Response, account_id: uuid.UUID) -> None:
        require_account(req, account_id)
        body = read_json(req, ImportRequest, max_bytes=self.max_body_bytes)
        digitization.check_period(body.dateFrom, body.dateTo, today=digitization.today_utc())
        payload = {"dateFrom": body.dateFrom.isoformat(), "dateTo": body.dateTo.isoformat()}
        self.accept(req, resp, IMPORT_KINDS[body.kind], account_id, payload)


class _Sync(_Create):
    """A user's WB sync of one kind (``job_type``): an optional empty body, one live job per account."""

    job_type: JobType

    def sync(self, req: falcon.Request, resp: falcon.Response, account_id: uuid.UUID) -> None:
        require_account(req, account_id)
        read_json(req, SyncRequest, max_bytes=self.max_body_bytes, allow_empty=True)
        self.accept(req, resp, self.job_type, account_id, {})


SYNC_REPLIES = (
    (202, JobAccepted, "accepted, or the live sync (alreadyRunning)"),
    (400, 401, 404, 409, 413, 415, 422),
)


class AutobidderSync(_Sync):
    job_type = AUTOBIDDER_SYNC_USER

    @contract(
        "Start an autobidder sync (campaigns, stats, bids)",
        *SYNC_REPLIES,
        notes={409: INACTIVE_NOTE},
        body=(SyncRequest, False),
    )
    def on_post(self, req: falcon.Request, resp: falcon.Response, account_id: uuid.UUID) -> None:
        self.sync(req, resp, account_id)


class InventorySync(_Sync):
    job_type = INVENTORY_SYNC_USER

    @contract(
        "Start an inventory sync (stocks on WB warehouses)",
        *SYNC_REPLIES,
        notes={409: INACTIVE_NOTE},
        body=(SyncRequest, False),
    )
    def on_post(self, req: falcon.Request, resp: falcon.Response, account_id: uuid.UUID) -> None:
        self.sync(req, resp, account_id)


class JobStatus:
    def __init__(self, views: JobViews) -> None:
        self.views = views

    @contract(
        "Poll a job: state and what it is doing or waiting for (waiting for its account's gate: which "
        "job holds it, and its place in line)",
        (200, JobView, "the job"),
        (401, 404),
    )
    def on_get(self, req: falcon.Request, resp: falcon.Response, job_id: uuid.UUID) -> None:
        job = self.views.get(job_id)
        if not principal(req).may_see(job.account_id):
            raise NotFound(f"job {job_id} not found")
        resp.media = job_view(job, self.views.waiting(job), self.views.token_warning(job))


class JobRetry:
    """A failed job runs again with fresh attempts (admin): 202 and the job, waiting."""

    def __init__(self, handlers: JobHandlers) -> None:
        self.handlers = handlers

    @contract(
        "Run a failed job again with fresh attempts (admin); the change is audited",
        (202, JobView, "back in line (waiting, attempt 1) and enqueued; poll its Location"),
        (401, 403, 404, 409),
        notes={
            409: "JOB_NOT_FAILED: only a failed job is retried; JOB_ALREADY_LIVE: its account (or, for a "
            "system job, the system) has a live job of its type, named in `detail`"
        },
    )
    def on_post(self, req: falcon.Request, resp: falcon.Response, job_id: uuid.UUID) -> None:
        require_admin(req)
        job = self.handlers.retry(job_id, actor=principal(req).actor)
        resp.status = 202
        resp.location = f"/v1/jobs/{job.id}"
        resp.media = job_view(job)


class JobCancel:
    """A job ends failed, error code ``cancelled`` (admin): 200 when it waited, 202 while a running one stops."""

    def __init__(self, handlers: JobHandlers) -> None:
        self.handlers = handlers

    @contract(
        "Cancel a job (admin): it ends failed, error code `cancelled`; audited. A running job stops at "
        "its next checkpoint or WB call",
        [
            (200, JobView, "it waited: the job, failed; it leaves its account's gate line and never runs"),
            (202, JobView, "it runs: the job, still active, with cancelRequestedAt; poll its Location"),
        ],
        (401, 403, 404, 409),
        notes={409: "JOB_FINISHED: it has already completed or failed"},
    )
    def on_post(self, req: falcon.Request, resp: falcon.Response, job_id: uuid.UUID) -> None:
        require_admin(req)
        job, stopping = self.handlers.cancel(job_id, actor=principal(req).actor)
        if stopping:
            resp.status = 202
            resp.location = f"/v1/jobs/{job.id}"
        resp.media = job_view(job)


class AccountJobs:
    def __init__(self, views: JobViews, accounts: Accounts) -> None:
        self.views, self.accounts = views, accounts

    @contract(
        "List an account's jobs, newest first",
        (200, JobPage, "a page of jobs"),
        (401, 404, 422),
        params=page_params(query("state", enum=list(STATES)), query("type", enum=sorted(REGISTRY))),
    )
    def on_get(self, req: falcon.Request, resp: falcon.Response, account_id: uuid.UUID) -> None:
        require_account(req, account_id)
        self.accounts.get(account_id)
        # An account's page filters by state and type only (the admin list filters by more).
        given = {"state", "type", "cursor"}
        resp.media = self.views.page(
            lambda name: req.get_param(name) if name in given else None,
            limit=page_limit(req.get_param("limit")),
            account_id=account_id,
        )


SEARCH_MAX = 200


class _AdminJobsRead:
    """An admin read of the jobs, through the views the console renders too."""

    def __init__(self, views: JobViews) -> None:
        self.views = views


class AdminJobAttempts(_AdminJobsRead):
    """A job's attempt records (admin): each run that started its body, as the console's job page shows them."""

    @contract(
        "A job's runs, oldest first: start, end, duration, worker, outcome and error of each (admin)",
        (200, JobAttempts, "its attempts"),
        (401, 403, 404),
    )
    def on_get(self, req: falcon.Request, resp: falcon.Response, job_id: uuid.UUID) -> None:
        require_admin(req)
        resp.media = JobAttempts(items=self.views.attempts(job_id)).model_dump(mode="json")


class AdminJobs(_AdminJobsRead):
    """Every account's jobs (admin), newest first, filtered like the console's jobs page."""

    @contract(
        "Every account's jobs, newest first, as the status poll shows each (admin)",
        (200, JobPage, "a page of jobs"),
        (401, 403, 422),
        params=page_params(
            query("state", enum=list(STATES)),
            query("phase", "progress.phase", enum=list(progress.PHASES)),
            query("type", enum=sorted(REGISTRY)),
            query("tier", enum=list(TIERS)),
            query("queue", enum=job_queues()),
            query("accountId", format="uuid"),
            query("createdAfter", "ISO 8601, inclusive (no offset: UTC)", format="date-time"),
            query("createdBefore", "ISO 8601, exclusive (no offset: UTC)", format="date-time"),
            query("finishedAfter", "ISO 8601, inclusive (no offset: UTC)", format="date-time"),
            query(
                "q",
                "a job id or its first 4+ hex digits, a part of its account's name (any case), or an error code",
                maxLength=SEARCH_MAX,
            ),
        ),
    )
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        require_admin(req)
        resp.media = self.views.page(req.get_param, limit=page_limit(req.get_param("limit")))


def search_text(raw: str | None) -> str | None:
    """The jobs list's ``q``: absent or blank is no search."""
    if raw is None or not raw.strip():
        return None
    if len(raw) > SEARCH_MAX:
        raise ValidationFailed(f"q must be at most {SEARCH_MAX} characters", field="q")
    return raw.strip()


class _Bulk:
    """A bulk retry or cancel (admin): a dry run counts, otherwise one maintenance:bulk-jobs job does it."""

    action: BulkAction

    def __init__(self, handlers: JobHandlers, *, max_body_bytes: int) -> None:
        self.handlers, self.max_body_bytes = handlers, max_body_bytes

    def bulk(self, req: falcon.Request, resp: falcon.Response) -> None:
        require_admin(req)
        body = read_json(req, BulkJobsRequest, max_bytes=self.max_body_bytes, allow_empty=True)
        filters = body.filter.model_dump(mode="json", exclude_none=True)
        if body.dryRun:
            resp.media = BulkMatched(matched=self.handlers.matching(self.action, filters)).model_dump(
                mode="json"
            )
            return
        job, matched = self.handlers.start_bulk(self.action, filters, actor=principal(req).actor)
        resp.status = 202
        resp.location = f"/v1/jobs/{job.id}"
        resp.media = BulkAccepted(operationId=job.id, matched=matched).model_dump(mode="json")


BULK_REPLIES = (
    [
        (200, BulkMatched, "dryRun: how many jobs match now; nothing queued"),
        (202, BulkAccepted, "queued: one job takes every match, batch by batch; poll its Location"),
    ],
    (400, 401, 403, 413, 415, 422),
)
BULK_NOTES = {422: "a filter field is invalid or not for this action, named in `field` (e.g. `filter.state`)"}


class BulkRetry(_Bulk):
    action = "retry"

    @contract(
        "Retry every failed job that matches the filter (admin; each retry audited)",
        *BULK_REPLIES,
        notes=BULK_NOTES,
        body=(BulkJobsRequest, False),
    )
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        self.bulk(req, resp)


class BulkCancel(_Bulk):
    action = "cancel"

    @contract(
        "Cancel every waiting or delayed job that matches the filter (admin; each cancel audited)",
        *BULK_REPLIES,
        notes=BULK_NOTES,
        body=(BulkJobsRequest, False),
    )
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        self.bulk(req, resp)
