"""The webhooks admin API under real gunicorn, against real PostgreSQL and Redis, with no worker.

Nothing is ever delivered: no worker runs. The endpoints point at loopback, which
the API allowlists (WEBHOOK_ALLOWED_HOSTS), or, for the API without the allowlist,
at a literal public IP that creation only parses (it resolves nothing, sends nothing).
"""

from __future__ import annotations

import uuid
from datetime import datetime

import httpx
import pytest

from tests.conftest import ADMIN_TOKEN, shared_api

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
PROBLEM = "application/problem+json"
WEBHOOKS = "/v1/admin/webhooks"
ENDPOINTS = f"{WEBHOOKS}/endpoints"
DELIVERIES = f"{WEBHOOKS}/deliveries"
LOOPBACK = "http://127.0.0.1:9/hook"  # allowlisted on the API below; never contacted
PUBLIC = "https://93.184.216.34/hook"  # a literal public IP: parsed, never resolved or contacted
ENDPOINT_FIELDS = {
    "endpointId", "accountId", "url", "description", "eventTypes", "enabled", "disabledReason", "disabledAt",
    "rateLimitPerSecond", "failingSince", "createdAt", "updatedAt",
}  # fmt: skip
DELIVERY_FIELDS = {
    "deliveryId", "webhookId", "endpointId", "eventType", "status", "attemptCount", "nextAttemptAt",
    "createdAt", "deliveredAt", "jobId", "deadReason",
}  # fmt: skip


def assert_problem(response: httpx.Response, status: int, code: str, field: str | None = None) -> dict:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == PROBLEM
    body = response.json()
    assert body["status"] == status and body["code"] == code, body
    if field is not None:
        assert body.get("field") == field, body
    return body


@pytest.fixture(scope="module")
def api_url(database_url, redis_url, tmp_path_factory):
    with shared_api(
        database_url, redis_url, tmp_path_factory.mktemp("api"), WEBHOOK_ALLOWED_HOSTS="127.0.0.0/8,::1"
    ) as url:
        yield url


@pytest.fixture
def api(api_url: str, clean: None) -> httpx.Client:
    with httpx.Client(base_url=api_url, timeout=30, headers=ADMIN) as client:
        yield client


def create(api: httpx.Client, **body) -> dict:
    response = api.post(ENDPOINTS, json={"url": LOOPBACK, **body})
    assert response.status_code == 201, response.text
    return response.json()


def send_test(api: httpx.Client, endpoint_id: str) -> str:
    response = api.post(f"{ENDPOINTS}/{endpoint_id}/test")
    assert response.status_code == 202, response.text
    assert set(response.json()) == {"deliveryId"}
    return response.json()["deliveryId"]


def test_endpoints_create_read_edit_and_delete(api):
    # When an endpoint is created
    response = api.post(
        ENDPOINTS,
        json={"url": LOOPBACK, "eventTypes": ["catalog.product.updated"], "description": "ERP"},
    )

    # Then it answers 201 with the endpoint and its secret, shown only here
    assert response.status_code == 201, response.text
    created = response.json()
    assert set(created) == ENDPOINT_FIELDS | {"secret"}
    assert created["secret"].startswith("whsec_") and len(created["secret"]) > 30
    assert (created["url"], created["eventTypes"], created["enabled"], created["description"]) == (
        LOOPBACK, ["catalog.product.updated"], True, "ERP",
    )  # fmt: skip
    ep = created["endpointId"]
    assert response.headers["location"] == f"{ENDPOINTS}/{ep}"
    # … absent eventTypes (or null) is every type
    every = create(api)
    assert every["eventTypes"] is None and create(api, eventTypes=None)["eventTypes"] is None

    # … reading it back never shows the secret
    one = api.get(f"{ENDPOINTS}/{ep}")
    assert one.status_code == 200 and set(one.json()) == ENDPOINT_FIELDS
    assert one.json() == {k: v for k, v in created.items() if k != "secret"}
    listed = api.get(ENDPOINTS)
    assert listed.status_code == 200 and set(listed.json()) == {"items"}
    assert len(listed.json()["items"]) == 3 and ep in {e["endpointId"] for e in listed.json()["items"]}
    assert all(set(e) == ENDPOINT_FIELDS for e in listed.json()["items"])
    assert created["secret"] not in listed.text + one.text

    # When it is edited: its types, its state, its URL
    patched = api.patch(f"{ENDPOINTS}/{ep}", json={"eventTypes": ["wb.job.failed", "wb.job.completed"]})
    assert patched.status_code == 200, patched.text
    assert patched.json()["eventTypes"] == ["wb.job.completed", "wb.job.failed"]
    off = api.patch(f"{ENDPOINTS}/{ep}", json={"enabled": False}).json()
    assert (off["enabled"], off["disabledReason"]) == (False, "disabled by an admin")
    assert_problem(api.post(f"{ENDPOINTS}/{ep}/test"), 409, "ENDPOINT_DISABLED")
    on = api.patch(f"{ENDPOINTS}/{ep}", json={"enabled": True, "url": "http://[::1]:9/other"}).json()
    assert (on["enabled"], on["disabledReason"], on["url"]) == (True, None, "http://[::1]:9/other")
    assert on["eventTypes"] == ["wb.job.completed", "wb.job.failed"]  # untouched by that edit
    # … null eventTypes is every type again
    assert api.patch(f"{ENDPOINTS}/{ep}", json={"eventTypes": None}).json()["eventTypes"] is None
    assert api.get(f"{ENDPOINTS}/{ep}").json()["url"] == "http://[::1]:9/other"

    # When it is deleted: 204, then it is not found anywhere
    deleted = api.delete(f"{ENDPOINTS}/{ep}")
    assert deleted.status_code == 204 and deleted.content == b""
    assert_problem(api.get(f"{ENDPOINTS}/{ep}"), 404, "NOT_FOUND")
    assert_problem(api.delete(f"{ENDPOINTS}/{ep}"), 404, "NOT_FOUND")
    assert_problem(api.patch(f"{ENDPOINTS}/{ep}", json={"enabled": True}), 404, "NOT_FOUND")
    assert_problem(api.post(f"{ENDPOINTS}/{ep}/rotate-secret"), 404, "NOT_FOUND")
    assert_problem(api.post(f"{ENDPOINTS}/{ep}/test"), 404, "NOT_FOUND")
    assert_problem(api.post(f"{ENDPOINTS}/{ep}/replay"), 404, "NOT_FOUND")
    assert ep not in {e["endpointId"] for e in api.get(ENDPOINTS).json()["items"]}


def test_rotate_secret_returns_a_new_secret_and_the_old_ones_end(api):
    created = create(api)

    rotated = api.post(f"{ENDPOINTS}/{created['endpointId']}/rotate-secret")

    assert rotated.status_code == 200, rotated.text
    body = rotated.json()
    assert set(body) == {"secret", "previousSecretValidUntil"}
    assert body["secret"].startswith("whsec_") and body["secret"] != created["secret"]
    until = datetime.fromisoformat(body["previousSecretValidUntil"])
    updated = datetime.fromisoformat(api.get(f"{ENDPOINTS}/{created['endpointId']}").json()["updatedAt"])
    assert (until - updated).total_seconds() == pytest.approx(86_400)  # the default grace: one day
    again = api.post(f"{ENDPOINTS}/{created['endpointId']}/rotate-secret").json()["secret"]
    assert again not in (created["secret"], body["secret"])


def test_a_test_event_is_a_pending_delivery_with_its_message_id(api):
    ep = create(api, eventTypes=["wb.job.failed"])["endpointId"]  # a test goes whatever it subscribes to

    delivery_id = send_test(api, ep)

    one = api.get(f"{DELIVERIES}/{delivery_id}")
    assert one.status_code == 200, one.text
    d = one.json()
    assert set(d) == DELIVERY_FIELDS | {"payload", "attempts"}
    assert (d["deliveryId"], d["endpointId"], d["eventType"], d["status"]) == (
        delivery_id, ep, "webhook.test", "pending",
    )  # fmt: skip
    assert d["webhookId"].startswith("msg_") and len(d["webhookId"]) == 30
    assert (d["attempts"], d["attemptCount"], d["deliveredAt"]) == ([], 0, None)
    assert d["nextAttemptAt"] is not None  # its job waits: due at once
    assert set(d["payload"]) == {"type", "timestamp", "data"} and d["payload"]["type"] == "webhook.test"
    assert d["payload"]["data"]["endpointId"] == ep
    [listed] = api.get(DELIVERIES).json()["items"]
    assert listed == {k: v for k, v in d.items() if k in DELIVERY_FIELDS}
    assert_problem(api.get(f"{DELIVERIES}/{uuid.uuid4()}"), 404, "NOT_FOUND")
    assert_problem(api.post(f"{ENDPOINTS}/{uuid.uuid4()}/test"), 404, "NOT_FOUND")


def test_deliveries_filter_and_page_newest_first(api, sql):
    a = create(api)["endpointId"]
    b = create(api, eventTypes=["catalog.product.updated"])["endpointId"]
    create(api, eventTypes=["wb.job.failed"])  # gets none of these
    product = api.post(
        "/v1/admin/catalog/products",
        json={"sku": "WH-1", "name": "Stół", "price": {"amount": 100, "currency": "PLN"}},
    )
    assert product.status_code == 201, product.text
    patched = api.patch(
        f"/v1/admin/catalog/products/{product.json()['productId']}", json={"name": "Stół dębowy"}
    )
    assert patched.status_code == 200, patched.text
    tests = [send_test(api, a) for _ in range(4)]

    everything = api.get(DELIVERIES, params={"limit": 200}).json()
    assert everything["nextCursor"] is None and len(everything["items"]) == 6
    items = everything["items"]
    assert [i["createdAt"] for i in items] == sorted((i["createdAt"] for i in items), reverse=True)
    assert [i["deliveryId"] for i in items[:4]] == tests[::-1]  # newest first
    updated = [i for i in items if i["eventType"] == "catalog.product.updated"]
    assert {i["endpointId"] for i in updated} == {a, b}
    assert len({i["webhookId"] for i in updated}) == 1  # one event: one message id for both endpoints
    assert len({i["webhookId"] for i in items}) == 5

    def ids(**params) -> list[str]:
        response = api.get(DELIVERIES, params=params)
        assert response.status_code == 200, response.text
        return [i["deliveryId"] for i in response.json()["items"]]

    assert ids(endpointId=b) == [i["deliveryId"] for i in updated if i["endpointId"] == b]
    assert ids(eventType="webhook.test") == tests[::-1]
    assert ids(eventType="catalog.product.updated", endpointId=a) == [
        i["deliveryId"] for i in updated if i["endpointId"] == a
    ]
    assert ids(status="pending") == [i["deliveryId"] for i in items]
    assert ids(status="dead") == [] and ids(endpointId=str(uuid.uuid4())) == []
    sql("UPDATE webhook_deliveries SET status = 'dead' WHERE id = :id", id=uuid.UUID(tests[0]))
    assert ids(status="dead") == [tests[0]]
    assert ids(since="2000-01-01T00:00:00Z", limit=200) == [i["deliveryId"] for i in items]
    assert ids(since="2999-01-01T00:00:00Z") == []

    # pages of 4: no duplicates, nothing missed, the same order
    pages, cursor = [], None
    while True:
        response = api.get(DELIVERIES, params={"limit": 4, **({"cursor": cursor} if cursor else {})})
        assert response.status_code == 200, response.text
        pages.append([i["deliveryId"] for i in response.json()["items"]])
        cursor = response.json()["nextCursor"]
        if cursor is None:
            break
    assert [len(p) for p in pages] == [4, 2]
    assert [i for p in pages for i in p] == [i["deliveryId"] for i in items]
    # … a filter pages too
    first = api.get(DELIVERIES, params={"eventType": "webhook.test", "limit": 3}).json()
    rest = api.get(
        DELIVERIES, params={"eventType": "webhook.test", "limit": 3, "cursor": first["nextCursor"]}
    ).json()
    assert [i["deliveryId"] for i in first["items"] + rest["items"]] == tests[::-1]
    assert rest["nextCursor"] is None

    # bad query parameters are 422 naming the parameter
    for params, field in [
        ({"endpointId": "nope"}, "endpointId"),
        ({"status": "lost"}, "status"),
        ({"eventType": "catalog.product.deleted"}, "eventType"),
        ({"limit": "0"}, "limit"),
        ({"limit": "201"}, "limit"),
        ({"cursor": "not-a-cursor"}, "cursor"),
        ({"since": "yesterday"}, "since"),
    ]:
        assert_problem(api.get(DELIVERIES, params=params), 422, "VALIDATION_ERROR", field)


def test_replays(api, sql):
    ep = create(api)["endpointId"]
    delivery_id = send_test(api, ep)

    # A pending delivery is not replayed
    assert_problem(api.post(f"{DELIVERIES}/{delivery_id}/replay"), 409, "NOT_REPLAYABLE", "status")
    assert_problem(api.post(f"{DELIVERIES}/{uuid.uuid4()}/replay"), 404, "NOT_FOUND")

    # A dead one is: a new series, the same webhook id
    before = api.get(f"{DELIVERIES}/{delivery_id}").json()
    [(old_job,)] = sql("SELECT job_id FROM webhook_deliveries WHERE id = :id", id=uuid.UUID(delivery_id))
    sql("UPDATE webhook_deliveries SET status = 'dead' WHERE id = :id", id=uuid.UUID(delivery_id))
    replayed = api.post(f"{DELIVERIES}/{delivery_id}/replay")
    assert replayed.status_code == 202, replayed.text
    body = replayed.json()
    assert set(body) == DELIVERY_FIELDS
    assert (body["deliveryId"], body["status"], body["webhookId"]) == (
        delivery_id,
        "pending",
        before["webhookId"],
    )
    assert replayed.headers["location"] == f"{DELIVERIES}/{delivery_id}"
    [(new_job,)] = sql("SELECT job_id FROM webhook_deliveries WHERE id = :id", id=uuid.UUID(delivery_id))
    assert new_job != old_job
    [(state, payload)] = sql("SELECT state, payload FROM jobs WHERE id = :id", id=new_job)
    assert (state, payload["deliveries"]) == ("waiting", 1)  # a new series: a job of its own
    assert_problem(api.post(f"{DELIVERIES}/{delivery_id}/replay"), 409, "NOT_REPLAYABLE")  # pending again

    # Replaying an endpoint's dead deliveries since a time queues one job
    since = "2026-01-01T00:00:00+00:00"
    queued = api.post(f"{ENDPOINTS}/{ep}/replay", params={"since": since})
    assert queued.status_code == 202, queued.text
    job = queued.json()
    assert set(job) == {"jobId", "endpointId", "since"} and job["endpointId"] == ep
    assert datetime.fromisoformat(job["since"]) == datetime.fromisoformat(since)
    assert queued.headers["location"] == f"/v1/jobs/{job['jobId']}"
    [(type_, state, payload)] = sql(
        "SELECT type, state, payload FROM jobs WHERE id = :id", id=uuid.UUID(job["jobId"])
    )
    assert (type_, state) == ("webhook.replay", "waiting")
    assert payload["endpointId"] == ep and datetime.fromisoformat(payload["since"]) == datetime.fromisoformat(
        since
    )
    # … without since: all of them
    everything = api.post(f"{ENDPOINTS}/{ep}/replay")
    assert everything.status_code == 202 and everything.json()["since"] is None
    assert_problem(
        api.post(f"{ENDPOINTS}/{ep}/replay", params={"since": "last week"}), 422, "VALIDATION_ERROR", "since"
    )
    assert sql("SELECT count(*) FROM jobs WHERE type = 'webhook.replay'")[0][0] == 2


@pytest.mark.parametrize(
    ("body", "code", "field"),
    [
        ({"url": LOOPBACK, "eventTypes": ["catalog.product.deleted"]}, "VALIDATION_ERROR", "eventTypes.0"),
        ({"url": LOOPBACK, "eventTypes": []}, "VALIDATION_ERROR", "eventTypes"),
        ({"url": "ftp://127.0.0.1/hook"}, "WEBHOOK_URL_INVALID", "url"),
        ({"url": "https://user:pw@93.184.216.34/hook"}, "WEBHOOK_URL_INVALID", "url"),
        ({"url": "https://169.254.169.254/latest/meta-data/"}, "WEBHOOK_URL_FORBIDDEN", "url"),
        ({"url": "http://93.184.216.34/hook"}, "WEBHOOK_URL_INSECURE", "url"),
        ({"url": LOOPBACK, "secret": "whsec_mine"}, "VALIDATION_ERROR", "secret"),
        ({"eventTypes": ["webhook.test"]}, "VALIDATION_ERROR", "url"),
        ({"url": LOOPBACK, "description": "x" * 501}, "VALIDATION_ERROR", "description"),
    ],
)
def test_bad_endpoints_are_422_naming_the_field(api, body, code, field):
    assert_problem(api.post(ENDPOINTS, json=body), 422, code, field)


def test_bad_edits_are_422_and_leave_the_endpoint_as_it_was(api):
    created = create(api, eventTypes=["wb.job.failed"])
    ep = created["endpointId"]
    for body, code, field in [
        ({"eventTypes": ["nope"]}, "VALIDATION_ERROR", "eventTypes.0"),
        ({"url": "ftp://127.0.0.1/x"}, "WEBHOOK_URL_INVALID", "url"),
        ({"url": None}, "VALIDATION_ERROR", "url"),
        ({"enabled": None}, "VALIDATION_ERROR", "enabled"),
        ({"enabled": "false"}, "VALIDATION_ERROR", "enabled"),
        ({"secret": "whsec_x"}, "VALIDATION_ERROR", "secret"),
    ]:
        assert_problem(api.patch(f"{ENDPOINTS}/{ep}", json=body), 422, code, field)
    assert api.get(f"{ENDPOINTS}/{ep}").json() == {k: v for k, v in created.items() if k != "secret"}


def test_without_the_admin_token_every_webhooks_route_is_refused(api):
    ep = create(api)["endpointId"]
    delivery_id = send_test(api, ep)
    account = api.post("/v1/accounts", json={"name": "Shop", "wbToken": "t"}).json()
    seller = {
        "Authorization": "Bearer " + api.post(f"/v1/accounts/{account['accountId']}/keys").json()["key"]
    }
    routes = [
        ("POST", ENDPOINTS, {"url": LOOPBACK}),
        ("GET", ENDPOINTS, None),
        ("GET", f"{ENDPOINTS}/{ep}", None),
        ("PATCH", f"{ENDPOINTS}/{ep}", {"enabled": False}),
        ("DELETE", f"{ENDPOINTS}/{ep}", None),
        ("POST", f"{ENDPOINTS}/{ep}/rotate-secret", None),
        ("POST", f"{ENDPOINTS}/{ep}/test", None),
        ("POST", f"{ENDPOINTS}/{ep}/replay", None),
        ("GET", DELIVERIES, None),
        ("GET", f"{DELIVERIES}/{delivery_id}", None),
        ("POST", f"{DELIVERIES}/{delivery_id}/replay", None),
    ]
    for method, path, body in routes:
        bare = httpx.request(method, f"{api.base_url}{path}", json=body, timeout=30)
        assert_problem(bare, 401, "UNAUTHORIZED")
        assert bare.headers["www-authenticate"] == "Bearer"
        wrong = httpx.request(
            method, f"{api.base_url}{path}", json=body, headers={"Authorization": "Bearer nope"}, timeout=30
        )
        assert_problem(wrong, 401, "UNAUTHORIZED")
        assert_problem(
            httpx.request(method, f"{api.base_url}{path}", json=body, headers=seller, timeout=30),
            403,
            "FORBIDDEN",
        )
    # … and nothing changed
    assert api.get(f"{ENDPOINTS}/{ep}").json()["enabled"] is True
    assert len(api.get(ENDPOINTS).json()["items"]) == 1
    assert len(api.get(DELIVERIES).json()["items"]) == 1


def test_without_the_allowlist_loopback_and_private_targets_are_forbidden(processes):
    _, url = processes.api(env={"BACKEND_ROLE": "api"})
    with httpx.Client(base_url=url, timeout=30, headers=ADMIN) as api:
        for target in (LOOPBACK, "https://127.0.0.1/hook", "https://[::1]/hook", "https://10.0.0.5/hook"):
            assert_problem(api.post(ENDPOINTS, json={"url": target}), 422, "WEBHOOK_URL_FORBIDDEN", "url")
        # a public literal IP passes (parsed only: nothing resolves it, nothing connects to it)
        created = api.post(ENDPOINTS, json={"url": PUBLIC})
        assert created.status_code == 201, created.text
        ep = created.json()["endpointId"]
        assert_problem(
            api.patch(f"{ENDPOINTS}/{ep}", json={"url": LOOPBACK}), 422, "WEBHOOK_URL_FORBIDDEN", "url"
        )
        assert api.get(f"{ENDPOINTS}/{ep}").json()["url"] == PUBLIC
