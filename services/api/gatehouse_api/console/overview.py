"""Overview: per queue what waits, runs and failed; the workers and their threads; schedules; stores."""

from __future__ import annotations

import falcon

from gatehouse_api.console.web import Console, Page
from gatehouse_api.resources.overview import OverviewViews


class Overview(Page):
    """The view GET /v1/admin/overview returns, as a page whose numbers refresh on their own."""

    def __init__(self, console: Console, overview: OverviewViews) -> None:
        super().__init__(console)
        self.overview = overview

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        self.console.render(req, resp, "overview.html", overview=self.overview.view())
