"""Jobs: every account's jobs by state, phase, type, tier, queue, account, time and a search; one
job's row and attempts; retry, cancel (after a confirm step), and retry or cancel all that match the
filter (the same)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

import falcon

from gatehouse import progress
from gatehouse.accounts import Accounts as AccountStore
from gatehouse.errors import Conflict, NotFound, ValidationFailed
from gatehouse.handlers import BULK_STATES, BulkAction, JobHandlers
from gatehouse.job_types import REGISTRY
from gatehouse.jobs import JobRecord
from gatehouse.models import STATES, TIERS
from gatehouse.pauses import job_queues
from gatehouse_api.console.web import PREFIX, Confirmed, Console, Page, back, form, query
from gatehouse_api.resources.gates import GateViews
from gatehouse_api.resources.jobs import JobViews, job_view, span_ms

PAGE = 50
FILTERS = (
    "q",
    "state",
    "phase",
    "type",
    "tier",
    "queue",
    "accountId",
    "createdAfter",
    "createdBefore",
    "finishedAfter",
)
NO_PAGE = {"items": [], "nextCursor": None}
# What of the list's filter a bulk action takes (gatehouse.handlers.job_filter); the others narrow only the list.
BULK_FILTERS = ("state", "type", "accountId")


def _is_uuid(raw: str) -> bool:
    try:
        uuid.UUID(raw)
    except ValueError:
        return False
    return True


class Jobs(Page):
    """GET /console/jobs: the twin of GET /v1/admin/jobs (the same filters and cursor), whose account
    filter also takes an account's name; a bad filter is said beside the form, its values kept."""

    def __init__(self, console: Console, jobs: JobViews, accounts: AccountStore) -> None:
        super().__init__(console)
        self.jobs, self.accounts = jobs, accounts

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        param = query(req)
        filters = {name: param(name) or "" for name in FILTERS}
        error, resolved = None, None
        try:
            resolved = self._by_account_name(param)
            found = self.jobs.page(resolved, limit=PAGE)
        except ValidationFailed as exc:  # the page as asked, its form as filled, the error beside it
            error, found = exc.detail, NO_PAGE
        self.console.render(
            req,
            resp,
            "jobs.html",
            jobs=found["items"],
            names={
                str(k): v
                for k, v in self.accounts.names(
                    {uuid.UUID(j["accountId"]) for j in found["items"] if j["accountId"]}
                ).items()
            },
            next_cursor=found["nextCursor"],
            filters=filters,
            error=error,
            bulk={name: value for name in BULK_FILTERS if resolved and (value := resolved(name))},
            choices={
                "state": STATES,
                "phase": progress.PHASES,
                "type": sorted(REGISTRY),
                "tier": TIERS,
                "queue": job_queues(),
            },
        )

    def _by_account_name(self, param: Callable[[str], str | None]) -> Callable[[str], str | None]:
        """``param`` with an account's name in accountId replaced by its id (unknown or shared: refused)."""
        name = param("accountId")
        if name is None or _is_uuid(name):
            return param
        found = self.accounts.named(name)
        if len(found) != 1:
            why = "no account is named" if not found else "more than one account is named"
            raise ValidationFailed(f"{why} “{name}”: give its id", field="accountId")
        return lambda key: str(found[0]) if key == "accountId" else param(key)


def _pretty(value: Any) -> str | None:
    return None if value is None else json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)


def render_job(
    console: Console,
    jobs: JobViews,
    gates: GateViews,
    req: falcon.Request,
    resp: falcon.Response,
    job_id: uuid.UUID,
    refused: str | None = None,
) -> None:
    job = jobs.get(job_id)
    attempts = jobs.attempts(job_id)  # JobAttemptView each, as GET /v1/admin/jobs/{jobId}/attempts
    console.render(
        req,
        resp,
        "job.html",
        job=job_view(job),
        row=job,
        stored=job.progress or {},
        attempts=attempts,
        # From its creation to its end (waits included), and the time its runs took.
        total_ms=span_ms(job.created_at, job.finished_at),
        run_ms=sum(a["durationMs"] or 0 for a in attempts),
        holder=_gate_holder(jobs, gates, job),
        checkpoint=_pretty(job.checkpoint),
        payload=_pretty(job.payload),
        result=_pretty(job.result),
        refused=refused,
    )


def _gate_holder(jobs: JobViews, gates: GateViews, job: JobRecord) -> JobRecord | uuid.UUID | None:
    """The job that holds the gate a job waits for (its id if its row is gone), or None."""
    if job.account_id is None or (job.progress or {}).get("phase") != progress.WAITING_ACCOUNT:
        return None
    try:
        holder = gates.account(job.account_id)["gate"]["holder"]
    except NotFound:
        return None
    if holder is None:
        return None
    try:
        return jobs.get(uuid.UUID(holder))
    except NotFound:
        return uuid.UUID(holder)


class Job(Page):
    """GET /console/jobs/{jobId}: the status poll's view (GET /v1/jobs/{jobId}), what its row tells,
    its attempts (job_attempts) and, while it waits for its account's gate, the gate's holder."""

    def __init__(self, console: Console, jobs: JobViews, gates: GateViews) -> None:
        super().__init__(console)
        self.jobs, self.gates = jobs, gates

    def on_get(self, req: falcon.Request, resp: falcon.Response, job_id: uuid.UUID) -> None:
        render_job(self.console, self.jobs, self.gates, req, resp, job_id)


class _Action(Page):
    """A job action's form: the same domain call as its JSON twin, then back to the job's page.

    A refusal (Conflict: the job is not in a state this action takes) shows the job page
    again with the reason, and changes nothing.
    """

    def __init__(self, console: Console, jobs: JobViews, gates: GateViews, handlers: JobHandlers) -> None:
        super().__init__(console)
        self.jobs, self.gates, self.handlers = jobs, gates, handlers

    def act(self, job_id: uuid.UUID, actor: str) -> None:
        raise NotImplementedError

    def on_post(self, req: falcon.Request, resp: falcon.Response, job_id: uuid.UUID) -> None:
        try:
            self.act(job_id, req.context.principal.actor)
        except Conflict as exc:
            resp.status = falcon.HTTP_409
            render_job(self.console, self.jobs, self.gates, req, resp, job_id, refused=exc.detail)
            return
        back(resp, f"{PREFIX}/jobs/{job_id}")


class RetryJob(_Action):
    """The form twin of POST /v1/jobs/{jobId}/retry: a failed job runs again with fresh attempts."""

    def act(self, job_id: uuid.UUID, actor: str) -> None:
        self.handlers.retry(job_id, actor=actor)


class CancelJob(Confirmed):
    """The form twin of POST /v1/jobs/{jobId}/cancel, after a confirm step: a waiting or delayed job
    ends failed (cancelled); a running one stops at its next checkpoint or WB call."""

    label = "Cancel the job"

    def __init__(self, console: Console, jobs: JobViews, handlers: JobHandlers) -> None:
        super().__init__(console)
        self.jobs, self.handlers = jobs, handlers

    def describe(self, req: falcon.Request, job_id: uuid.UUID) -> tuple[str, str, str]:
        job = self.jobs.get(job_id)
        what = (
            "It is running: it stops at its next checkpoint or WB call and ends failed, cancelled; "
            "its account's gate is released."
            if job.state == "active"
            else "It ends failed, cancelled, and never runs again unless retried."
        )
        return f"Cancel job {job.type} ({job.state})?", what, f"POST /v1/jobs/{job_id}/cancel"

    def act(self, req: falcon.Request, actor: str, job_id: uuid.UUID) -> None:
        self.handlers.cancel(job_id, actor=actor)

    def done(self, job_id: uuid.UUID) -> str:
        return f"{PREFIX}/jobs/{job_id}"


class _AllMatching(Confirmed):
    """A bulk action on the jobs the list's filter matches (its state, type and account), after a
    confirm step that says how many match now; then the page of the job that does it."""

    action: BulkAction
    verb = ""

    def __init__(self, console: Console, handlers: JobHandlers) -> None:
        super().__init__(console)
        self.handlers = handlers

    def fields(self, req: falcon.Request) -> dict[str, str]:
        return {name: value for name in BULK_FILTERS if (value := req.get_param(name))}

    def describe(self, req: falcon.Request) -> tuple[str, str, str]:
        filters = self.fields(req)
        matched = self.handlers.matching(self.action, filters)
        narrowed = ", ".join(f"{k} {v}" for k, v in filters.items()) or "no filter"
        return (
            f"{self.verb} {matched} job{'' if matched == 1 else 's'}?",
            f"Every {' or '.join(BULK_STATES[self.action])} job that matches ({narrowed}) — "
            f"{matched} now — is {self.verb.lower()}d by one maintenance job, in batches; each change is audited.",
            f"POST /v1/admin/jobs/{self.action}",
        )

    def act(self, req: falcon.Request, actor: str) -> str:
        filters = {name: value for name in BULK_FILTERS if (value := form(req).get(name))}
        job, _ = self.handlers.start_bulk(self.action, filters, actor=actor)
        return f"{PREFIX}/jobs/{job.id}"

    def done(self) -> str:
        return f"{PREFIX}/jobs"


class RetryAll(_AllMatching):
    """The form twin of POST /v1/admin/jobs/retry."""

    action = "retry"
    verb = "Retry"
    label = "Retry all matching"


class CancelAll(_AllMatching):
    """The form twin of POST /v1/admin/jobs/cancel."""

    action = "cancel"
    verb = "Cancel"
    label = "Cancel all matching"
