"""Overview: per queue what waits, runs and failed; the workers and their threads; schedules; stores;
how many stored secrets still use an old TOKEN_ENCRYPTION_KEY."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import falcon
from sqlalchemy.exc import SQLAlchemyError

from gatehouse.errors import ConfigurationError
from gatehouse.rotation import KeyRotation
from gatehouse_api.console.web import Console, Page
from gatehouse_api.resources.overview import OverviewViews

LIVE = "X-Console-Live"  # console.js's refreshes, which replace only the page's data-live parts


class Overview(Page):
    """The view GET /v1/admin/overview returns, as a page whose numbers refresh on their own."""

    def __init__(self, console: Console, overview: OverviewViews, keys: KeyRotation) -> None:
        super().__init__(console)
        self.overview, self.keys = overview, keys

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        view = self.overview.view()
        old_keys = None
        # A scan of the tables with secrets: on a page load only, not on every live refresh.
        if not req.get_header(LIVE) and view["stores"].get("postgresql") == "ok":
            try:
                old_keys = sum(self.keys.old_key_rows().values())
            except (ConfigurationError, SQLAlchemyError):
                old_keys = None  # no key configured, or PostgreSQL stopped answering since its check
        # The failed count's list: the jobs that failed since 24 h before the snapshot (UTC, as the form takes it).
        since = datetime.fromisoformat(view["at"]) - timedelta(hours=24)
        failed_since = since.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S")
        self.console.render(
            req, resp, "overview.html", overview=view, old_keys=old_keys, failed_since=failed_since
        )
