"""Schedules: cron, max wait, last and next run of each, and Run now (the twin of POST …/schedules/{name}/run)."""

from __future__ import annotations

from urllib.parse import quote

import falcon

from gatehouse_api.console.web import PREFIX, Console, Page, back
from gatehouse_api.resources.admin import ScheduleViews


class _Page(Page):
    def __init__(self, console: Console, schedules: ScheduleViews) -> None:
        super().__init__(console)
        self.schedules = schedules


class Schedules(_Page):
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        items = [v.model_dump(mode="json") for v in self.schedules.all()]
        ran = req.get_param("ran")
        self.console.render(
            req,
            resp,
            "schedules.html",
            schedules=items,
            # Only a schedule's name is echoed back (the note after Run now).
            ran=ran if ran in self.schedules.schedules else None,
        )


class RunSchedule(_Page):
    """The form twin of POST /v1/admin/schedules/{name}/run: the same tick, then back to the list."""

    def on_post(self, req: falcon.Request, resp: falcon.Response, name: str) -> None:
        self.schedules.run(name)
        back(resp, f"{PREFIX}/schedules?ran={quote(name, safe='')}")
