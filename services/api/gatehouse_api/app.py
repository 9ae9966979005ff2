"""The Falcon application: ``create_app`` composes it, ``get_app`` is gunicorn's factory."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import falcon
from dramatiq import Worker

from gatehouse.composition import Components, bootstrap
from gatehouse.settings import Settings, load_settings
from gatehouse_api import console, errors
from gatehouse_api.auth import Authenticate
from gatehouse_api.methods import UnknownMethods, with_head
from gatehouse_api.openapi import OpenApi
from gatehouse_api.resources import (
    accounts,
    admin,
    bulk,
    catalog,
    gates,
    jobs,
    modules,
    notifications,
    overview,
    search,
    sweeps,
    users,
    webhooks,
)
from gatehouse_api.resources.health import Health, Metrics, Ready

log = logging.getLogger(__name__)


def create_app(gh: Components) -> falcon.App:
    # The console signs in with a cookie (its own guard); everything else with a bearer token.
    ops, console_routes = console.build(gh)
    app = falcon.App(
        middleware=[
            console.ConsoleGuard(ops),
            Authenticate(gh.accounts),
            modules.ModuleRoutes(gh),
            UnknownMethods(),
        ]
    )
    errors.install(app)
    console.install_errors(app, ops)
    routes = {
        "/healthz": Health(),
        "/readyz": Ready(gh),
        "/metrics": Metrics(gh.settings.prometheus_multiproc_dir),
        "/openapi.json": OpenApi(),
        "/v1/accounts": accounts.Accounts(gh),
        "/v1/accounts/{account_id:uuid}": accounts.Account(gh),
        "/v1/accounts/{account_id:uuid}/keys": accounts.AccountKeys(gh),
        "/v1/accounts/{account_id:uuid}/digitization/imports": jobs.DigitizationImports(gh),
        "/v1/accounts/{account_id:uuid}/autobidder/sync": jobs.AutobidderSync(gh),
        "/v1/accounts/{account_id:uuid}/jobs": jobs.AccountJobs(gh),
        "/v1/jobs/{job_id:uuid}": jobs.JobStatus(gh),
        "/v1/jobs/{job_id:uuid}/retry": jobs.JobRetry(gh),
        "/v1/jobs/{job_id:uuid}/cancel": jobs.JobCancel(gh),
        "/v1/admin/accounts": gates.AccountGates(gh),
        "/v1/admin/accounts/{account_id:uuid}/gate": admin.AccountGate(gh),
        "/v1/admin/jobs": jobs.AdminJobs(gh),
        "/v1/admin/overview": overview.Overview(gh),
        "/v1/admin/schedules": admin.Schedules(gh),
        "/v1/admin/schedules/{name}/run": admin.RunSchedule(gh),
        "/v1/admin/modules": modules.Modules(gh),
        "/v1/admin/modules/{name}": modules.Module(gh),
        "/v1/admin/users": users.Users(gh),
        "/v1/admin/users/{user_id:uuid}/keys": users.UserKeys(gh),
        "/v1/admin/catalog/products": catalog.Products(gh),
        "/v1/admin/catalog/products/batch": catalog.ProductsBatch(gh),
        "/v1/admin/catalog/products/{product_id:uuid}": catalog.Product(gh),
        "/v1/admin/catalog/attributes": catalog.Attributes(gh),
        "/v1/admin/catalog/attributes/{code}": catalog.Attribute(gh),
        "/v1/admin/catalog/search": search.Search(gh),
        "/v1/admin/catalog/search/reindex": search.SearchReindex(gh),
        "/v1/admin/catalog/bulk-operations": bulk.BulkOperations(gh),
        "/v1/admin/catalog/bulk-operations/{operation_id:uuid}": bulk.BulkOperation(gh),
        "/v1/admin/catalog/bulk-operations/{operation_id:uuid}/failures": bulk.BulkFailures(gh),
        "/v1/admin/carts": sweeps.Carts(gh),
        "/v1/admin/carts/{cart_id:uuid}": sweeps.Cart(gh),
        "/v1/admin/price-lists": sweeps.PriceLists(gh),
        "/v1/admin/price-lists/{price_list_id:uuid}": sweeps.PriceList(gh),
        "/v1/admin/rfqs": sweeps.Rfqs(gh),
        "/v1/admin/rfqs/{rfq_id:uuid}": sweeps.Rfq(gh),
        "/v1/admin/webhooks/endpoints": webhooks.Endpoints(gh),
        "/v1/admin/webhooks/delivery-counts": webhooks.DeliveryCountsByEndpoint(gh),
        "/v1/admin/webhooks/endpoints/{endpoint_id:uuid}": webhooks.Endpoint(gh),
        "/v1/admin/webhooks/endpoints/{endpoint_id:uuid}/rotate-secret": webhooks.RotateSecret(gh),
        "/v1/admin/webhooks/endpoints/{endpoint_id:uuid}/test": webhooks.SendTest(gh),
        "/v1/admin/webhooks/endpoints/{endpoint_id:uuid}/replay": webhooks.ReplayEndpoint(gh),
        "/v1/admin/webhooks/deliveries": webhooks.Deliveries(gh),
        "/v1/admin/webhooks/deliveries/{delivery_id:uuid}": webhooks.Delivery(gh),
        "/v1/admin/webhooks/deliveries/{delivery_id:uuid}/replay": webhooks.ReplayDelivery(gh),
        "/v1/me/notifications": notifications.MyNotifications(gh),
        "/v1/me/notifications/{notification_id:uuid}/read": notifications.MyNotificationRead(gh),
    }
    for path, resource in {**routes, **console_routes}.items():
        app.add_route(path, with_head(resource))
    routes["/openapi.json"].describe(app)  # after the loop: the document is generated from every route
    return app


@dataclass
class Process:
    """What this API process hosts: its composition and, with role all, consumers."""

    gatehouse: Components
    consumers: Worker | None = None

    def start_consumers(self) -> None:
        settings = self.gatehouse.settings
        if settings.backend_role != "all":
            return
        self.consumers = Worker(self.gatehouse.broker, worker_threads=settings.inprocess_consumer_threads)
        self.gatehouse.broker.emit_after("process_boot")
        self.consumers.start()
        log.info("consumers started in-process (BACKEND_ROLE=all)")

    def stop(self) -> None:
        if self.consumers is not None:
            # In-flight jobs finish (up to the timeout); the stores close after them.
            self.consumers.stop(timeout=self.gatehouse.settings.shutdown_timeout_ms)
        else:
            self.gatehouse.close()


PROCESS: Process | None = None


def compose(settings: Settings) -> Components:
    """The API's composition; with role all it is the worker's (consumer middleware, actors)."""
    if settings.backend_role != "all":
        return bootstrap(settings)
    from gatehouse_worker.wiring import build

    return build(settings)


def get_app() -> falcon.App:
    global PROCESS
    gh = compose(load_settings())
    PROCESS = Process(gh)
    return create_app(gh)
