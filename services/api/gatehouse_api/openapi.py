"""The OpenAPI 3.1 document of the API, built from the pydantic schemas the resources use."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from gatehouse.catalog.bulk import STATUSES as BULK_STATUSES
from gatehouse.catalog.bulk import TYPES as BULK_TYPES
from gatehouse.catalog.rules import STATUSES
from gatehouse.job_types import REGISTRY
from gatehouse.models import STATES, TIERS
from gatehouse.modules import MODULES
from gatehouse.progress import PHASES
from gatehouse.webhooks.store import EVENT_TYPES
from gatehouse.webhooks.tables import STATUSES as WEBHOOK_STATUSES
from gatehouse_api import schemas as s
from gatehouse_api.resources.overview import OverviewView

PROBLEM = "application/problem+json"
ERRORS = {
    400: "malformed request (e.g. the body is not JSON)",
    401: "missing or invalid bearer token",
    403: (
        "the operation needs the admin token (or, on /v1/admin/catalog, a staff user's key; "
        "/v1/me needs a staff user's key)"
    ),
    404: "no such resource (or not visible to this key); MODULE_DISABLED: its module is not installed",
    409: (
        "collides with what is stored (`code` CONFLICT, `field` names it): a taken email, sku or code; "
        "or the state forbids it (ENDPOINT_DISABLED, NOT_REPLAYABLE, JOB_NOT_FAILED, JOB_ALREADY_LIVE, "
        "JOB_ACTIVE, JOB_FINISHED, MODULE_DISABLED: its module is disabled)"
    ),
    413: "body too large",
    415: "body is not application/json",
    422: "a field breaks a rule; `field` names it",
    503: "a store is not answering (`code` STORE_UNAVAILABLE, `store` names it); retry after `Retry-After` seconds",
}


class Document:
    def __init__(self) -> None:
        self.components: dict[str, Any] = {}

    def ref(self, model: type[BaseModel]) -> dict[str, str]:
        schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
        self.components.update(schema.pop("$defs", {}))
        self.components[model.__name__] = schema
        return {"$ref": f"#/components/schemas/{model.__name__}"}

    def operation(
        self,
        summary: str,
        ok: tuple[int, type[BaseModel] | None, str],
        errors: tuple[int, ...],
        *,
        body: tuple[type[BaseModel], bool] | None = None,
        params: list[dict] | None = None,
        public: bool = False,
    ) -> dict[str, Any]:
        status, model, description = ok
        responses: dict[str, Any] = {str(status): {"description": description}}
        if model is not None:
            responses[str(status)]["content"] = {"application/json": {"schema": self.ref(model)}}
        problem = self.ref(s.Problem)
        if not public:  # every authenticated operation reads a store
            errors = (*errors, 503)
        for code in errors:
            responses[str(code)] = {"description": ERRORS[code], "content": {PROBLEM: {"schema": problem}}}
        op: dict[str, Any] = {"summary": summary, "responses": responses}
        if params:
            op["parameters"] = params
        if body:
            model_, required = body
            op["requestBody"] = {
                "required": required,
                "content": {"application/json": {"schema": self.ref(model_)}},
            }
        if public:
            op["security"] = []
        return op


def uuid_param(name: str) -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "schema": {"type": "string", "format": "uuid"}}


def page_params(*extra: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        *extra,
        {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 200}},
        {"name": "cursor", "in": "query", "schema": {"type": "string"}},
    ]


def catalog_paths(d: Document) -> dict[str, Any]:
    """The B2B admin routes: staff users (admin token), the catalog (admin token or a user key)."""
    product = uuid_param("productId")
    code = {"name": "code", "in": "path", "required": True, "schema": {"type": "string"}}
    create_errors = (400, 401, 403, 409, 413, 415, 422)
    start_bulk = d.operation(
        "Patch many products: up to BULK_SYNC_THRESHOLD at once (200), more queued (202)",
        (202, s.BulkOperationView, "queued; watch its counters"),
        (400, 401, 403, 413, 415, 422),
        body=(s.CreateBulkOperation, True),
    )
    start_bulk["responses"]["200"] = {
        "description": "small enough: applied at once (and recorded)",
        "content": {"application/json": {"schema": d.ref(s.BulkOperationView)}},
    }
    return {
        "/v1/admin/users": {
            "post": d.operation(
                "Create a staff user (admin token)",
                (201, s.UserCreated, "created"),
                create_errors,
                body=(s.CreateUser, True),
            )
        },
        "/v1/admin/users/{userId}/keys": {
            "post": d.operation(
                "Issue a staff user's API key (admin token)",
                (201, s.KeyCreated, "the key, shown once"),
                (401, 403, 404),
                params=[uuid_param("userId")],
            )
        },
        "/v1/admin/catalog/products": {
            "post": d.operation(
                "Create a product",
                (201, s.ProductView, "created"),
                create_errors,
                body=(s.CreateProduct, True),
            ),
            "get": d.operation(
                "List products, newest first",
                (200, s.ProductPage, "a page of products"),
                (401, 403, 422),
                params=page_params(
                    {"name": "status", "in": "query", "schema": {"type": "string", "enum": list(STATUSES)}}
                ),
            ),
        },
        "/v1/admin/catalog/products/batch": {
            "post": d.operation(
                "Create up to 1,000 products, all or nothing",
                (201, s.ProductsCreated, "all created"),
                create_errors,
                body=(s.CreateProducts, True),
            )
        },
        "/v1/admin/catalog/products/{productId}": {
            "get": d.operation(
                "Read a product", (200, s.ProductView, "the product"), (401, 403, 404), params=[product]
            ),
            "patch": d.operation(
                "Edit a product (attributes merge); the change is audited",
                (200, s.ProductView, "the product as changed"),
                (400, 401, 403, 404, 413, 415, 422),
                body=(s.PatchProduct, True),
                params=[product],
            ),
        },
        "/v1/admin/catalog/attributes": {
            "post": d.operation(
                "Define a product attribute",
                (201, s.AttributeView, "created"),
                create_errors,
                body=(s.CreateAttribute, True),
            ),
            "get": d.operation(
                "List the attributes", (200, s.AttributeList, "every attribute, by code"), (401, 403)
            ),
        },
        "/v1/admin/catalog/attributes/{code}": {
            "patch": d.operation(
                "Edit an attribute (label, searchable); the change is audited; a searchable flip queues a re-index",
                (
                    200,
                    s.AttributePatched,
                    "the attribute as changed (with `reindex` when searchable flipped)",
                ),
                (400, 401, 403, 404, 413, 415, 422),
                body=(s.PatchAttribute, True),
                params=[code],
            )
        },
        "/v1/admin/catalog/search": {
            "get": d.operation(
                "Search the catalog (PostgreSQL full text; the last word is a prefix)",
                (200, s.SearchPage, "the best matches, ranked"),
                (401, 403, 422),
                params=[
                    {
                        "name": "q",
                        "in": "query",
                        "required": True,
                        "schema": {"type": "string", "minLength": 1, "maxLength": 200},
                    },
                    {"name": "status", "in": "query", "schema": {"type": "string", "enum": list(STATUSES)}},
                    {
                        "name": "limit",
                        "in": "query",
                        "schema": {"type": "integer", "minimum": 1, "maximum": 1000},
                    },
                ],
            )
        },
        "/v1/admin/catalog/search/reindex": {
            "post": d.operation(
                "Rebuild the search index (one live re-index at a time)",
                (202, s.ReindexStarted, "queued, or the live one (`alreadyRunning`)"),
                (401, 403),
            )
        },
        "/v1/admin/catalog/bulk-operations": {
            "post": start_bulk,
            "get": d.operation(
                "List bulk operations, newest first",
                (200, s.BulkOperationPage, "a page of operations"),
                (401, 403, 422),
                params=page_params(
                    {
                        "name": "status",
                        "in": "query",
                        "schema": {"type": "string", "enum": list(BULK_STATUSES)},
                    },
                    {"name": "type", "in": "query", "schema": {"type": "string", "enum": list(BULK_TYPES)}},
                ),
            ),
        },
        "/v1/admin/catalog/bulk-operations/{operationId}": {
            "get": d.operation(
                "Read a bulk operation with its live counters",
                (200, s.BulkOperationView, "the operation"),
                (401, 403, 404),
                params=[uuid_param("operationId")],
            )
        },
        "/v1/admin/catalog/bulk-operations/{operationId}/failures": {
            "get": d.operation(
                "Page through a bulk operation's failed items (the first 1,000) with each product's SKU and name",
                (200, s.BulkFailurePage, "a page of failed items, in the order they failed"),
                (401, 403, 404, 422),
                params=page_params(uuid_param("operationId")),
            )
        },
    }


def webhook_paths(d: Document) -> dict[str, Any]:
    """Webhooks admin (admin token or a user key): endpoints, deliveries with attempts, replays."""
    endpoint, delivery = uuid_param("endpointId"), uuid_param("deliveryId")
    since = {"name": "since", "in": "query", "schema": {"type": "string", "format": "date-time"}}
    body_errors = (400, 401, 403, 413, 415, 422)
    return {
        "/v1/admin/webhooks/endpoints": {
            "post": d.operation(
                "Add an endpoint; its whsec_ secret is shown only in this answer",
                (201, s.EndpointCreated, "created"),
                body_errors,
                body=(s.CreateEndpoint, True),
            ),
            "get": d.operation("List endpoints", (200, s.EndpointList, "every endpoint"), (401, 403)),
        },
        "/v1/admin/webhooks/delivery-counts": {
            "get": d.operation(
                "Count each endpoint's deliveries by status",
                (200, s.DeliveryCountList, "one entry per endpoint, every status (zeros too)"),
                (401, 403),
            )
        },
        "/v1/admin/webhooks/endpoints/{endpointId}": {
            "get": d.operation(
                "Read an endpoint", (200, s.EndpointView, "the endpoint"), (401, 403, 404), params=[endpoint]
            ),
            "patch": d.operation(
                "Edit an endpoint (url, eventTypes, enabled, description)",
                (200, s.EndpointView, "the endpoint as changed"),
                (*body_errors, 404),
                body=(s.PatchEndpoint, True),
                params=[endpoint],
            ),
            "delete": d.operation(
                "Delete an endpoint and its deliveries",
                (204, None, "deleted"),
                (401, 403, 404),
                params=[endpoint],
            ),
        },
        "/v1/admin/webhooks/endpoints/{endpointId}/rotate-secret": {
            "post": d.operation(
                "Issue a new secret; the old one also signs for WEBHOOK_ROTATION_GRACE_MS",
                (200, s.SecretRotated, "the new secret, shown once"),
                (401, 403, 404),
                params=[endpoint],
            )
        },
        "/v1/admin/webhooks/endpoints/{endpointId}/test": {
            "post": d.operation(
                "Send a webhook.test event to this endpoint",
                (202, s.TestSent, "queued"),
                (401, 403, 404, 409),
                params=[endpoint],
            )
        },
        "/v1/admin/webhooks/endpoints/{endpointId}/replay": {
            "post": d.operation(
                "Replay the endpoint's dead deliveries (since a time): one queued job",
                (202, s.ReplayQueued, "queued"),
                (401, 403, 404, 422),
                params=[endpoint, since],
            )
        },
        "/v1/admin/webhooks/deliveries": {
            "get": d.operation(
                "List deliveries, newest first",
                (200, s.DeliveryPage, "a page of deliveries"),
                (401, 403, 422),
                params=page_params(
                    {"name": "endpointId", "in": "query", "schema": {"type": "string", "format": "uuid"}},
                    {
                        "name": "status",
                        "in": "query",
                        "schema": {"type": "string", "enum": list(WEBHOOK_STATUSES)},
                    },
                    {
                        "name": "eventType",
                        "in": "query",
                        "schema": {"type": "string", "enum": list(EVENT_TYPES)},
                    },
                    since,
                ),
            )
        },
        "/v1/admin/webhooks/deliveries/{deliveryId}": {
            "get": d.operation(
                "Read a delivery with its attempts",
                (200, s.DeliveryDetail, "the delivery"),
                (401, 403, 404),
                params=[delivery],
            )
        },
        "/v1/admin/webhooks/deliveries/{deliveryId}/replay": {
            "post": d.operation(
                "Re-send a dead or delivered message (same webhook-id, new series of attempts)",
                (202, s.DeliveryView, "queued"),
                (401, 403, 404, 409),
                params=[delivery],
            )
        },
    }


def module_paths(d: Document) -> dict[str, Any]:
    """Modules (admin token): their routes answer MODULE_DISABLED and their consumers pause while off."""
    name = {
        "name": "name",
        "in": "path",
        "required": True,
        "schema": {"type": "string", "enum": list(MODULES)},
    }
    return {
        "/v1/admin/modules": {
            "get": d.operation("List the modules", (200, s.ModuleList, "every module"), (401, 403))
        },
        "/v1/admin/modules/{name}": {
            "put": d.operation(
                "Switch a module on or off (every API and worker process follows within a second)",
                (200, s.ModuleView, "the module as it is now"),
                (400, 401, 403, 404, 413, 415, 422),
                body=(s.SetModule, True),
                params=[name],
            )
        },
    }


def sweep_paths(d: Document) -> dict[str, Any]:
    """Carts, price lists, RFQs (admin token or a user key); their moves in time are sweeps on the workers."""
    create = (400, 401, 403, 404, 409, 413, 415, 422)  # 404/409: MODULE_DISABLED too
    read = (401, 403, 404, 409)
    return {
        "/v1/admin/carts": {
            "post": d.operation(
                "Create an open cart", (201, s.CartView, "created"), create, body=(s.CreateCart, True)
            )
        },
        "/v1/admin/carts/{cartId}": {
            "get": d.operation(
                "Read a cart", (200, s.CartView, "the cart"), read, params=[uuid_param("cartId")]
            ),
            "patch": d.operation(
                "Replace a cart's items (touches updatedAt; an abandoned cart is open again)",
                (200, s.CartView, "the cart as changed"),
                create,
                body=(s.PatchCart, True),
                params=[uuid_param("cartId")],
            ),
        },
        "/v1/admin/price-lists": {
            "post": d.operation(
                "Create a price list (scheduled, active or expired by its times)",
                (201, s.PriceListView, "created"),
                create,
                body=(s.CreatePriceList, True),
            )
        },
        "/v1/admin/price-lists/{priceListId}": {
            "get": d.operation(
                "Read a price list",
                (200, s.PriceListView, "the price list"),
                read,
                params=[uuid_param("priceListId")],
            )
        },
        "/v1/admin/rfqs": {
            "post": d.operation(
                "Create a request for quotation (open until expiresAt)",
                (201, s.RfqView, "created"),
                create,
                body=(s.CreateRfq, True),
            )
        },
        "/v1/admin/rfqs/{rfqId}": {
            "get": d.operation("Read an RFQ", (200, s.RfqView, "the RFQ"), read, params=[uuid_param("rfqId")])
        },
    }


def me_paths(d: Document) -> dict[str, Any]:
    """The calling staff user's own resources (a user key; the admin token and account keys: 403)."""
    return {
        "/v1/me/notifications": {
            "get": d.operation(
                "The calling staff user's notifications, newest first (a user key)",
                (200, s.NotificationList, "the newest notifications"),
                (401, 403),
            )
        },
        "/v1/me/notifications/{notificationId}/read": {
            "post": d.operation(
                "Mark one of the caller's notifications read (a user key)",
                (200, s.NotificationView, "the notification, read"),
                (401, 403, 404),
                params=[uuid_param("notificationId")],
            )
        },
    }


def job_paths(d: Document) -> dict[str, Any]:
    """A job's status (its account's key or admin) and an operator's retry and cancel (admin)."""
    job = uuid_param("jobId")
    retry = d.operation(
        "Run a failed job again with fresh attempts (admin); the change is audited",
        (202, s.JobView, "back in line (waiting, attempt 1) and enqueued; poll its Location"),
        (401, 403, 404, 409),
        params=[job],
    )
    retry["responses"]["409"]["description"] = (
        "JOB_NOT_FAILED: only a failed job is retried; JOB_ALREADY_LIVE: its account (or, for a "
        "system job, the system) has a live job of its type, named in `detail`"
    )
    cancel = d.operation(
        "Cancel a waiting or delayed job (admin): it ends failed, error code `cancelled`; audited",
        (200, s.JobView, "the job, failed; it leaves its account's gate line and never runs"),
        (401, 403, 404, 409),
        params=[job],
    )
    cancel["responses"]["409"]["description"] = (
        "JOB_ACTIVE: a worker runs it now; JOB_FINISHED: it has already completed or failed"
    )
    return {
        "/v1/jobs/{jobId}": {
            "get": d.operation(
                "Poll a job: state and what it is doing or waiting for",
                (200, s.JobView, "the job"),
                (401, 404),
                params=[job],
            )
        },
        "/v1/jobs/{jobId}/retry": {"post": retry},
        "/v1/jobs/{jobId}/cancel": {"post": cancel},
    }


def build() -> dict[str, Any]:
    d = Document()
    account = uuid_param("accountId")
    body_errors = (400, 401, 404, 413, 415, 422)
    paths = {
        "/v1/accounts": {
            "post": d.operation(
                "Create a seller account (admin)",
                (201, s.AccountCreated, "created; the WB token is stored encrypted and never returned"),
                (400, 401, 403, 413, 415, 422),
                body=(s.CreateAccount, True),
            )
        },
        "/v1/accounts/{accountId}": {
            "get": d.operation(
                "Read an account", (200, s.AccountView, "the account"), (401, 404), params=[account]
            )
        },
        "/v1/accounts/{accountId}/keys": {
            "post": d.operation(
                "Issue an account-scoped API key (admin)",
                (201, s.KeyCreated, "the key, shown once"),
                (401, 403, 404),
                params=[account],
            )
        },
        "/v1/accounts/{accountId}/digitization/imports": {
            "post": d.operation(
                "Start a digitization import (feeds or report) for a period",
                (202, s.JobAccepted, "accepted, or the live job of this type (alreadyRunning)"),
                body_errors,
                body=(s.ImportRequest, True),
                params=[account],
            )
        },
        "/v1/accounts/{accountId}/autobidder/sync": {
            "post": d.operation(
                "Start an autobidder sync (campaigns, stats, bids)",
                (202, s.JobAccepted, "accepted, or the live sync (alreadyRunning)"),
                body_errors,
                body=(s.AutobidderSyncRequest, False),
                params=[account],
            )
        },
        "/v1/accounts/{accountId}/jobs": {
            "get": d.operation(
                "List an account's jobs, newest first",
                (200, s.JobPage, "a page of jobs"),
                (401, 404, 422),
                params=page_params(
                    account,
                    {"name": "state", "in": "query", "schema": {"type": "string", "enum": list(STATES)}},
                    {"name": "type", "in": "query", "schema": {"type": "string", "enum": sorted(REGISTRY)}},
                ),
            )
        },
        **job_paths(d),
        "/v1/admin/accounts": {
            "get": d.operation(
                "Every seller account with its gate and WB's 429 pauses of the last 24 h, newest first (admin)",
                (200, s.AccountGatePage, "a page of accounts"),
                (401, 403, 422),
                params=page_params(
                    {
                        "name": "name",
                        "in": "query",
                        "description": "a part of the name, any case",
                        "schema": {"type": "string", "maxLength": 200},
                    },
                    {
                        "name": "hot",
                        "in": "query",
                        "description": "true: only accounts that are hot",
                        "schema": {"type": "string", "enum": ["true", "false"]},
                    },
                ),
            )
        },
        "/v1/admin/accounts/{accountId}/gate": {
            "get": d.operation(
                "The account's gate: holder, lease left, who wants it, who waits, WB's recent 429 pauses (admin)",
                (200, s.GateView, "the gate's state"),
                (401, 403, 404),
                params=[account],
            )
        },
        "/v1/admin/jobs": {
            "get": d.operation(
                "Every account's jobs, newest first, as the status poll shows each (admin)",
                (200, s.JobPage, "a page of jobs"),
                (401, 403, 422),
                params=page_params(
                    {"name": "state", "in": "query", "schema": {"type": "string", "enum": list(STATES)}},
                    {
                        "name": "phase",
                        "in": "query",
                        "description": "progress.phase",
                        "schema": {"type": "string", "enum": list(PHASES)},
                    },
                    {"name": "type", "in": "query", "schema": {"type": "string", "enum": sorted(REGISTRY)}},
                    {"name": "tier", "in": "query", "schema": {"type": "string", "enum": list(TIERS)}},
                    {"name": "accountId", "in": "query", "schema": {"type": "string", "format": "uuid"}},
                    {
                        "name": "createdAfter",
                        "in": "query",
                        "description": "ISO 8601, inclusive (no offset: UTC)",
                        "schema": {"type": "string", "format": "date-time"},
                    },
                    {
                        "name": "createdBefore",
                        "in": "query",
                        "description": "ISO 8601, exclusive (no offset: UTC)",
                        "schema": {"type": "string", "format": "date-time"},
                    },
                ),
            )
        },
        "/v1/admin/overview": {
            "get": d.operation(
                "Per queue ready, delayed, running, failed in 24 h and dead letters; live workers and "
                "their busy threads; schedules' last and next run; store health (admin). A store that "
                "does not answer leaves its own numbers null",
                (200, OverviewView, "the snapshot"),
                (401, 403),
            )
        },
        "/v1/admin/schedules": {
            "get": d.operation(
                "The periodic syncs and sweeps: cron (UTC), max wait, last and next run (admin)",
                (200, s.ScheduleList, "the schedules"),
                (401, 403),
            )
        },
        "/v1/admin/schedules/{name}/run": {
            "post": d.operation(
                "Fire a schedule's tick now (admin)",
                (202, s.ScheduleRun, "the tick is queued"),
                (401, 403, 404),
                params=[{"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}],
            )
        },
        **catalog_paths(d),
        **webhook_paths(d),
        **module_paths(d),
        **sweep_paths(d),
        **me_paths(d),
        "/healthz": {"get": d.operation("Liveness", (200, None, "alive"), (), public=True)},
        "/readyz": {
            "get": d.operation("Readiness", (200, None, "PostgreSQL and Redis answer"), (), public=True)
        },
    }
    paths["/readyz"]["get"]["responses"]["503"] = {
        "description": "a store is down (named in `down`)",
        "content": {PROBLEM: {"schema": {"type": "object"}}},
    }
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Gatehouse",
            "version": "1",
            "description": "Job API and B2B admin API of Gatehouse.",
        },
        "paths": paths,
        "components": {
            "schemas": d.components,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}],
    }


class OpenApi:
    public = True

    def __init__(self) -> None:
        self.document = build()

    def on_get(self, req: Any, resp: Any) -> None:
        resp.media = self.document
