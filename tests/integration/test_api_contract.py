"""The HTTP contract of every endpoint and error code (Falcon app in-process, real PostgreSQL and Redis)."""

from __future__ import annotations

import uuid

import pytest
from falcon import testing
from falcon.inspect import inspect_routes

from gatehouse.composition import bootstrap
from gatehouse_api import openapi
from gatehouse_api.app import create_app
from tests.conftest import ADMIN_TOKEN
from tests.support.accounts import forget_account_checks
from tests.support.processes import free_port

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
PROBLEM = "application/problem+json"


@pytest.fixture
def client(gh):
    return testing.TestClient(create_app(gh))


def verify_jobs(gh, account: str) -> set[str]:
    """The account-verify job its creation wrote (one live per account)."""
    with gh.engine.connect() as conn:
        return {
            str(job_id)
            for job_id in conn.exec_driver_sql(
                "SELECT id FROM jobs WHERE account_id = %s AND type = 'account-verify'", (account,)
            ).scalars()
        }


def create_account(client, name="Shop") -> str:
    response = client.simulate_post(
        "/v1/accounts", json={"name": name, "wbToken": "wb-secret"}, headers=ADMIN
    )
    assert response.status_code == 201, response.text
    return response.json["accountId"]


def key_for(client, account_id) -> dict:
    response = client.simulate_post(f"/v1/accounts/{account_id}/keys", headers=ADMIN)
    assert response.status_code == 201
    return {"Authorization": f"Bearer {response.json['key']}"}


def assert_problem(response, status: int, code: str, field: str | None = None, *, v1: bool = True) -> dict:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == PROBLEM
    assert (response.headers.get("cache-control") == "no-store") is v1  # every /v1 answer, errors too
    body = response.json
    assert {"type", "title", "status", "detail", "code"} <= set(body)
    assert body["status"] == status and body["code"] == code
    if field is not None:
        assert body.get("field") == field
    return body


def imports(account_id: str) -> str:
    return f"/v1/accounts/{account_id}/digitization/imports"


FEEDS = {"kind": "feeds", "dateFrom": "2026-10-01", "dateTo": "2026-10-31"}


# -- accounts --------------------------------------------------------------------------


def test_create_account_stores_the_wb_token_encrypted_and_never_returns_it(client, gh, sql):
    response = client.simulate_post(
        "/v1/accounts", json={"name": "Shop", "wbToken": "wb-secret"}, headers=ADMIN
    )

    assert response.status_code == 201
    assert set(response.json) == {"accountId", "name"}
    assert response.headers["location"] == f"/v1/accounts/{response.json['accountId']}"
    [(stored,)] = sql("SELECT wb_token_encrypted FROM accounts")
    assert "wb-secret" not in stored
    assert gh.accounts.wb_token(uuid.UUID(response.json["accountId"])) == "wb-secret"
    assert "wbToken" not in client.simulate_get(response.headers["location"], headers=ADMIN).json


def test_read_account(client):
    account = create_account(client, "Лавка")
    response = client.simulate_get(f"/v1/accounts/{account}", headers=ADMIN)
    assert response.status_code == 200
    assert response.json["accountId"] == account and response.json["name"] == "Лавка"
    assert response.json["active"] is True and response.json["tokenInvalid"] is None
    assert response.json["createdAt"]


def test_patch_account_renames_switches_off_and_its_creates_answer_409_whoever_asks(client):
    account = create_account(client)
    key = key_for(client, account)
    url = f"/v1/accounts/{account}"

    response = client.simulate_patch(url, json={"name": "Лавка 2", "active": False}, headers=ADMIN)

    assert response.status_code == 200, response.text
    assert (response.json["name"], response.json["active"], response.json["tokenInvalid"]) == (
        "Лавка 2",
        False,
        None,
    )
    assert "wbToken" not in response.json
    for headers in (key, ADMIN):  # the account's own key (read with the key) and anyone else (read here)
        assert_problem(
            client.simulate_post(f"{url}/inventory/sync", headers=headers), 409, "ACCOUNT_INACTIVE"
        )
    assert client.simulate_patch(url, json={"active": True}, headers=ADMIN).json["active"] is True
    assert client.simulate_post(f"{url}/inventory/sync", headers=key).status_code == 202
    # … and only an admin changes an account
    assert_problem(client.simulate_patch(url, json={"name": "mine"}, headers=key), 403, "FORBIDDEN")
    assert_problem(
        client.simulate_patch(f"/v1/accounts/{uuid.uuid4()}", json={"name": "x"}, headers=ADMIN),
        404,
        "NOT_FOUND",
    )


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, None),
        ({"name": "   "}, "name"),
        ({"name": "a\u200bb"}, "name"),
        ({"name": None}, "name"),
        ({"wbToken": ""}, "wbToken"),
        ({"active": "no"}, "active"),
        ({"active": False, "token_invalid": None}, "token_invalid"),
    ],
)
def test_patch_account_validation_names_the_field(client, body, field):
    response = client.simulate_patch(f"/v1/accounts/{create_account(client)}", json=body, headers=ADMIN)
    assert_problem(response, 422, "VALIDATION_ERROR", field)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"wbToken": "t"}, "name"),
        ({"name": "   ", "wbToken": "t"}, "name"),
        ({"name": "x" * 201, "wbToken": "t"}, "name"),
        ({"name": "a\u0000b", "wbToken": "t"}, "name"),
        ({"name": "Shop"}, "wbToken"),
        ({"name": "Shop", "wbToken": 42}, "wbToken"),
        ({"name": "Shop", "wbToken": "t", "admin": True}, "admin"),
    ],
)
def test_create_account_validation_names_the_field(client, body, field):
    response = client.simulate_post("/v1/accounts", json=body, headers=ADMIN)
    assert_problem(response, 422, "VALIDATION_ERROR", field)


def test_body_must_be_a_json_object_of_bounded_size(client, settings):
    url, headers = "/v1/accounts", {**ADMIN, "Content-Type": "application/json"}
    assert_problem(client.simulate_post(url, body="{not json", headers=headers), 400, "INVALID_JSON")
    assert_problem(client.simulate_post(url, body="[1, 2]", headers=headers), 422, "VALIDATION_ERROR")
    assert_problem(client.simulate_post(url, body="", headers=headers), 422, "VALIDATION_ERROR")
    text = {**ADMIN, "Content-Type": "text/plain"}
    assert_problem(
        client.simulate_post(url, body='{"name": "a"}', headers=text), 415, "UNSUPPORTED_MEDIA_TYPE"
    )
    huge = '{"name": "' + "x" * settings.max_body_bytes + '", "wbToken": "t"}'
    assert_problem(client.simulate_post(url, body=huge, headers=headers), 413, "PAYLOAD_TOO_LARGE")


# -- auth ------------------------------------------------------------------------------


@pytest.mark.parametrize("header", [None, "Bearer", "Bearer nope", "Basic YWRtaW46YWRtaW4=", "ghk_x_y"])
def test_missing_or_wrong_token_is_401(client, header):
    account = create_account(client)
    headers = {"Authorization": header} if header else {}
    response = client.simulate_get(f"/v1/accounts/{account}", headers=headers)
    assert_problem(response, 401, "UNAUTHORIZED")
    assert response.headers["www-authenticate"] == "Bearer"


def test_an_account_key_sees_only_its_own_account(client):
    mine, other = create_account(client, "mine"), create_account(client, "other")
    key = key_for(client, mine)

    assert client.simulate_get(f"/v1/accounts/{mine}", headers=key).status_code == 200
    assert_problem(client.simulate_get(f"/v1/accounts/{other}", headers=key), 404, "NOT_FOUND")
    assert_problem(client.simulate_post(imports(other), json=FEEDS, headers=key), 404, "NOT_FOUND")
    assert_problem(client.simulate_get(f"/v1/accounts/{other}/jobs", headers=key), 404, "NOT_FOUND")


def test_an_account_key_cannot_do_admin_things(client):
    key = key_for(client, create_account(client))
    assert_problem(
        client.simulate_post("/v1/accounts", json={"name": "x", "wbToken": "t"}, headers=key),
        403,
        "FORBIDDEN",
    )


def test_keys_are_stored_hashed(client, sql):
    account = create_account(client)
    key = key_for(client, account)["Authorization"].removeprefix("Bearer ")
    [(stored,)] = sql("SELECT secret_sha256 FROM api_keys")
    assert key.split("_", 2)[2] not in stored  # the secret may hold "_" itself
    assert_problem(
        client.simulate_get(f"/v1/accounts/{account}", headers={"Authorization": f"Bearer {key}x"}),
        401,
        "UNAUTHORIZED",
    )


def test_unknown_account_and_malformed_ids_are_404(client):
    assert_problem(client.simulate_get(f"/v1/accounts/{uuid.uuid4()}", headers=ADMIN), 404, "NOT_FOUND")
    assert_problem(client.simulate_get("/v1/accounts/not-a-uuid", headers=ADMIN), 404, "NOT_FOUND")
    assert_problem(client.simulate_post(f"/v1/accounts/{uuid.uuid4()}/keys", headers=ADMIN), 404, "NOT_FOUND")
    assert_problem(
        client.simulate_post(imports(str(uuid.uuid4())), json=FEEDS, headers=ADMIN), 404, "NOT_FOUND"
    )


def test_wrong_method_and_unknown_path(client):
    response = client.simulate_delete("/v1/accounts", headers=ADMIN)
    assert_problem(response, 405, "METHOD_NOT_ALLOWED")
    assert response.headers["allow"] == "POST, OPTIONS"
    assert_problem(client.simulate_get("/v2/nothing", headers=ADMIN), 404, "NOT_FOUND", v1=False)


@pytest.mark.filterwarnings("ignore:Unknown REQUEST_METHOD")  # wsgiref's validator, not the app
def test_an_unknown_method_is_405_like_a_missing_one(client):
    response = client.simulate_request("FOO", f"/v1/jobs/{uuid.uuid4()}", headers=ADMIN)
    assert_problem(response, 405, "METHOD_NOT_ALLOWED")
    assert response.headers["allow"] == "GET, HEAD, OPTIONS"
    # Authentication first, as for any other method.
    assert_problem(client.simulate_request("FOO", "/v1/accounts"), 401, "UNAUTHORIZED")
    assert_problem(client.simulate_request("FOO", "/v2/nothing", headers=ADMIN), 404, "NOT_FOUND", v1=False)


def test_head_answers_like_get_without_a_body(client):
    account = create_account(client)
    get = client.simulate_get(f"/v1/accounts/{account}", headers=ADMIN)
    head = client.simulate_head(f"/v1/accounts/{account}", headers=ADMIN)
    assert head.status_code == get.status_code == 200
    assert head.content == b"" and head.headers["content-length"] == str(len(get.content))
    assert client.simulate_head(f"/v1/accounts/{uuid.uuid4()}", headers=ADMIN).status_code == 404
    assert client.simulate_head("/healthz").status_code == 200


@pytest.mark.parametrize("depth", [300, 10_000])
def test_a_deeply_nested_body_is_invalid_json(client, depth):
    body = '{"a":' * depth + "1" + "}" * depth
    response = client.simulate_post(
        "/v1/accounts", body=body, headers={**ADMIN, "Content-Type": "application/json"}
    )
    assert_problem(response, 400, "INVALID_JSON")


# -- creating jobs ---------------------------------------------------------------------


def test_import_is_accepted_once_then_already_running_for_any_period(client, gh):
    account = create_account(client)

    first = client.simulate_post(imports(account), json=FEEDS, headers=ADMIN)
    other_period = {**FEEDS, "dateFrom": "2026-01-01", "dateTo": "2026-01-02"}
    second = client.simulate_post(imports(account), json=other_period, headers=ADMIN)

    assert first.status_code == second.status_code == 202
    assert first.json == {"jobId": first.json["jobId"], "alreadyRunning": False}
    assert second.json == {"jobId": first.json["jobId"], "alreadyRunning": True}
    assert first.headers["location"] == f"/v1/jobs/{first.json['jobId']}"
    # Beside the account's own account-verify job (written with the account), the one import.
    assert gh.dispatcher.queued_job_ids({"wb-user"}) - verify_jobs(gh, account) == {first.json["jobId"]}
    job = gh.jobs.get(uuid.UUID(first.json["jobId"]))
    assert (job.type, job.tier, job.state, job.max_attempts) == ("import-user-feeds", "user", "waiting", 5)
    assert job.payload == {"dateFrom": "2026-10-01", "dateTo": "2026-10-31"}


def test_feeds_and_report_are_different_job_types(client):
    account = create_account(client)
    feeds = client.simulate_post(imports(account), json=FEEDS, headers=ADMIN).json
    report = client.simulate_post(imports(account), json={**FEEDS, "kind": "report"}, headers=ADMIN).json
    assert feeds["jobId"] != report["jobId"]
    assert not feeds["alreadyRunning"] and not report["alreadyRunning"]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"dateFrom": "2026-02-30"}, "dateFrom"),
        ({"dateFrom": "2026/10/01"}, "dateFrom"),
        ({"dateFrom": 20261001}, "dateFrom"),
        ({"dateTo": None}, "dateTo"),
        ({"dateFrom": "2026-11-01", "dateTo": "2026-10-31"}, "dateTo"),
        ({"kind": "orders"}, "kind"),
        ({"period": "month"}, "period"),
    ],
)
def test_bad_import_requests_are_422_naming_the_field(client, change, field):
    account = create_account(client)
    response = client.simulate_post(imports(account), json={**FEEDS, **change}, headers=ADMIN)
    assert_problem(response, 422, "VALIDATION_ERROR", field)


@pytest.mark.parametrize(
    ("kind", "job_type"), [("autobidder", "autobidder-sync-user"), ("inventory", "inventory-sync-user")]
)
def test_a_user_sync_accepts_an_empty_body_and_dedups(client, kind, job_type):
    account = create_account(client)
    url = f"/v1/accounts/{account}/{kind}/sync"
    first = client.simulate_post(url, headers=ADMIN)
    second = client.simulate_post(url, json={}, headers=ADMIN)
    assert first.status_code == 202 and first.json["alreadyRunning"] is False
    assert client.simulate_get(first.headers["location"], headers=ADMIN).json["type"] == job_type
    assert second.json == {"jobId": first.json["jobId"], "alreadyRunning": True}
    assert_problem(
        client.simulate_post(url, json={"force": True}, headers=ADMIN), 422, "VALIDATION_ERROR", "force"
    )


def test_import_is_accepted_while_redis_is_down(gh, settings):
    offline = bootstrap(settings.model_copy(update={"redis_url": f"redis://127.0.0.1:{free_port()}/0"}))
    client = testing.TestClient(create_app(offline))
    account = create_account(client)

    response = client.simulate_post(imports(account), json=FEEDS, headers=ADMIN)

    assert response.status_code == 202
    assert gh.jobs.get(uuid.UUID(response.json["jobId"])).state == "waiting"
    offline.close()


def assert_store_unavailable(response, store: str) -> None:
    body = assert_problem(response, 503, "STORE_UNAVAILABLE")
    assert body["store"] == store
    assert int(response.headers["retry-after"]) > 0


def test_redis_down_is_503_on_the_admin_views_that_need_it(gh, settings):
    offline = bootstrap(settings.model_copy(update={"redis_url": f"redis://127.0.0.1:{free_port()}/0"}))
    client = testing.TestClient(create_app(offline))
    account = create_account(client)

    assert_store_unavailable(client.simulate_get("/v1/admin/schedules", headers=ADMIN), "redis")
    assert_store_unavailable(client.simulate_post("/v1/admin/schedules/rnp-ads/run", headers=ADMIN), "redis")
    assert_store_unavailable(
        client.simulate_get(f"/v1/admin/accounts/{account}/gate", headers=ADMIN), "redis"
    )
    offline.close()


def test_postgresql_down_is_503(gh, settings):
    closed = f"postgresql://postgres@127.0.0.1:{free_port()}/postgres"
    offline = bootstrap(settings.model_copy(update={"database_url": closed}))
    client = testing.TestClient(create_app(offline))

    response = client.simulate_post("/v1/accounts", json={"name": "x", "wbToken": "t"}, headers=ADMIN)
    assert_store_unavailable(response, "postgresql")
    assert_store_unavailable(client.simulate_get(f"/v1/accounts/{uuid.uuid4()}", headers=ADMIN), "postgresql")
    offline.close()


# -- reading jobs ----------------------------------------------------------------------


def test_job_status_has_the_documented_fields(client):
    account = create_account(client)
    job_id = client.simulate_post(imports(account), json=FEEDS, headers=ADMIN).json["jobId"]

    response = client.simulate_get(f"/v1/jobs/{job_id}", headers=ADMIN)

    assert response.status_code == 200
    assert set(response.json) == {
        "jobId", "type", "accountId", "tier", "state", "progress", "result", "error",
        "createdAt", "startedAt", "finishedAt", "cancelRequestedAt",
    }  # fmt: skip
    assert response.json["state"] == "waiting" and response.json["progress"] is None


def test_an_account_key_cannot_see_another_accounts_job(client):
    mine, other = create_account(client, "mine"), create_account(client, "other")
    theirs = client.simulate_post(imports(other), json=FEEDS, headers=ADMIN).json["jobId"]
    ours = client.simulate_post(imports(mine), json=FEEDS, headers=ADMIN).json["jobId"]
    key = key_for(client, mine)

    assert client.simulate_get(f"/v1/jobs/{ours}", headers=key).status_code == 200
    assert_problem(client.simulate_get(f"/v1/jobs/{theirs}", headers=key), 404, "NOT_FOUND")
    assert_problem(client.simulate_get(f"/v1/jobs/{uuid.uuid4()}", headers=key), 404, "NOT_FOUND")


def test_list_jobs_pages_newest_first_and_filters(client, gh, sql):
    account = create_account(client)
    forget_account_checks(gh)
    ids = [
        client.simulate_post(imports(account), json={**FEEDS, "kind": k}, headers=ADMIN).json["jobId"]
        for k in ("feeds", "report")
    ]
    ids.append(client.simulate_post(f"/v1/accounts/{account}/autobidder/sync", headers=ADMIN).json["jobId"])
    sql("UPDATE jobs SET state = 'completed' WHERE id = :id", id=uuid.UUID(ids[0]))
    url = f"/v1/accounts/{account}/jobs"

    page1 = client.simulate_get(url, params={"limit": 2}, headers=ADMIN).json
    page2 = client.simulate_get(url, params={"limit": 2, "cursor": page1["nextCursor"]}, headers=ADMIN).json

    assert [j["jobId"] for j in page1["items"] + page2["items"]] == ids[::-1]
    assert page2["nextCursor"] is None
    completed = client.simulate_get(url, params={"state": "completed"}, headers=ADMIN).json["items"]
    assert [j["jobId"] for j in completed] == [ids[0]]
    report = client.simulate_get(url, params={"type": "import-user-report"}, headers=ADMIN).json["items"]
    assert [j["jobId"] for j in report] == [ids[1]]


@pytest.mark.parametrize(
    ("params", "field"),
    [({"limit": "0"}, "limit"), ({"limit": "abc"}, "limit"), ({"limit": "201"}, "limit"),
     ({"limit": "\u00b2"}, "limit"), ({"limit": "\u0663"}, "limit"), ({"limit": "1" * 5000}, "limit"),
     ({"state": "pending"}, "state"), ({"type": "nope"}, "type"), ({"cursor": "???"}, "cursor")],
)  # fmt: skip
def test_bad_list_parameters_are_422(client, params, field):
    account = create_account(client)
    response = client.simulate_get(f"/v1/accounts/{account}/jobs", params=params, headers=ADMIN)
    assert_problem(response, 422, "VALIDATION_ERROR", field)


def test_openapi_document_describes_every_route_and_nothing_else(gh):
    """Falcon's own listing of the routes against the public document, both ways.

    Left out by rule: Falcon's default responders (OPTIONS, 405), HEAD where it is
    GET's responder (``with_head``: HEAD answers wherever GET does) and resources
    that declare ``outside_contract`` (the console's pages, /metrics, /openapi.json).
    """
    app = create_app(gh)
    response = testing.TestClient(app).simulate_get("/openapi.json")  # no token
    assert response.status_code == 200
    document = response.json
    assert document["openapi"].startswith("3.1")
    outside = {template for template, r in openapi.routes(app) if getattr(r, "outside_contract", None)}
    served = {
        (openapi.path_of(route.path), method.method.lower())
        for route in inspect_routes(app)
        if route.path not in outside
        for method in route.methods
        if not method.internal and not (method.method == "HEAD" and method.function_name == "on_get")
    }
    assert {"/console", "/metrics", "/openapi.json"} <= outside and ("/v1/jobs/{jobId}", "get") in served
    documented = {(path, method) for path, operations in document["paths"].items() for method in operations}
    assert sorted(served - documented) == [], "routes whose responder has no @contract"
    assert sorted(documented - served) == [], "operations in the document that no route serves"
    reached = {getattr(responder, "__func__", responder) for *_, responder in openapi.operations(app)}
    unrouted = [f"{f.__module__}.{f.__qualname__}" for f in openapi.DECLARED if f not in reached]
    assert unrouted == [], "contracts on responders that no route of the JSON API serves"
    for path in (p for p in document["paths"] if p.startswith("/v1/")):
        for operation in document["paths"][path].values():
            assert "503" in operation["responses"], path
