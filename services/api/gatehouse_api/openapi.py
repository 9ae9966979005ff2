"""The OpenAPI 3.1 document of the API, generated from the routes Falcon serves and each responder's contract.

A responder declares its operation next to itself with ``@contract`` (summary,
success replies, error statuses, body, query parameters); the route's URI
template gives the path and its path parameters, the resource's ``public`` flag
(what ``Authenticate`` reads) its security. A resource that serves no JSON
operation says why in ``outside_contract`` (the console's HTML pages, the
Prometheus text of /metrics, this document). HEAD is never described: wherever
GET is, ``with_head`` serves it as GET. tests/integration/test_api_contract.py
holds the document to ``falcon.inspect.inspect_routes`` in both directions.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import falcon
from falcon.routing import map_http_methods
from pydantic import BaseModel

from gatehouse_api import schemas as s
from gatehouse_api.paging import MAX_PAGE

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
        "JOB_FINISHED, MODULE_DISABLED: its module is disabled)"
    ),
    413: "body too large",
    415: "body is not application/json",
    422: (
        "a field breaks a rule (`code` VALIDATION_ERROR): `field` and `detail` name the first, "
        "`errors` lists every invalid field found as {field, message}"
    ),
    429: (
        "too many failed authentication attempts from this client address (`code` TOO_MANY_ATTEMPTS): "
        "every request from it is refused for `Retry-After` seconds"
    ),
    503: (
        "a store is not answering (`code` STORE_UNAVAILABLE, `store` names it), another change holds "
        "what this request writes (RESOURCE_BUSY), or PostgreSQL took too long (STATEMENT_TIMEOUT); "
        "retry after `Retry-After` seconds"
    ),
}
INFO = {"title": "Gatehouse", "version": "1", "description": "Job API and B2B admin API of Gatehouse."}

Reply = tuple[int, type[BaseModel] | None, str]  # status, body model (None: no body), description
Responder = TypeVar("Responder", bound=Callable[..., None])


@dataclass(frozen=True)
class Contract:
    summary: str
    ok: tuple[Reply, ...]
    errors: tuple[int, ...]
    notes: dict[int, str]  # an error status's own description instead of ERRORS'
    body: tuple[type[BaseModel], bool] | None  # the model and whether a body is required
    params: tuple[dict[str, Any], ...]


# Every responder that declared a contract: the contract test finds those no route serves.
DECLARED: list[Callable[..., None]] = []


def contract(
    summary: str,
    ok: Reply | list[Reply],
    errors: tuple[int, ...] = (),
    *,
    notes: dict[int, str] | None = None,
    body: tuple[type[BaseModel], bool] | None = None,
    params: Sequence[dict[str, Any]] = (),
) -> Callable[[Responder], Responder]:
    """Declare a responder's operation. An authenticated one also answers 429 (its client locked out
    after failed attempts) and 503 (it reads a store)."""
    if stray := set(notes or {}) - set(errors):
        raise ValueError(f"notes on statuses not among the errors: {sorted(stray)}")

    def declare(responder: Responder) -> Responder:
        replies = tuple(ok) if isinstance(ok, list) else (ok,)
        responder.contract = Contract(summary, replies, tuple(errors), dict(notes or {}), body, tuple(params))
        DECLARED.append(responder)
        return responder

    return declare


def query(name: str, description: str | None = None, *, required: bool = False, **schema: Any) -> dict:
    """A query parameter; its schema is a string unless ``schema`` says otherwise."""
    param: dict[str, Any] = {"name": name, "in": "query", "schema": {"type": "string", **schema}}
    if description:
        param["description"] = description
    if required:
        param["required"] = True
    return param


def path(name: str, **schema: Any) -> dict:
    """A path parameter. A contract names one only to narrow its URI template's field: {name} is any string."""
    return {"name": name, "in": "path", "required": True, "schema": {"type": "string", **schema}}


def page_params(*extra: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        *extra,
        query("limit", type="integer", minimum=1, maximum=MAX_PAGE),
        query("cursor"),
    ]


# Falcon URI template fields: {name} or {name:converter(args)}.
FIELD = re.compile(r"{(\w+)(?::(\w+)(?:\(.*?\))?)?}")
CONVERTED = {"": {}, "uuid": {"format": "uuid"}}  # the converters the routes use


def camel(name: str) -> str:
    return re.sub(r"_(\w)", lambda m: m[1].upper(), name)


def path_of(template: str) -> str:
    """The OpenAPI path of a Falcon URI template: /v1/jobs/{job_id:uuid} is /v1/jobs/{jobId}."""
    return FIELD.sub(lambda m: "{" + camel(m[1]) + "}", template)


def path_params(template: str) -> dict[str, dict[str, Any]]:
    return {
        camel(name): path(camel(name), **CONVERTED[converter]) for name, converter in FIELD.findall(template)
    }


def routes(app: falcon.App) -> Iterator[tuple[str, Any]]:
    """Every (URI template, resource) the app routes.

    The compiled router's nodes, walked as ``falcon.inspect.inspect_routes`` walks
    them: that one names the responders but does not hand them out.
    """
    nodes = list(app._router._roots)
    while nodes:
        node = nodes.pop()
        if node.resource is not None:
            yield node.uri_template, node.resource
        nodes.extend(node.children)


def operations(app: falcon.App) -> Iterator[tuple[str, str, Any, Callable[..., None]]]:
    """(template, method, resource, responder) of every operation of the JSON contract, declared or not."""
    for template, resource in routes(app):
        if getattr(resource, "outside_contract", None):
            continue
        for method, responder in map_http_methods(resource).items():
            if method == "HEAD" and responder == getattr(resource, "on_get", None):
                continue  # with_head: GET's responder, described by GET
            yield template, method, resource, responder


class Document:
    def __init__(self) -> None:
        self.components: dict[str, Any] = {}

    def ref(self, model: type[BaseModel]) -> dict[str, str]:
        schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
        self.components.update(schema.pop("$defs", {}))
        self.components[model.__name__] = schema
        return {"$ref": f"#/components/schemas/{model.__name__}"}

    def operation(self, c: Contract, template: str, *, public: bool) -> dict[str, Any]:
        responses: dict[str, Any] = {}
        for status, model, description in c.ok:
            responses[str(status)] = {"description": description}
            if model is not None:
                responses[str(status)]["content"] = {"application/json": {"schema": self.ref(model)}}
        problem = self.ref(s.Problem)
        # Every authenticated operation is throttled per client address and reads a store.
        errors = c.errors if public else (*c.errors, 429, 503)
        for status in errors:
            description = c.notes.get(status, ERRORS[status])
            responses[str(status)] = {"description": description, "content": {PROBLEM: {"schema": problem}}}
        op: dict[str, Any] = {"summary": c.summary, "responses": responses}
        in_path = path_params(template)
        narrowed = {p["name"]: p for p in c.params if p["in"] == "path"}
        if unknown := set(narrowed) - set(in_path):
            raise ValueError(f"{template} has no path parameter {', '.join(sorted(unknown))}")
        params = [*{**in_path, **narrowed}.values(), *(p for p in c.params if p["in"] != "path")]
        if params:
            op["parameters"] = params
        if c.body:
            model, required = c.body
            op["requestBody"] = {
                "required": required,
                "content": {"application/json": {"schema": self.ref(model)}},
            }
        if public:
            op["security"] = []
        return op


def build(app: falcon.App) -> dict[str, Any]:
    """The document of every declared operation of ``app``; an undeclared one is left to the contract test."""
    d = Document()
    paths: dict[str, dict[str, Any]] = {}
    for template, method, resource, responder in sorted(operations(app), key=lambda o: o[:2]):
        declared: Contract | None = getattr(responder, "contract", None)
        if declared is not None:
            operation = d.operation(declared, template, public=getattr(resource, "public", False))
            paths.setdefault(path_of(template), {})[method.lower()] = operation
    return {
        "openapi": "3.1.0",
        "info": INFO,
        "paths": paths,
        "components": {
            "schemas": d.components,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}],
    }


class OpenApi:
    """GET /openapi.json: built by ``describe`` once the app has all its routes."""

    public = True
    outside_contract = "the document itself"

    def __init__(self) -> None:
        self.document: dict[str, Any] = {}

    def describe(self, app: falcon.App) -> None:
        self.document = build(app)

    def on_get(self, req: Any, resp: Any) -> None:
        resp.media = self.document
