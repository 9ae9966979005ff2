"""The Falcon application: ``create_app`` composes it, ``get_app`` is gunicorn's factory."""

from __future__ import annotations

import gc
import logging
from dataclasses import dataclass
from typing import Any

import falcon
from dramatiq import Worker

from gatehouse import traces
from gatehouse.composition import Components, bootstrap
from gatehouse.freshness import FreshnessGauges
from gatehouse.live_metrics import LiveMetrics
from gatehouse.operations import Operations
from gatehouse.schedules import schedules
from gatehouse.settings import Settings
from gatehouse_api import console, errors, root, tracing
from gatehouse_api.auth import Authenticate, AuthGuard
from gatehouse_api.console.session import Sessions
from gatehouse_api.hygiene import Hygiene
from gatehouse_api.methods import UnknownMethods, with_head
from gatehouse_api.metrics_port import MetricsPort
from gatehouse_api.openapi import OpenApi
from gatehouse_api.request_ids import RequestIds
from gatehouse_api.request_metrics import RequestMetrics
from gatehouse_api.resources import (
    accounts,
    admin,
    bulk,
    catalog,
    gates,
    holds,
    jobs,
    modules,
    notifications,
    overview,
    search,
    sweeps,
    users,
    webhooks,
)
from gatehouse_api.resources.health import Health, Metrics, Ready, StoreChecks
from gatehouse_api.unrouted import NoRoute

log = logging.getLogger(__name__)
# The freshness gauges are read from PostgreSQL at most this often per API worker (a scrape is ~15 s).
FRESHNESS_TTL_S = 10.0


def create_app(c: Components) -> falcon.App:
    """The API's routes, each resource given the collaborators it uses from what the root built.

    The read side of each domain (``…Views``) is built once here and shared by its JSON
    resources and its console pages, as are the handlers their writes go through.
    """
    s = c.settings
    body = {"max_body_bytes": s.max_body_bytes}
    jobs_read = jobs.JobViews(c.jobs, c.gate, c.accounts, expiry_warning_ms=s.wb_token_expiry_warning_ms)
    gate_views = gates.GateViews(c.accounts, c.gate, c.pauses, c.hot, c.redis)
    bulk_views = bulk.BulkViews(c.bulk)
    webhook_views = webhooks.WebhookViews(c.webhooks, c.accounts)
    webhook_actions = webhooks.WebhookActions(c.webhook_handlers)
    schedule_views = admin.ScheduleViews(schedules(s.schedules), c.schedule_runs, c.dispatcher, c.modules)
    operations = Operations(c.engine, c.redis, s.broker_namespace, c.holds, c.liveness)
    hold_views = holds.HoldViews(operations, c.holds)
    overview_views = overview.OverviewViews(
        operations,
        schedule_views,
        # The overview waits less than /readyz for a store: one that does not answer leaves its numbers unknown.
        StoreChecks(c.engine, c.redis, timeout_ms=min(overview.STORE_CHECK_MS, s.ready_timeout_ms)),
    )
    ops = console.Console(
        Sessions(
            c.accounts,
            c.users,
            c.redis,
            prefix=s.broker_namespace,
            admin_token=s.admin_token.get_secret_value() if s.admin_token else None,
            console_secret=s.console_secret.get_secret_value() if s.console_secret else None,
            idle_ms=s.console_idle_timeout_ms,
            session_ms=s.console_session_ms,
        ),
        refresh_ms=s.console_refresh_ms,
        secure_cookie=s.session_cookie_secure,
    )

    # The console signs in with a cookie (its own guard); everything else with a bearer token. Both
    # count failed attempts per client address in one throttle.
    def guard(surface: str) -> AuthGuard:
        return AuthGuard(c.auth_throttle, trusted_proxies=s.trusted_proxies, surface=surface)

    authenticate = Authenticate(c.accounts, guard("api"))
    app = falcon.App(
        middleware=[
            RequestIds(),
            RequestMetrics(),
            MetricsPort(s.metrics_port),
            console.ConsoleGuard(ops),
            authenticate,
            Hygiene(),
            modules.ModuleRoutes(c.modules),
            UnknownMethods(),
            tracing.RouteNames(),
        ]
    )
    errors.install(app)
    console.install_errors(app, ops)
    create = {"handlers": c.job_handlers, "accounts": c.accounts, **body}
    catalog_parts = (c.catalog, c.catalog_handlers)
    sweep_parts = (c.sweeps, c.sweep_handlers)
    hooks = (webhook_views, webhook_actions)
    routes = {
        "/healthz": Health(),
        "/readyz": Ready(StoreChecks(c.engine, c.redis, timeout_ms=s.ready_timeout_ms)),
        "/metrics": Metrics(
            s.prometheus_multiproc_dir,
            LiveMetrics(
                c.engine,
                c.redis,
                c.liveness,
                c.schedule_runs,
                prefix=s.broker_namespace,
                schedules=[x.name for x in schedules(s.schedules).values() if x.enabled],
            ),
            FreshnessGauges(c.freshness, ttl_s=FRESHNESS_TTL_S),
        ),
        "/openapi.json": OpenApi(),
        "/v1/accounts": accounts.Accounts(c.account_handlers, **body),
        "/v1/accounts/{account_id:uuid}": accounts.Account(c.account_handlers, c.accounts, c.holds, **body),
        "/v1/accounts/{account_id:uuid}/keys": accounts.AccountKeys(c.account_handlers, c.accounts, **body),
        "/v1/accounts/{account_id:uuid}/keys/{key_id}": accounts.AccountKey(c.account_handlers),
        "/v1/accounts/{account_id:uuid}/digitization/imports": jobs.DigitizationImports(**create),
        "/v1/accounts/{account_id:uuid}/autobidder/sync": jobs.AutobidderSync(**create),
        "/v1/accounts/{account_id:uuid}/inventory/sync": jobs.InventorySync(**create),
        "/v1/accounts/{account_id:uuid}/jobs": jobs.AccountJobs(jobs_read, c.accounts),
        **{
            # An account's own endpoints: the admin resources, scoped by the path's account.
            f"/v1/accounts/{{account_id:uuid}}/webhooks/endpoints{sub}": resource(*hooks, **body)
            for sub, resource in webhooks.ENDPOINT_ROUTES.items()
        },
        "/v1/accounts/{account_id:uuid}/freshness": accounts.AccountFreshness(c.freshness),
        "/v1/jobs/{job_id:uuid}": jobs.JobStatus(jobs_read),
        "/v1/jobs/{job_id:uuid}/retry": jobs.JobRetry(c.job_handlers),
        "/v1/jobs/{job_id:uuid}/cancel": jobs.JobCancel(c.job_handlers),
        "/v1/admin/accounts": gates.AccountGates(gate_views),
        "/v1/admin/accounts/{account_id:uuid}/gate": admin.AccountGate(gate_views),
        "/v1/admin/jobs": jobs.AdminJobs(jobs_read),
        "/v1/admin/jobs/{job_id:uuid}/attempts": jobs.AdminJobAttempts(jobs_read),
        "/v1/admin/jobs/retry": jobs.BulkRetry(c.job_handlers, **body),
        "/v1/admin/jobs/cancel": jobs.BulkCancel(c.job_handlers, **body),
        "/v1/admin/queues": holds.Queues(hold_views),
        "/v1/admin/queues/{queue}/pause": holds.QueuePause(c.hold_handlers, hold_views),
        "/v1/admin/queues/{queue}/resume": holds.QueueResume(c.hold_handlers, hold_views),
        "/v1/admin/accounts/{account_id:uuid}/pause": holds.AccountPause(c.hold_handlers, hold_views),
        "/v1/admin/accounts/{account_id:uuid}/resume": holds.AccountResume(c.hold_handlers, hold_views),
        "/v1/admin/overview": overview.Overview(overview_views),
        "/v1/admin/schedules": admin.Schedules(schedule_views),
        "/v1/admin/schedules/{name}/run": admin.RunSchedule(schedule_views),
        "/v1/admin/modules": modules.Modules(c.modules),
        "/v1/admin/modules/{name}": modules.Module(c.module_handlers, **body),
        "/v1/admin/users": users.Users(c.account_handlers, c.users, **body),
        "/v1/admin/users/{user_id:uuid}": users.User(c.account_handlers),
        "/v1/admin/users/{user_id:uuid}/keys": users.UserKeys(c.account_handlers, c.users, **body),
        "/v1/admin/users/{user_id:uuid}/keys/{key_id}": users.UserKey(c.account_handlers),
        "/v1/admin/catalog/products": catalog.Products(*catalog_parts, **body),
        "/v1/admin/catalog/products/batch": catalog.ProductsBatch(
            *catalog_parts, max_body_bytes=s.catalog_batch_max_body_bytes
        ),
        "/v1/admin/catalog/products/{product_id:uuid}": catalog.Product(*catalog_parts, **body),
        "/v1/admin/catalog/attributes": catalog.Attributes(*catalog_parts, **body),
        "/v1/admin/catalog/attributes/{code}": catalog.Attribute(*catalog_parts, **body),
        "/v1/admin/catalog/search": search.Search(c.search),
        "/v1/admin/catalog/search/reindex": search.SearchReindex(c.catalog_handlers),
        "/v1/admin/catalog/bulk-operations": bulk.BulkOperations(
            bulk_views, c.catalog_handlers, max_body_bytes=s.catalog_batch_max_body_bytes
        ),
        "/v1/admin/catalog/bulk-operations/{operation_id:uuid}": bulk.BulkOperation(bulk_views),
        "/v1/admin/catalog/bulk-operations/{operation_id:uuid}/failures": bulk.BulkFailures(bulk_views),
        "/v1/admin/catalog/bulk-operations/{operation_id:uuid}/revert": bulk.BulkRevert(c.catalog_handlers),
        "/v1/admin/carts": sweeps.Carts(*sweep_parts, **body),
        "/v1/admin/carts/{cart_id:uuid}": sweeps.Cart(*sweep_parts, **body),
        "/v1/admin/price-lists": sweeps.PriceLists(*sweep_parts, **body),
        "/v1/admin/price-lists/{price_list_id:uuid}": sweeps.PriceList(*sweep_parts, **body),
        "/v1/admin/rfqs": sweeps.Rfqs(*sweep_parts, **body),
        "/v1/admin/rfqs/{rfq_id:uuid}": sweeps.Rfq(*sweep_parts, **body),
        **{
            f"/v1/admin/webhooks/endpoints{sub}": resource(*hooks, **body)
            for sub, resource in webhooks.ENDPOINT_ROUTES.items()
        },
        "/v1/admin/webhooks/delivery-counts": webhooks.DeliveryCountsByEndpoint(*hooks, **body),
        "/v1/admin/webhooks/deliveries": webhooks.Deliveries(*hooks, **body),
        "/v1/admin/webhooks/deliveries/{delivery_id:uuid}": webhooks.Delivery(*hooks, **body),
        "/v1/admin/webhooks/deliveries/{delivery_id:uuid}/replay": webhooks.ReplayDelivery(*hooks, **body),
        "/v1/me/notifications": notifications.MyNotifications(c.notifications),
        "/v1/me/notifications/{notification_id:uuid}/read": notifications.MyNotificationRead(
            c.notification_handlers
        ),
    }
    console_routes = console.build(
        ops,
        jobs=jobs_read,
        job_handlers=c.job_handlers,
        hold_handlers=c.hold_handlers,
        holds=hold_views,
        gates=gate_views,
        bulk=bulk_views,
        webhooks=webhook_views,
        webhook_actions=webhook_actions,
        modules_=c.modules,
        module_handlers=c.module_handlers,
        schedules=schedule_views,
        overview=overview_views,
        accounts=c.accounts,
        users=c.users,
        account_handlers=c.account_handlers,
        sign_in=guard("console"),
        key_rotation=c.key_rotation,
        freshness=c.freshness,
    )
    for path, resource in {**routes, **console_routes}.items():
        app.add_route(path, with_head(resource))
    # Every other path: a token checked under /v1, then a 404 that says what was not found.
    app.add_sink(NoRoute(authenticate, [*routes, *console_routes]))
    routes["/openapi.json"].describe(app)  # after the loop: the document is generated from every route
    return app


@dataclass
class Process:
    """What this API process hosts: its composition and, with role all, consumers."""

    components: Components
    consumers: Worker | None = None

    def start_consumers(self) -> None:
        settings = self.components.settings
        if settings.backend_role != "all":
            return
        self.consumers = Worker(self.components.broker, worker_threads=settings.inprocess_consumer_threads)
        self.components.broker.emit_after("process_boot")
        self.consumers.start()
        log.info("consumers started in-process (BACKEND_ROLE=all)")

    def stop(self) -> None:
        if self.consumers is not None:
            # In-flight jobs finish (up to the timeout); the stores close after them.
            self.consumers.stop(timeout=self.components.settings.shutdown_timeout_ms)
        else:
            self.components.close()


PROCESS: Process | None = None


def compose(settings: Settings) -> Components:
    """The API's composition; with role all it is the worker's (consumer middleware, actors)."""
    if settings.backend_role != "all":
        return bootstrap(settings)
    from gatehouse_worker.wiring import build

    return build(settings)


def get_app() -> Any:
    """Called in each gunicorn worker, after the fork: its traces are set up here (before the stores)."""
    global PROCESS
    traced = traces.setup("gatehouse-api")
    built = compose(root.settings())
    PROCESS = Process(built)
    app = settled(create_app(built))
    return tracing.traced(app) if traced else app


def settled(app: falcon.App) -> falcon.App:
    """The app as a worker serves it: what start-up built lives as long as the process, so it is moved
    out of the collector's reach (gc.freeze). Otherwise each full collection walks it all again:
    ~110 ms every few requests on a page that allocates much (the console's throughput, bench_console)."""
    gc.freeze()
    return app
