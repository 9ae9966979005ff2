"""The operations console: server-rendered pages under /console, served by gatehouse-api.

``build`` gives the app the console's pages by path, each with the views and
handlers it uses (the JSON API's own); the app adds ``ConsoleGuard`` to its
middleware and ``install_errors`` for the HTML error pages. Each page module
holds its pages and the form actions that are twins of JSON API calls.
"""

from __future__ import annotations

from gatehouse.accounts import Accounts
from gatehouse.freshness import FreshnessStore
from gatehouse.handlers import AccountHandlers, HoldHandlers, JobHandlers, ModuleHandlers
from gatehouse.modules import ModuleStates
from gatehouse.rotation import KeyRotation
from gatehouse.users import Users
from gatehouse_api.auth import AuthGuard
from gatehouse_api.console import accounts as account_pages
from gatehouse_api.console import bulk as bulk_pages
from gatehouse_api.console import holds as hold_pages
from gatehouse_api.console import jobs as job_pages
from gatehouse_api.console import keys as key_pages
from gatehouse_api.console import modules, signin
from gatehouse_api.console import overview as overview_pages
from gatehouse_api.console import schedules as schedule_pages
from gatehouse_api.console import throughput as throughput_pages
from gatehouse_api.console import webhooks as webhook_pages
from gatehouse_api.console.web import PREFIX, Console, ConsoleGuard, install_errors
from gatehouse_api.resources.admin import ScheduleViews
from gatehouse_api.resources.bulk import BulkViews
from gatehouse_api.resources.gates import GateViews
from gatehouse_api.resources.holds import HoldViews
from gatehouse_api.resources.jobs import JobViews
from gatehouse_api.resources.overview import OverviewViews
from gatehouse_api.resources.webhooks import WebhookActions, WebhookViews


def build(
    console: Console,
    *,
    jobs: JobViews,
    job_handlers: JobHandlers,
    hold_handlers: HoldHandlers,
    holds: HoldViews,
    gates: GateViews,
    bulk: BulkViews,
    webhooks: WebhookViews,
    webhook_actions: WebhookActions,
    modules_: ModuleStates,
    module_handlers: ModuleHandlers,
    schedules: ScheduleViews,
    overview: OverviewViews,
    accounts: Accounts,
    users: Users,
    account_handlers: AccountHandlers,
    sign_in: AuthGuard,
    key_rotation: KeyRotation,
    freshness: FreshnessStore,
) -> dict[str, object]:
    hooks = (console, webhooks, webhook_actions, modules_)
    pages = {
        "/login": signin.Login(console, sign_in),
        "/logout": signin.Logout(console),
        "/static/{name}": signin.Static(console),
        "/accounts": account_pages.Accounts(console, gates),
        "/accounts/{account_id:uuid}": account_pages.Account(
            console, gates, jobs, accounts, freshness, holds
        ),
        "/accounts/{account_id:uuid}/keys/{key_id}/revoke": key_pages.RevokeAccountKey(
            console, account_handlers
        ),
        "/users": key_pages.StaffUsers(console, users),
        "/users/{user_id:uuid}/keys/{key_id}/revoke": key_pages.RevokeUserKey(console, account_handlers),
        "/users/{user_id:uuid}/remove": key_pages.RemoveUser(console, account_handlers),
        "/jobs": job_pages.Jobs(console, jobs, accounts),
        "/jobs/{job_id:uuid}": job_pages.Job(console, jobs, gates),
        "/jobs/{job_id:uuid}/retry": job_pages.RetryJob(console, jobs, gates, job_handlers),
        "/jobs/{job_id:uuid}/cancel": job_pages.CancelJob(console, jobs, job_handlers),
        "/jobs/retry-all": job_pages.RetryAll(console, job_handlers),
        "/jobs/cancel-all": job_pages.CancelAll(console, job_handlers),
        "/throughput": throughput_pages.Throughput(console, jobs),
        "/queues/{queue}/pause": hold_pages.PauseQueue(console, hold_handlers),
        "/queues/{queue}/resume": hold_pages.ResumeQueue(console, hold_handlers),
        "/accounts/{account_id:uuid}/pause": hold_pages.PauseAccount(console, hold_handlers),
        "/accounts/{account_id:uuid}/resume": hold_pages.ResumeAccount(console, hold_handlers),
        "/modules": modules.Modules(console, modules_),
        "/modules/{name}": modules.SetModule(console, module_handlers),
        "/modules/{name}/disable": modules.DisableModule(console, module_handlers),
        "/bulk-operations": bulk_pages.BulkOperations(console, bulk, modules_, users),
        "/bulk-operations/{operation_id:uuid}": bulk_pages.BulkOperation(console, bulk, modules_, users),
        "/webhooks/endpoints": webhook_pages.Endpoints(*hooks),
        "/webhooks/endpoints/{endpoint_id:uuid}/enabled": webhook_pages.SetEnabled(*hooks),
        "/webhooks/endpoints/{endpoint_id:uuid}/rotate-secret": webhook_pages.RotateSecret(*hooks),
        "/webhooks/endpoints/{endpoint_id:uuid}/test": webhook_pages.SendTest(*hooks),
        "/webhooks/endpoints/{endpoint_id:uuid}/replay": webhook_pages.ReplayEndpoint(*hooks),
        "/webhooks/deliveries": webhook_pages.Deliveries(*hooks),
        "/webhooks/deliveries/{delivery_id:uuid}": webhook_pages.Delivery(*hooks),
        "/webhooks/deliveries/{delivery_id:uuid}/replay": webhook_pages.ReplayDelivery(*hooks),
        "": overview_pages.Overview(console, overview, key_rotation),
        "/schedules": schedule_pages.Schedules(console, schedules),
        "/schedules/{name}/run": schedule_pages.RunSchedule(console, schedules),
    }
    return {f"{PREFIX}{path}": page for path, page in pages.items()}


__all__ = ["Console", "ConsoleGuard", "build", "install_errors"]
