"""Tenant isolation, generated from the route table: every route, every method, called with an account key.

The routes come from Falcon's own table (``falcon.inspect.inspect_routes``), so
a route added later is in the matrix without anyone listing it here. For each
route and method (HEAD included, as gatehouse serves it wherever GET is):

- what the victim's own key may do there decides the route's class: a method
  an account key may use on its own account is account-scoped, any other is
  staff-only;
- on an account-scoped method, the attacker's key on the victim's account (or
  job) answers exactly what it answers for an account or job that does not
  exist — 404, the same body but for the id it sent — and nothing in it names
  the victim;
- the victim's webhook endpoint, named under the attacker's own account, is not found either;
- on a staff-only method (every ``/v1/admin/…``, ``/v1/accounts`` create, keys,
  users, ``/v1/me``, job retry/cancel), an account key is refused 403
  ``FORBIDDEN``;
- a console route (its own cookie guard) answers an account key exactly as it
  answers a client without credentials;
- and none of the attacker's calls changed a row in PostgreSQL or a key in Redis.
"""

from __future__ import annotations

import hashlib
import re
import uuid

import pytest
from falcon import inspect, testing
from sqlalchemy import text

from gatehouse_api.app import create_app
from tests.conftest import ADMIN_TOKEN

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
VICTIM_NAME = "Victim Shop Ltd"
VICTIM_TOKEN = "wb-token-of-the-victim"
WRITES = ("POST", "PUT", "PATCH", "DELETE")
PARAM = re.compile(r"\{(\w+)(?::\w+)?\}")


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def routes(app) -> list[tuple[str, str, object]]:
    """(path template, method, resource) for every method a route's resource has."""
    found = []
    for route in inspect.inspect_routes(app):
        resource = app._router.find(PARAM.sub("00000000-0000-0000-0000-000000000000", route.path))
        for method in route.methods:
            if not method.internal:
                found.append((route.path, method.method, resource[0] if resource else None))
    return found


class World:
    """Two accounts with keys, a job of the victim, a staff user; everything the paths need."""

    def __init__(self, client: testing.TestClient) -> None:
        self.client = client

        def created(path: str, body: dict | None = None) -> dict:
            response = client.simulate_post(path, json=body, headers=ADMIN)
            assert response.status_code in (201, 202), (path, response.text)
            return response.json

        self.victim = created("/v1/accounts", {"name": VICTIM_NAME, "wbToken": VICTIM_TOKEN})["accountId"]
        self.attacker = created("/v1/accounts", {"name": "Attacker", "wbToken": "wb-token-of-the-attacker"})[
            "accountId"
        ]
        self.victim_key = created(f"/v1/accounts/{self.victim}/keys")["key"]
        self.attacker_key = created(f"/v1/accounts/{self.attacker}/keys")["key"]
        self.victim_job = created(f"/v1/accounts/{self.victim}/autobidder/sync", {})["jobId"]
        self.user = created("/v1/admin/users", {"email": "staff@example.com", "name": "Staff"})["userId"]
        schedules = client.simulate_get("/v1/admin/schedules", headers=ADMIN).json
        modules = client.simulate_get("/v1/admin/modules", headers=ADMIN).json
        self.names = {
            "schedules": _first(schedules, "name"),
            "modules": _first(modules, "name"),
        }
        # An id of nothing: what "does not exist" answers, to compare with.
        self.nobody = str(uuid.uuid4())
        self.victim_endpoint = self.endpoint()

    def endpoint(self) -> str:
        """A webhook endpoint of the victim's own (a literal public IP: parsed, never contacted)."""
        response = self.client.simulate_post(
            f"/v1/accounts/{self.victim}/webhooks/endpoints",
            json={"url": "https://93.184.216.34/victim-hook"},
            headers=bearer(self.victim_key),
        )
        assert response.status_code == 201, response.text
        return response.json["endpointId"]

    def path(self, template: str, *, account: str, job: str) -> str:
        def value(match: re.Match) -> str:
            name = match.group(1)
            if name == "account_id":
                return account
            if name == "job_id":
                return job
            if name == "user_id":
                return self.user
            if name == "endpoint_id":
                return self.victim_endpoint
            before = template[: match.start()].rstrip("/").rsplit("/", 1)[-1]
            if name == "name" and before in self.names:
                return self.names[before]
            return str(uuid.uuid5(uuid.NAMESPACE_URL, name)) if ":uuid" in match.group(0) else "x"

        return PARAM.sub(value, template)

    def call(self, method: str, path: str, key: str | None):
        headers = bearer(key) if key else {}
        body = {} if method in WRITES and method != "DELETE" else None
        return self.client.simulate_request(method, path, headers=headers, json=body)

    def leaks(self, text_: str) -> list[str]:
        secrets = [VICTIM_NAME, VICTIM_TOKEN, self.victim_job, self.victim_key, "victim-hook"]
        return [s for s in secrets if s in text_]


def _first(document, field: str) -> str:
    items = document.get("items", document) if isinstance(document, dict) else document
    for item in items:
        if isinstance(item, dict) and field in item:
            return str(item[field])
    return "x"


def snapshot(gh) -> tuple[dict, dict]:
    """Every table's rows and every Redis key's value, as digests; not when a key was last used, which
    any request with a key may write, nor the authentication throttle's keys: its count of the
    attacker's failed attempts is meant to change."""
    tables = {}
    with gh.engine.connect() as conn:
        names = conn.execute(
            text("SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename")
        ).scalars()
        for name in list(names):
            rows = conn.execute(
                text(f"SELECT (to_jsonb(t) - 'last_used_at')::text FROM \"{name}\" t ORDER BY 1")
            ).scalars()
            tables[name] = hashlib.sha256("\n".join(rows).encode()).hexdigest()
    keys = {key: gh.redis.dump(key) for key in gh.redis.scan_iter(count=1000) if b":auth:{" not in key}
    return tables, keys


@pytest.fixture
def app(gh):
    return create_app(gh)


def test_every_route_keeps_one_account_out_of_another_and_account_keys_out_of_staff_routes(app, gh):
    client = testing.TestClient(app)
    world = World(client)
    table = routes(app)
    assert len(table) > 80, "the route table looks empty"

    # The class of each (route, method), from what the victim's own key may do there.
    scoped, staff, console = [], [], []
    for template, method, resource in table:
        if template.startswith("/console"):
            console.append((template, method, getattr(resource, "public", False)))
        elif getattr(resource, "public", False):
            continue
        else:
            own = world.call(
                method, world.path(template, account=world.victim, job=world.victim_job), world.victim_key
            )
            if own.status_code == 403:
                staff.append((template, method))
            else:
                assert own.status_code < 500, (method, template, own.text)
                scoped.append((template, method))

    # Only routes naming an account or a job may be open to an account key; every admin route is staff-only
    for template, method in scoped:
        assert "{account_id" in template or "{job_id" in template, (method, template)
        assert not template.startswith("/v1/admin"), (method, template)
    assert {m for t, m in scoped} >= {"GET", "HEAD", "POST"}
    assert len(staff) > 50
    # The victim's own calls may have deleted its endpoint: the attacker meets a live one
    world.victim_endpoint = world.endpoint()

    before = snapshot(gh)
    failures = []

    # Account-scoped: the victim's account looks exactly like one that does not exist
    for template, method in scoped:
        victims = world.path(template, account=world.victim, job=world.victim_job)
        nothing = world.path(template, account=world.nobody, job=world.nobody)
        seen = world.call(method, victims, world.attacker_key)
        absent = world.call(method, nothing, world.attacker_key)
        normalised = seen.text.replace(world.victim, world.nobody).replace(world.victim_job, world.nobody)
        if (
            seen.status_code != 404
            or (seen.status_code, normalised, seen.headers.get("content-type"))
            != (absent.status_code, absent.text, absent.headers.get("content-type"))
            or world.leaks(normalised)  # (the ids it sent come back, as they would for nothing)
        ):
            failures.append(("scoped", method, template, seen.status_code, seen.text[:200]))
        # … nor reaches the victim's webhook endpoint through its own account's path
        if "{endpoint_id" in template:
            via_own = world.call(
                method, world.path(template, account=world.attacker, job=world.nobody), world.attacker_key
            )
            if via_own.status_code != 404 or world.leaks(via_own.text):
                failures.append(
                    ("via own account", method, template, via_own.status_code, via_own.text[:200])
                )
        # … and on its own account the attacker reads nothing of the victim either
        if method != "GET":
            continue
        own = world.call(
            method, world.path(template, account=world.attacker, job=world.nobody), world.attacker_key
        )
        if world.leaks(own.text):
            failures.append(("own view leaks", method, template, own.status_code, own.text[:200]))

    # Staff-only: refused, whichever account's objects the path names
    for template, method in staff:
        for account, job in ((world.victim, world.victim_job), (world.attacker, world.nobody)):
            response = world.call(method, world.path(template, account=account, job=job), world.attacker_key)
            body = response.json if response.text and method != "HEAD" else {"code": "FORBIDDEN"}
            if response.status_code != 403 or body.get("code") != "FORBIDDEN" or world.leaks(response.text):
                failures.append(("staff", method, template, response.status_code, response.text[:200]))

    # The console: an account key is worth nothing more than no credentials
    for template, method, public in console:
        path = world.path(template, account=world.victim, job=world.victim_job)
        with_key, anonymous = world.call(method, path, world.attacker_key), world.call(method, path, None)
        if (with_key.status_code, with_key.text) != (anonymous.status_code, anonymous.text) or world.leaks(
            with_key.text
        ):
            failures.append(("console", method, template, with_key.status_code, with_key.text[:200]))
        if 200 <= with_key.status_code < 300 and not public:
            failures.append(("console open", method, template, with_key.status_code, ""))

    assert failures == []
    # Nothing the attacker sent changed anything
    after = snapshot(gh)
    assert [t for t in before[0] if before[0][t] != after[0].get(t)] == []
    assert before[1] == after[1]
