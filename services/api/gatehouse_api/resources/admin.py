"""Operator views (admin token only)."""

from __future__ import annotations

import uuid

import falcon

from gatehouse.dispatch import Dispatcher
from gatehouse.errors import NotFound
from gatehouse.modules import ModuleStates
from gatehouse.schedules import FANOUT_QUEUE, Schedule, ScheduleRuns
from gatehouse_api.auth import require_admin
from gatehouse_api.openapi import contract
from gatehouse_api.resources.gates import GateViews
from gatehouse_api.schemas import GateView, ScheduleList, ScheduleRun, ScheduleView


class AccountGate:
    """Who holds an account's gate, for how long, who wants it and who waits (best first)."""

    def __init__(self, views: GateViews) -> None:
        self.views = views

    @contract(
        "The account's gate: holder, lease left, who wants it, who waits, WB's recent 429 pauses (admin)",
        (200, GateView, "the gate's state"),
        (401, 403, 404),
    )
    def on_get(self, req: falcon.Request, resp: falcon.Response, account_id: uuid.UUID) -> None:
        require_admin(req)
        resp.media = self.views.account(account_id)["gate"]


class ScheduleViews:
    """The schedules as the API and the console show them, and an operator's "run now"."""

    def __init__(
        self,
        schedules: dict[str, Schedule],
        runs: ScheduleRuns,
        dispatcher: Dispatcher,
        modules: ModuleStates,
    ) -> None:
        self.schedules, self.runs, self.dispatcher, self.modules = schedules, runs, dispatcher, modules

    def all(self, *, modules_known: bool = True) -> list[ScheduleView]:
        """Each schedule with its cron (UTC), max wait, last and next run, and its module's state.

        ``modules_known=False`` (the overview, PostgreSQL not answering): moduleEnabled is null.
        """
        items = []
        for s in self.schedules.values():
            last, next_ = self.runs.runs(s.name)
            module = s.module
            items.append(
                ScheduleView(
                    name=s.name,
                    jobType=s.job_type.name,
                    cron=s.cron,
                    maxWaitMs=s.max_wait,
                    perAccount=s.per_account,
                    spreadMs=s.spread,
                    enabled=s.enabled,
                    module=module.name if module else None,
                    moduleEnabled=(module is None or self.modules.state(module.name).on)
                    if modules_known
                    else None,
                    lastRun=last,
                    nextRun=next_ if s.enabled else None,
                )
            )
        return items

    def run(self, name: str) -> dict:
        """Send a schedule's tick now, as the scheduler would.

        NotFound for a name no schedule has; ModuleDisabled (nothing sent, its last run unmoved)
        while the module its jobs belong to is off, since its tick would create nothing.
        """
        schedule = self.schedules.get(name)
        if schedule is None:
            raise NotFound(f"schedule {name} not found")
        if schedule.module is not None:
            self.modules.require(schedule.module.name, fresh=True)
        message = self.dispatcher.tick(FANOUT_QUEUE, schedule.actor)
        return ScheduleRun(name=name, messageId=message.message_id).model_dump(mode="json")


class Schedules:
    """The periodic syncs and sweeps with their cron (UTC), max wait, last and next run."""

    def __init__(self, views: ScheduleViews) -> None:
        self.views = views

    @contract(
        "The periodic syncs and sweeps: cron (UTC), max wait, last and next run (admin)",
        (200, ScheduleList, "the schedules"),
        (401, 403),
    )
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        require_admin(req)
        resp.media = ScheduleList(items=self.views.all()).model_dump(mode="json")


class RunSchedule:
    """Fire a schedule's tick now: its fan-out runs on a worker like a timed tick."""

    def __init__(self, views: ScheduleViews) -> None:
        self.views = views

    @contract(
        "Fire a schedule's tick now (admin)",
        (202, ScheduleRun, "the tick is queued"),
        (401, 403, 404, 409),
        notes={
            404: "NOT_FOUND: no schedule of that name; MODULE_DISABLED (with `module`): its module is not installed",
            409: "MODULE_DISABLED (with `module`): the module its jobs belong to is disabled; nothing is sent",
        },
    )
    def on_post(self, req: falcon.Request, resp: falcon.Response, name: str) -> None:
        require_admin(req)
        resp.status = 202
        resp.media = self.views.run(name)
