"""The operations console: server-rendered pages under /console, served by gatehouse-api.

``build`` gives the app the console and its paths; the app adds ``ConsoleGuard``
to its middleware and ``install_errors`` for the HTML error pages. Each page module holds its pages and the form actions that are twins of
JSON API calls.
"""

from __future__ import annotations

from gatehouse.composition import Components
from gatehouse_api.console import accounts as account_pages
from gatehouse_api.console import bulk as bulk_pages
from gatehouse_api.console import jobs as job_pages
from gatehouse_api.console import modules, signin
from gatehouse_api.console import overview as overview_pages
from gatehouse_api.console import schedules as schedule_pages
from gatehouse_api.console import webhooks as webhook_pages
from gatehouse_api.console.web import PREFIX, Console, ConsoleGuard, install_errors


def build(gh: Components) -> tuple[Console, dict[str, object]]:
    console = Console(gh)
    pages = {
        "/login": signin.Login(console),
        "/logout": signin.Logout(console),
        "/static/{name}": signin.Static(console),
        "/accounts": account_pages.Accounts(console),
        "/accounts/{account_id:uuid}": account_pages.Account(console),
        "/jobs": job_pages.Jobs(console),
        "/jobs/{job_id:uuid}": job_pages.Job(console),
        "/jobs/{job_id:uuid}/retry": job_pages.RetryJob(console),
        "/jobs/{job_id:uuid}/cancel": job_pages.CancelJob(console),
        "/modules": modules.Modules(console),
        "/modules/{name}": modules.SetModule(console),
        "/bulk-operations": bulk_pages.BulkOperations(console),
        "/bulk-operations/{operation_id:uuid}": bulk_pages.BulkOperation(console),
        "/webhooks/endpoints": webhook_pages.Endpoints(console),
        "/webhooks/endpoints/{endpoint_id:uuid}/enabled": webhook_pages.SetEnabled(console),
        "/webhooks/endpoints/{endpoint_id:uuid}/rotate-secret": webhook_pages.RotateSecret(console),
        "/webhooks/endpoints/{endpoint_id:uuid}/test": webhook_pages.SendTest(console),
        "/webhooks/endpoints/{endpoint_id:uuid}/replay": webhook_pages.ReplayEndpoint(console),
        "/webhooks/deliveries": webhook_pages.Deliveries(console),
        "/webhooks/deliveries/{delivery_id:uuid}": webhook_pages.Delivery(console),
        "/webhooks/deliveries/{delivery_id:uuid}/replay": webhook_pages.ReplayDelivery(console),
        "": overview_pages.Overview(console),
        "/schedules": schedule_pages.Schedules(console),
        "/schedules/{name}/run": schedule_pages.RunSchedule(console),
    }
    return console, {f"{PREFIX}{path}": page for path, page in pages.items()}


__all__ = ["ConsoleGuard", "build", "install_errors"]
