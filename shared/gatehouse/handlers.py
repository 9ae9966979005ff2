"""The core's use cases: the job runtime's (submit, retry and cancel a job, reconcile, requeue the
runs of the dead), accounts' and staff users' (create them, issue and revoke their keys, remove a
user), modules' switches, and an operator's holds of queues and accounts.

Handlers are one small class per domain (this module for the core,
``<domain>/handlers.py`` for the others), built once by the composition root
with the narrow collaborators they use and called by routes, console actions,
job bodies, ticks and CLIs. Each use case opens its own unit of work
(gatehouse.uow), so whatever it puts in line is sent after its commit, by the
unit of work and nowhere else.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any, Literal

from redis import RedisError

from gatehouse import job_types as jt
from gatehouse import progress as P
from gatehouse.accounts import AccountChange, Accounts
from gatehouse.dispatch import Dispatcher
from gatehouse.errors import Conflict, NotFound, ValidationFailed
from gatehouse.gate import RedisGate, owner
from gatehouse.job_types import JobType
from gatehouse.jobs import Accepted, JobFilter, JobRecord, JobStore, utcnow
from gatehouse.models import Account
from gatehouse.modules import ModuleState, ModuleStates
from gatehouse.paging import instant
from gatehouse.pauses import Holds, Pause, require_queue
from gatehouse.uow import UnitOfWork
from gatehouse.users import UserRecord, Users

log = logging.getLogger(__name__)


class JobHandlers:
    """What can be done to any job: submit, retry, cancel; and the recovery of lost runs and messages."""

    def __init__(
        self,
        uow: UnitOfWork,
        jobs: JobStore,
        gate: RedisGate,
        dispatcher: Dispatcher,
        *,
        reconcile_grace_ms: int,
    ) -> None:
        self.uow, self.jobs, self.gate, self.dispatcher = uow, jobs, gate, dispatcher
        self.reconcile_grace_ms = reconcile_grace_ms

    def submit(
        self, job_type: JobType, *, account_id: uuid.UUID | None, payload: dict[str, Any] | None = None
    ) -> tuple[Accepted, bool]:
        """Write the row (or find the live one); its message goes out after. Returns ``(job, created)``;
        not created: the live job of its account and type (alreadyRunning), nothing sent.

        The row comes first, so an accepted job is never lost: if Redis is down the
        row stays ``waiting`` and reconciliation enqueues it later.
        """
        with self.uow.autocommit() as tx:
            return self.jobs.create(tx, job_type, account_id=account_id, payload=payload)

    def retry(self, job_id: uuid.UUID, *, actor: str) -> JobRecord:
        """An operator's retry: a failed job runs again with fresh attempts (its policy's number).

        Raises NotFound, or Conflict JOB_NOT_FAILED / JOB_ALREADY_LIVE (gatehouse.jobs).
        """
        job_type = jt.REGISTRY.get(self.jobs.require(job_id).type)
        with self.uow.autocommit() as tx:
            return self.jobs.retry(tx, job_id, actor=actor, job_type=job_type)

    def cancel(self, job_id: uuid.UUID, *, actor: str) -> tuple[JobRecord, bool]:
        """An operator's cancel, audited. Returns ``(job, stopping)``.

        A waiting or delayed job ends failed (``cancelled``) here: its message, if any, is stale
        from then on (the claim takes only waiting|delayed rows); a job of a type that emits
        raises its failed event (``wb.job.failed``) in the same transaction, as a failed run does;
        a job parked on its account's gate leaves the line, so a release no longer wakes it.
        A running job is asked to stop (``stopping``): its run ends failed, ``cancelled``, at its
        next checkpoint or WB call, and releases the gate as any failed run. Raises NotFound, or
        Conflict JOB_FINISHED.
        """
        # A row that moved between the two updates (claimed, requeued) is tried again.
        for _ in range(5):
            for cancelled in self._cancel_waiting([job_id], actor=actor):
                return cancelled, False
            with self.uow.begin() as tx:
                stopping = self.jobs.request_cancel(tx, job_id, actor=actor)
            if stopping is not None:
                return stopping, True
            self.jobs.why_not_cancelled(job_id)
        raise RuntimeError(f"could not cancel job {job_id}")

    def _cancel_waiting(self, job_ids: list[uuid.UUID], *, actor: str) -> list[JobRecord]:
        """Those of ``job_ids`` still waiting or delayed end failed (``cancelled``), each raising its
        type's failed event in the same transaction, then leave their account's gate line."""
        error = {"code": P.CANCELLED, "message": f"cancelled by an operator ({actor})"}
        with self.uow.begin() as tx:
            cancelled = self.jobs.cancel(
                tx, job_ids, actor=actor, error=error, progress=P.stored(P.FAILED, reason=P.CANCELLED)
            )
            for job in cancelled:
                job_type = jt.REGISTRY.get(job.type)
                if job_type is not None and job_type.emits:
                    tx.publish(jt.outcome_event(job_type, job, "failed", error=job.error))
        for job in cancelled:
            self._leave_line(job)
        return cancelled

    # -- bulk: one queued job retries or cancels every job a filter matches -------------------

    def matching(self, action: BulkAction, filters: dict[str, Any]) -> int:
        """How many jobs ``action`` would take now (a dry run). ValidationFailed names a bad filter field."""
        return self.jobs.count_matching(job_filter(action, filters))

    def start_bulk(self, action: BulkAction, filters: dict[str, Any], *, actor: str) -> tuple[Accepted, int]:
        """Queue one maintenance:bulk-jobs job that takes every matching job, batch by batch; returns it
        and how many match now (its run takes those that still match when it reaches them)."""
        matched = self.jobs.count_matching(job_filter(action, filters))
        payload = {"action": action, "filter": filters, "actor": actor, "matched": matched}
        with self.uow.autocommit() as tx:
            job, _ = self.jobs.create(tx, jt.MAINTENANCE_BULK_JOBS, account_id=None, payload=payload)
        return job, matched

    def run_bulk(
        self, payload: dict[str, Any], checkpoint: dict[str, Any], save: Callable[[dict[str, Any]], None]
    ) -> dict[str, Any]:
        """The bulk job's body: batches of BULK_BATCH ids in id order, each batch's progress saved (a
        requeued or retried run carries on after it). A job that cannot be retried (another live
        job of its account and type) or no longer waits is counted as skipped."""
        action, actor = payload["action"], payload["actor"]
        match = job_filter(action, payload["filter"])
        done, skipped = checkpoint.get("done", 0), checkpoint.get("skipped", 0)
        after = uuid.UUID(checkpoint["after"]) if checkpoint.get("after") else None
        while ids := self.jobs.ids_matching(match, after=after, limit=BULK_BATCH):
            if action == "cancel":
                took = len(self._cancel_waiting(ids, actor=actor))
            else:
                took = sum(self._retried(job_id, actor=actor) for job_id in ids)
            done, skipped, after = done + took, skipped + len(ids) - took, ids[-1]
            save({"after": str(after), "done": done, "skipped": skipped})
        return {"action": action, "matched": payload["matched"], "done": done, "skipped": skipped}

    def _retried(self, job_id: uuid.UUID, *, actor: str) -> bool:
        try:
            self.retry(job_id, actor=actor)
        except (Conflict, NotFound):  # retried or pruned meanwhile, or its kind is live again
            return False
        return True

    def _leave_line(self, job: JobRecord) -> None:
        if job.account_id is None:
            return
        try:
            self.gate.forget(str(job.account_id), owner(job.queue, job.id))
        except RedisError as exc:
            # Harmless: a waiter expires with the waiting set, and a release skips a finished row.
            log.warning("job %s is cancelled but still in its account's gate line (%s)", job.id, exc)

    def requeue_orphans(self, dead: set[str]) -> int:
        """Running jobs of dead workers and runs whose lease ran out: back in line, each sent again now.

        The rows are written first; if the send fails, reconciliation sends them.
        """
        with self.uow.autocommit() as tx:
            return self.jobs.requeue_orphans(tx, dead)

    def reconcile(self, *, grace_ms: int | None = None) -> int:
        """Give every live job row that lost its message a new one (worker boot and a periodic tick).

        Rows still ``active`` whose lease ran out go back in line under a new message (their
        old one is then stale); waiting and delayed rows untouched for ``grace_ms``
        (RECONCILE_GRACE_MS by default) with no message in the broker are sent again. It only
        enqueues; the row claim makes any duplicate a no-op. Returns how many were sent.
        """
        with self.uow.autocommit() as tx:
            sent = self.jobs.requeue_orphans(tx, set())
        # The requeued rows' messages are in the broker now, so the check below does not send
        # them a second time (a requeued row is waiting, and settled when grace_ms is short).
        with self.uow.autocommit() as tx:
            candidates = self.jobs.settled_candidates(
                self.reconcile_grace_ms if grace_ms is None else grace_ms
            )
            if candidates:
                queued = self.dispatcher.queued_job_ids({c.queue for c in candidates})
                # Re-read after the scan: a row whose message was consumed meanwhile is not owed one.
                missing = self.jobs.still_unsent([c for c in candidates if str(c.job_id) not in queued])
                tx.record(*missing)
                sent += len(missing)
        if sent:
            log.info("reconciliation re-enqueued %d job(s)", sent)
        return sent


BulkAction = Literal["retry", "cancel"]
BULK_BATCH = 200  # jobs per transaction of a bulk retry or cancel
# The states each bulk action takes: a retry, the failed jobs; a cancel, those that wait.
BULK_STATES: dict[str, tuple[str, ...]] = {"retry": ("failed",), "cancel": ("waiting", "delayed")}


def job_filter(action: BulkAction, filters: dict[str, Any]) -> JobFilter:
    """The filter of a bulk action from its JSON fields (``filter.*``); ValidationFailed names each bad one."""
    states = BULK_STATES[action]
    errors: list[tuple[str | None, str]] = []
    state, job_type = filters.get("state"), filters.get("type")
    if state is not None and state not in states:
        errors.append(("filter.state", f"a bulk {action} takes jobs in state {' or '.join(states)}"))
    if job_type is not None and job_type not in jt.REGISTRY:
        errors.append(("filter.type", f"no job type {job_type!r}"))
    finished = {name: filters.get(name) for name in ("finishedAfter", "finishedBefore")}
    if action == "cancel" and any(finished.values()):
        errors.append(("filter.finishedAfter", "a waiting or delayed job has not finished"))
    try:
        account = filters.get("accountId")
        account_id = uuid.UUID(account) if account is not None else None
    except (ValueError, AttributeError):
        errors.append(("filter.accountId", "accountId must be a UUID"))
    at: dict[str, datetime | None] = {}
    for name, raw in finished.items():
        try:
            at[name] = instant(raw, f"filter.{name}")
        except ValidationFailed as exc:
            errors.extend(exc.errors)
    if errors:
        raise ValidationFailed.of(errors)
    return JobFilter(
        states,
        state=state,
        type=job_type,
        account_id=account_id,
        error_code=filters.get("errorCode"),
        finished_after=at.get("finishedAfter"),
        finished_before=at.get("finishedBefore"),
    )


class AccountHandlers:
    """Seller accounts and staff users: create them, change an account, issue and revoke their API keys
    (each key shown once), remove a user. Each change and removal writes its audit row in its transaction."""

    def __init__(self, uow: UnitOfWork, accounts: Accounts, users: Users, jobs: JobStore) -> None:
        self.uow, self.accounts, self.users, self.jobs = uow, accounts, users, jobs

    def create_account(self, name: str, wb_token: str) -> Account:
        """The WB token is stored encrypted (ConfigurationError without TOKEN_ENCRYPTION_KEY); an
        expired one is refused. Its account-verify job is written in the same transaction."""
        with self.uow.begin() as tx:
            account = self.accounts.create(tx, name, wb_token, now=utcnow())
            self.jobs.create(tx, jt.ACCOUNT_VERIFY, account_id=account.id)
            return account

    def update_account(self, account_id: uuid.UUID, change: AccountChange, *, actor: str) -> Account:
        """Rename, rotate the WB token (clears ``token_invalid``, resets its categories and seller until
        its account-verify job ends), switch off or on; audited.

        A switched-off account's fan-outs skip it and its creates answer ACCOUNT_INACTIVE; its live
        jobs finish. NotFound for an unknown account.
        """
        with self.uow.begin() as tx:
            account = self.accounts.update(tx, account_id, change, actor=actor, now=utcnow())
            if change.wb_token is not None:
                self.jobs.create(tx, jt.ACCOUNT_VERIFY, account_id=account_id)
            return account

    def record_verification(
        self, account_id: uuid.UUID, wb_token: str, access: dict[str, str], seller: dict | None
    ) -> bool:
        """What account-verify learnt of ``wb_token``; False when the token was replaced meanwhile."""
        with self.uow.begin() as tx:
            return self.accounts.verified(tx, account_id, wb_token, access, seller)

    def announce_expiring(self, *, within_ms: int, batch: int = 1_000) -> int:
        """Raise wb.account.token_expiring for each token expiring within ``within_ms`` not yet
        announced: a batch a transaction, its events with it. Returns how many were announced."""
        announced = 0
        while True:
            with self.uow.begin() as tx:
                events = self.accounts.warn_expiring(tx, within_ms=within_ms, limit=batch)
                for event in events:
                    tx.publish(event)
            announced += len(events)
            if len(events) < batch:
                return announced

    def issue_account_key(
        self, account_id: uuid.UUID, *, expires_at: datetime | None = None, actor: str
    ) -> str:
        """Raises NotFound for an unknown account, ValidationFailed for an ``expires_at`` not ahead."""
        with self.uow.begin() as tx:
            return self.accounts.issue_key(tx, account_id, expires_at=expires_at, actor=actor)

    def revoke_account_key(self, account_id: uuid.UUID, key_id: str, *, actor: str) -> None:
        """The key fails from the next request on; NotFound if the account has no such key."""
        with self.uow.begin() as tx:
            self.accounts.revoke_key(tx, account_id, key_id, actor=actor)

    def create_user(self, email: str, name: str, role: str = "admin") -> UserRecord:
        """Raises ValidationFailed (role, email, name), or Conflict when the e-mail is taken."""
        with self.uow.begin() as tx:
            return self.users.create(tx, email, name, role)

    def issue_user_key(self, user_id: uuid.UUID, *, expires_at: datetime | None = None, actor: str) -> str:
        """Raises NotFound for an unknown or removed user, ValidationFailed for an ``expires_at`` not ahead."""
        with self.uow.begin() as tx:
            return self.users.issue_key(tx, user_id, expires_at=expires_at, actor=actor)

    def revoke_user_key(self, user_id: uuid.UUID, key_id: str, *, actor: str) -> None:
        """The key fails from the next request on, and its console sessions end."""
        with self.uow.begin() as tx:
            self.users.revoke_key(tx, user_id, key_id, actor=actor)

    def remove_user(self, user_id: uuid.UUID, *, actor: str) -> None:
        """Every key of the user is revoked; the user's row and audit rows stay. NotFound if unknown."""
        with self.uow.begin() as tx:
            self.users.remove(tx, user_id, actor=actor)


class ModuleHandlers:
    """An operator's switch of a module (its routes, consumers and events follow it)."""

    def __init__(self, uow: UnitOfWork, modules: ModuleStates) -> None:
        self.uow, self.modules = uow, modules

    def set_module(
        self, name: str, *, enabled: bool | None = None, installed: bool | None = None, by: str
    ) -> ModuleState:
        """Install/uninstall, enable/disable ``name`` (None leaves it as is); NotFound for an unknown module.

        This process sees the change at once; the others within REFRESH_S.
        """
        with self.uow.begin() as tx:
            state = self.modules.set(tx, name, enabled=enabled, installed=installed, by=by)
        # Expired after the commit, not in the transaction: a read in between would cache the old row.
        self.modules.expire()
        return state


class HoldHandlers:
    """An operator's holds (gatehouse.pauses): pause or resume a queue's consumers in every worker
    process, or an account's WB jobs. Each change is audited; doing it twice changes nothing."""

    def __init__(self, uow: UnitOfWork, holds: Holds, accounts: Accounts) -> None:
        self.uow, self.holds, self.accounts = uow, holds, accounts

    def pause_queue(self, queue: str, *, actor: str) -> Pause:
        """NotFound (QUEUE_NOT_FOUND) for a queue no job type uses."""
        require_queue(queue)
        with self.uow.begin() as tx:
            pause = self.holds.pause(tx, "queue", queue, by=actor)
        self.holds.expire()
        return pause

    def resume_queue(self, queue: str, *, actor: str) -> None:
        require_queue(queue)
        with self.uow.begin() as tx:
            self.holds.resume(tx, "queue", queue, by=actor)
        self.holds.expire()

    def pause_account(self, account_id: uuid.UUID, *, actor: str) -> Pause:
        """NotFound for an unknown account."""
        self.accounts.get(account_id)
        with self.uow.begin() as tx:
            pause = self.holds.pause(tx, "account", str(account_id), by=actor)
        self.holds.expire()
        return pause

    def resume_account(self, account_id: uuid.UUID, *, actor: str) -> None:
        self.accounts.get(account_id)
        with self.uow.begin() as tx:
            self.holds.resume(tx, "account", str(account_id), by=actor)
        self.holds.expire()
