"""Bulk actions ("Akcje masowe"): operations by status with live counters; one operation and its failed items.

Both pages render the JSON API's views (``BulkViews`` of
gatehouse_api.resources.bulk) read through the same ``BulkStore`` calls; nothing here acts, so there is nothing to refuse while
the catalog module is off: the pages say it is off.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import falcon

from gatehouse.catalog.bulk import STATUSES
from gatehouse.modules import ModuleStates
from gatehouse.users import Users
from gatehouse_api.console.web import Console, Page, query
from gatehouse_api.resources.bulk import BulkViews

PAGE = 50


def text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)  # Russian and Polish as they are


def summary(op: dict[str, Any]) -> list[tuple[str, str]]:
    """What the operation applies, from its view's ``request``: its selection, then each field it sets."""
    request = op["request"]
    if op["type"] == "search_reindex":
        return [("Selection", "every product (search re-index)"), ("Reason", str(request.get("reason", "")))]
    if op["revertOf"]:
        return [
            ("Selection", f"{op['counters']['total']} products the reverted operation changed"),
            ("Reverts", f"{op['revertOf']}: back to what its audit rows recorded before it"),
        ]
    if "filter" in request:
        chosen = ", ".join(f"{k} = {text(v)}" for k, v in request["filter"].items()) or "the whole catalog"
        rows = [("Selection (filter)", chosen)]
    else:
        rows = [("Selection", f"{op['counters']['total']} listed products")]
    return rows + [(f"Set {k}", text(v)) for k, v in request.get("patch", {}).items()]


class _Page(Page):
    def __init__(self, console: Console, bulk: BulkViews, modules: ModuleStates, users: Users) -> None:
        super().__init__(console)
        self.bulk, self.modules, self.users = bulk, modules, users

    def staff(self) -> dict[str, str]:
        """The staff users' names by id (a requester is one; a removed user stays an id)."""
        return {str(u.id): u.name for u in self.users.page()}


class BulkOperations(_Page):
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        param = query(req)
        status = param("status")
        page = self.bulk.page(
            status=status, type=None, limit=PAGE, cursor=param("cursor"), failed_items=False
        )
        self.console.render(
            req,
            resp,
            "bulk_operations.html",
            page=page,
            status=status,
            statuses=STATUSES,
            module=self.modules.state("catalog"),
            staff=self.staff(),
        )


class BulkOperation(_Page):
    def on_get(self, req: falcon.Request, resp: falcon.Response, operation_id: uuid.UUID) -> None:
        op = self.bulk.get(operation_id)
        cursor = query(req)("cursor")
        failures = self.bulk.failures(operation_id, limit=PAGE, cursor=cursor)
        self.console.render(
            req,
            resp,
            "bulk_operation.html",
            op=op,
            summary=summary(op),
            failures=failures,
            cursor=cursor,
            module=self.modules.state("catalog"),
            staff=self.staff(),
        )
