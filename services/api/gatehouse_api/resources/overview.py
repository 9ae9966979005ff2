"""The operator's overview (admin): queues, workers, schedules and stores in one read.

``overview_view`` is the one view the JSON API (GET /v1/admin/overview) and the
console's overview page both render: the snapshot of gatehouse.operations, the
schedules as GET /v1/admin/schedules shows them, and the stores as /readyz
checks them — on a shorter deadline, and first, so a store that does not
answer costs the overview at most that long and leaves only its own numbers
unknown (``null``) instead of failing the page.
"""

from __future__ import annotations

import uuid
from datetime import datetime

import falcon
from pydantic import Field

from gatehouse.operations import Operations, Snapshot
from gatehouse_api.auth import require_admin
from gatehouse_api.openapi import contract
from gatehouse_api.resources.admin import ScheduleViews
from gatehouse_api.resources.health import StoreChecks
from gatehouse_api.schemas import Reply, ScheduleView

# The overview waits at most this long for a store's answer (READY_TIMEOUT_MS if that is shorter).
STORE_CHECK_MS = 300


class QueueOverview(Reply):
    name: str
    module: str | None = Field(description="the module that owns the queue; null: the core's")
    paused: bool | None = Field(
        description="held, so its consumers are paused (POST /v1/admin/queues/{queue}/pause, or its module "
        "is off); null: PostgreSQL did not answer"
    )
    pausedBy: str | None = Field(default=None, description="who paused it (a module's: who switched it off)")
    pausedModule: str | None = Field(default=None, description="held because this module is off")
    ready: int | None = Field(description="waiting jobs: ready to run; null: PostgreSQL did not answer")
    delayed: int | None = Field(description="delayed jobs: a retry, a pause or a gate wait to end")
    running: int | None = Field(description="active jobs")
    failed24h: int | None = Field(description="jobs that failed in the last 24 h")
    deadLetters: int | None = Field(
        description="messages in Dramatiq's dead-letter set of the queue; null: Redis did not answer"
    )
    deadDeliveries: int | None = Field(
        default=None, description="webhook.deliver only: dead webhook deliveries (no attempt left)"
    )


class RunningJobView(Reply):
    jobId: uuid.UUID
    type: str
    accountId: uuid.UUID | None
    startedAt: datetime | None


class WorkerOverview(Reply):
    name: str = Field(description="host:pid:tail, as on the job rows it claims")
    alive: bool = Field(description="its liveness key is there; false: it has running jobs but no heartbeat")
    threads: int | None
    busy: int | None = Field(description="its running jobs; null: PostgreSQL did not answer")
    queues: list[str]
    startedAt: datetime | None
    jobs: list[RunningJobView] = Field(description="what it runs now, longest first (500 in all at most)")


class OverviewView(Reply):
    at: datetime
    stores: dict[str, str] = Field(description='"ok" or "down: …" per store, as /readyz checks them')
    queues: list[QueueOverview]
    workers: list[WorkerOverview] | None = Field(description="null: Redis did not answer")
    schedules: list[ScheduleView] | None = Field(description="null: Redis did not answer")


class OverviewViews:
    """The overview the JSON API and the console both render."""

    def __init__(self, operations: Operations, schedules: ScheduleViews, checks: StoreChecks) -> None:
        self.operations, self.schedules, self.checks = operations, schedules, checks

    def view(self) -> dict:
        return overview_view(self.operations.snapshot(self.checks()), self.schedules)


def overview_view(snap: Snapshot, schedules: ScheduleViews) -> dict:
    redis = snap.stores.get("redis") == "ok"
    return OverviewView(
        at=snap.at,
        stores=snap.stores,
        queues=[
            QueueOverview(
                name=q.name,
                module=q.module,
                paused=q.paused,
                pausedBy=q.pause.paused_by if q.pause else None,
                pausedModule=q.pause.module if q.pause else None,
                ready=q.counts.ready if q.counts else None,
                delayed=q.counts.delayed if q.counts else None,
                running=q.counts.running if q.counts else None,
                failed24h=q.counts.failed_24h if q.counts else None,
                deadLetters=q.dead_letters,
                deadDeliveries=q.dead_deliveries,
            )
            for q in snap.queues
        ],
        workers=None
        if snap.workers is None
        else [
            WorkerOverview(
                name=w.name,
                alive=w.alive,
                threads=w.beat.threads,
                busy=w.busy,
                queues=list(w.beat.queues),
                startedAt=w.beat.started_at,
                jobs=[
                    RunningJobView(jobId=j.id, type=j.type, accountId=j.account_id, startedAt=j.started_at)
                    for j in w.jobs
                ],
            )
            for w in snap.workers
        ],
        schedules=schedules.all(modules_known=snap.stores.get("postgresql") == "ok") if redis else None,
    ).model_dump(mode="json")


class Overview:
    def __init__(self, views: OverviewViews) -> None:
        self.views = views

    @contract(
        "Per queue ready, delayed, running, failed in 24 h and dead letters; live workers and "
        "their busy threads; schedules' last and next run; store health (admin). A store that "
        "does not answer leaves its own numbers null",
        (200, OverviewView, "the snapshot"),
        (401, 403),
    )
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        require_admin(req)
        resp.media = self.views.view()
