"""Operator views (admin token only)."""

from __future__ import annotations

import uuid

import falcon

from gatehouse.composition import Gatehouse
from gatehouse.errors import NotFound
from gatehouse.schedules import FANOUT_QUEUE, schedules
from gatehouse_api.auth import require_admin
from gatehouse_api.resources.gates import gate_views
from gatehouse_api.schemas import ScheduleList, ScheduleRun, ScheduleView


class AccountGate:
    """Who holds an account's gate, for how long, who wants it and who waits (best first)."""

    def __init__(self, gh: Gatehouse) -> None:
        self.gh = gh

    def on_get(self, req: falcon.Request, resp: falcon.Response, account_id: uuid.UUID) -> None:
        require_admin(req)
        account = self.gh.accounts.get(account_id)
        resp.media = gate_views(self.gh, [account])[0]["gate"]


def schedule_views(gh: Gatehouse) -> list[ScheduleView]:
    """Each schedule with its cron (UTC), max wait, last and next run (the API's and the console's view)."""
    items = []
    for s in schedules(gh.settings.schedules).values():
        last, next_ = gh.schedule_runs.runs(s.name)
        items.append(
            ScheduleView(
                name=s.name,
                jobType=s.job_type.name,
                cron=s.cron,
                maxWaitMs=s.max_wait,
                perAccount=s.per_account,
                enabled=s.enabled,
                lastRun=last,
                nextRun=next_ if s.enabled else None,
            )
        )
    return items


def run_schedule(gh: Gatehouse, name: str) -> dict:
    """Send a schedule's tick now, as the scheduler would; NotFound for a name no schedule has."""
    schedule = schedules(gh.settings.schedules).get(name)
    if schedule is None:
        raise NotFound(f"schedule {name} not found")
    message = gh.dispatcher.tick(FANOUT_QUEUE, schedule.actor)
    return ScheduleRun(name=name, messageId=message.message_id).model_dump(mode="json")


class Schedules:
    """The periodic syncs and sweeps with their cron (UTC), max wait, last and next run."""

    def __init__(self, gh: Gatehouse) -> None:
        self.gh = gh

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        require_admin(req)
        resp.media = ScheduleList(items=schedule_views(self.gh)).model_dump(mode="json")


class RunSchedule:
    """Fire a schedule's tick now: its fan-out runs on a worker like a timed tick."""

    def __init__(self, gh: Gatehouse) -> None:
        self.gh = gh

    def on_post(self, req: falcon.Request, resp: falcon.Response, name: str) -> None:
        require_admin(req)
        resp.status = 202
        resp.media = run_schedule(self.gh, name)
