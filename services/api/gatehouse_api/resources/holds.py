"""An operator's holds (admin): pause and resume a queue's consumption or an account's WB jobs,
and every queue with its hold and depth. Each change is audited (gatehouse.pauses)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import falcon

from gatehouse.handlers import HoldHandlers
from gatehouse.operations import Operations
from gatehouse.pauses import Holds, Pause, job_queues
from gatehouse_api.auth import principal, require_admin
from gatehouse_api.openapi import contract, path
from gatehouse_api.schemas import AccountHold, ByState, QueueHold, QueueList, QueueView


def hold_fields(pause: Pause | None) -> dict:
    if pause is None:
        return {"paused": False, "pausedBy": None, "pausedAt": None}
    return {"paused": True, "pausedBy": pause.paused_by, "pausedAt": pause.paused_at, "module": pause.module}


class HoldViews:
    """The queues and account holds as the API and the console show them."""

    def __init__(self, operations: Operations, holds: Holds) -> None:
        self.operations, self.holds = operations, holds

    def queues(self) -> dict:
        now = datetime.now(UTC)

        def age(oldest: datetime | None) -> int | None:
            return None if oldest is None else max(0, round((now - oldest).total_seconds() * 1000))

        return QueueList(
            items=[
                QueueView(
                    queue=q.name,
                    **hold_fields(q.pause),
                    depth=ByState(**{state: d.count for state, d in q.depth.items()}),
                    oldestAgeMs=ByState(**{state: age(d.oldest) for state, d in q.depth.items()}),
                )
                for q in self.operations.queues()
            ]
        ).model_dump(mode="json")

    def queue(self, queue: str) -> dict:
        pause = self.holds.paused_queues().get(queue)
        return QueueHold(queue=queue, **hold_fields(pause)).model_dump(mode="json")

    def account(self, account_id: uuid.UUID) -> dict:
        pause = self.holds.account_pause(account_id)
        return AccountHold(accountId=account_id, **hold_fields(pause)).model_dump(mode="json")


class Queues:
    def __init__(self, views: HoldViews) -> None:
        self.views = views

    @contract(
        "Every job queue: paused or not (by whom, since when), its live jobs by state and the oldest's "
        "age (admin)",
        (200, QueueList, "every queue of a job type, `maintenance` and `schedules` too"),
        (401, 403),
    )
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        require_admin(req)
        resp.media = self.views.queues()


QUEUE = [path("queue", enum=job_queues())]
QUEUE_404 = {404: "QUEUE_NOT_FOUND: no job type uses that queue"}


class QueuePause:
    def __init__(self, handlers: HoldHandlers, views: HoldViews) -> None:
        self.handlers, self.views = handlers, views

    @contract(
        "Pause a queue in every worker process (admin, audited): its messages stay queued, no attempt "
        "is spent, running jobs finish; pausing a paused queue changes nothing",
        (200, QueueHold, "the queue, paused"),
        (401, 403, 404),
        notes=QUEUE_404,
        params=QUEUE,
    )
    def on_post(self, req: falcon.Request, resp: falcon.Response, queue: str) -> None:
        require_admin(req)
        self.handlers.pause_queue(queue, actor=principal(req).actor)
        resp.media = self.views.queue(queue)


class QueueResume:
    def __init__(self, handlers: HoldHandlers, views: HoldViews) -> None:
        self.handlers, self.views = handlers, views

    @contract(
        "Resume a paused queue (admin, audited): every worker consumes it again within a second",
        (200, QueueHold, "the queue (still paused only if its module is off)"),
        (401, 403, 404),
        notes=QUEUE_404,
        params=QUEUE,
    )
    def on_post(self, req: falcon.Request, resp: falcon.Response, queue: str) -> None:
        require_admin(req)
        self.handlers.resume_queue(queue, actor=principal(req).actor)
        resp.media = self.views.queue(queue)


class AccountPause:
    def __init__(self, handlers: HoldHandlers, views: HoldViews) -> None:
        self.handlers, self.views = handlers, views

    @contract(
        "Pause an account's WB jobs (admin, audited): its gated jobs park (phase `paused`, no attempt "
        "spent), its scheduled ones are skipped (`account-paused`); a running job finishes",
        (200, AccountHold, "the account, paused"),
        (401, 403, 404),
    )
    def on_post(self, req: falcon.Request, resp: falcon.Response, account_id: uuid.UUID) -> None:
        require_admin(req)
        self.handlers.pause_account(account_id, actor=principal(req).actor)
        resp.media = self.views.account(account_id)


class AccountResume:
    def __init__(self, handlers: HoldHandlers, views: HoldViews) -> None:
        self.handlers, self.views = handlers, views

    @contract(
        "Resume a paused account (admin, audited): its parked jobs run at their next look (GATE_POLL_DELAY_MS)",
        (200, AccountHold, "the account, not paused"),
        (401, 403, 404),
    )
    def on_post(self, req: falcon.Request, resp: falcon.Response, account_id: uuid.UUID) -> None:
        require_admin(req)
        self.handlers.resume_account(account_id, actor=principal(req).actor)
        resp.media = self.views.account(account_id)
