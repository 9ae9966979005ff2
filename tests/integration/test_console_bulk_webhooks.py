"""Console pages Bulk actions and Webhooks in process (Falcon TestClient): what they show, what their forms do.

Each page renders the JSON API's views; each action is its JSON twin's domain
call behind the console's CSRF check. The JSON additions the pages needed
(a bulk operation's failures, deliveries counted by endpoint) are checked
here too.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator

import pytest
from falcon import testing
from sqlalchemy import text

from gatehouse.catalog import NewProduct, Price, ProductPatch
from gatehouse.catalog.bulk import Selection
from gatehouse.catalog.handlers import CatalogHandlers
from gatehouse.catalog.rules import ATTRIBUTES_MAX
from gatehouse.composition import Components, bootstrap
from gatehouse.events import Event
from gatehouse.webhooks.store import Answer, Created
from gatehouse_api.app import create_app
from tests.conftest import ADMIN_TOKEN

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
FORM = {"Content-Type": "application/x-www-form-urlencoded"}
XSS = "<script>alert(1)</script>"
HOOK = "http://127.0.0.1:9/hook"  # allowlisted below; never contacted (no worker runs here)


@pytest.fixture
def wh(settings, clean) -> Iterator[Components]:
    gatehouse = bootstrap(settings.model_copy(update={"webhook_allowed_hosts": ["127.0.0.0/8"]}))
    yield gatehouse
    gatehouse.close()


@pytest.fixture
def client(wh) -> testing.TestClient:
    return testing.TestClient(create_app(wh))


def page(client, cookie: dict, path: str, status: int = 200) -> str:
    response = client.simulate_get(path, headers=cookie)
    assert response.status_code == status, response.text
    return response.text


def csrf(client, cookie: dict, path: str = "/console/webhooks/endpoints") -> str:
    return re.search(r'name="csrf" value="([0-9a-f]+)"', page(client, cookie, path)).group(1)


def post(client, cookie: dict, path: str, body: str = "", token: str | None = "") -> testing.Result:
    if token == "":
        token = csrf(client, cookie)
    fields = "&".join(f for f in (body, f"csrf={token}" if token else "") if f)
    return client.simulate_post(path, body=fields, headers={**cookie, **FORM})


def products(gh: Components, n: int, name: str = "p{i}") -> list[uuid.UUID]:
    gh.catalog_handlers.create_products(
        [NewProduct(sku=f"B-{i:04d}", name=name.format(i=i), price=Price(100, "PLN")) for i in range(n)]
    )
    return [p.id for p in gh.catalog.list_products(limit=200)]


def operation(gh: Components, ids, patch: ProductPatch, request: dict, threshold: int = 50, requester=None):
    """A bulk operation run at once up to ``threshold`` products (BULK_SYNC_THRESHOLD), else queued."""
    handlers = CatalogHandlers(
        gh.uow, gh.catalog, gh.bulk, sync_threshold=threshold, batch_size=gh.settings.bulk_batch_size
    )
    return handlers.create_bulk_operation(
        Selection(product_ids=tuple(ids)),
        patch,
        request,
        requester=requester,
        actor="admin",
    )


def full_product_operation(gh: Components, name: str) -> tuple[uuid.UUID, uuid.UUID]:
    """A product the patch would take past the attribute limit (a failed item), and one it patches."""
    codes = [f"a{i}" for i in range(ATTRIBUTES_MAX + 1)]
    for code in codes:
        gh.catalog_handlers.create_attribute(code, code, False)
    gh.catalog_handlers.create_products(
        [
            NewProduct(
                sku="FULL-1", name=name, price=Price(1, "PLN"), attributes=dict.fromkeys(codes[:-1], 1)
            ),
            NewProduct(sku="ROOM-1", name="Стол", price=Price(1, "PLN")),
        ]
    )
    by_sku = {p.sku: p.id for p in gh.catalog.list_products(limit=10)}
    patch = {"attributes": {codes[-1]: 2}}
    op = operation(gh, by_sku.values(), ProductPatch(attributes={codes[-1]: 2}), {"patch": patch})
    return op.id, by_sku["FULL-1"]


def row_of(html: str, operation_id) -> str:
    found = re.search(rf'<tr data-operation="{operation_id}">(.*?)</tr>', html, re.S)
    assert found, f"no row of operation {operation_id}"
    return found.group(1)


def bar(html: str) -> dict[str, int]:
    """The counters the (first) bar of ``html`` draws."""
    svg = re.search(r'<svg class="bar[^"]*"[^>]*>', html, re.S).group(0)
    return {k: int(v) for k, v in re.findall(r'data-(total|processed|succeeded|failed)="(\d+)"', svg)}


# -- Bulk actions ------------------------------------------------------------------


def test_bulk_operations_by_status_with_their_counters_and_bars(client, cookie, wh):
    ids = products(wh, 60)
    done = operation(wh, ids[:10], ProductPatch(name="X"), {"patch": {"name": "X"}})
    queued = operation(wh, ids, ProductPatch(name="Y"), {"patch": {"name": "Y"}}, threshold=5)
    assert (done.status, queued.status) == ("completed", "pending")

    html = page(client, cookie, "/console/bulk-operations")
    assert html.index(str(queued.id)) < html.index(str(done.id))  # newest first
    assert "10 / 10" in html and "0 / 60" in html
    assert bar(row_of(html, queued.id)) == {"total": 60, "processed": 0, "succeeded": 0, "failed": 0}
    assert bar(row_of(html, done.id)) == {"total": 10, "processed": 10, "succeeded": 10, "failed": 0}
    assert 'id="operations" data-live' in html and "admin token" in html

    pending = page(client, cookie, "/console/bulk-operations?status=pending")
    assert str(queued.id) in pending and str(done.id) not in pending
    assert 'href="/console/bulk-operations?status=pending" aria-current="page"' in pending
    # the empty "any" of a link or form is no filter; a status that is not one is refused
    assert str(done.id) in page(client, cookie, "/console/bulk-operations?status=")
    assert "status must be one of" in page(client, cookie, "/console/bulk-operations?status=nope", 422)


def test_a_bulk_operation_page_shows_what_it_applies_and_its_failed_items_as_text(client, cookie, wh):
    op_id, full_id = full_product_operation(wh, XSS)

    html = page(client, cookie, f"/console/bulk-operations/{op_id}")

    assert "2 / 2" in html and bar(html) == {"total": 2, "processed": 2, "succeeded": 1, "failed": 1}
    assert 'id="operation" data-live' in html and 'id="failures" data-live' in html
    assert "Set attributes" in html and "a100" in html  # the patch as sent
    assert str(full_id) in html and "FULL-1" in html
    assert f"more than {ATTRIBUTES_MAX} attributes" in html
    assert XSS not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert page(client, cookie, f"/console/bulk-operations/{uuid.uuid4()}", 404)


def test_an_operation_with_failed_items_shows_them_as_failures_not_as_a_plain_success(client, cookie, wh):
    with_failure, _ = full_product_operation(wh, "Стул")  # 1 patched, 1 failed
    products(wh, 3)
    fresh = [p.id for p in wh.catalog.list_products(limit=10) if p.sku.startswith("B-")]
    clean = operation(wh, fresh, ProductPatch(name="Z"), {"patch": {"name": "Z"}})
    assert (wh.bulk.get(with_failure).status, clean.status) == ("completed", "completed")

    listed = page(client, cookie, "/console/bulk-operations")
    detail = page(client, cookie, f"/console/bulk-operations/{with_failure}")

    for html in (row_of(listed, with_failure), detail):
        # a warning badge, not the green one; the failed part of the bar in its own colour
        assert (
            '<span class="badge warn" data-status="completed" data-failed="1">completed with 1 failed</span>'
            in html
        )
        assert 'class="badge ok"' not in html
        assert '<svg class="bar with-failures"' in html
        assert '<rect class="bar-succeeded" x="0" y="0" width="1"' in html
        assert '<rect class="bar-failed" x="1" y="0" width="1"' in html
        assert "1 succeeded, 1 failed" in html and '<strong class="failed-count">failed 1</strong>' in html
    assert '<div class="card failed">Failed<b data-failed-count>1</b>' in detail
    ok = row_of(listed, clean.id)
    assert '<span class="badge ok" data-status="completed">completed</span>' in ok
    assert "with-failures" not in ok and '<rect class="bar-failed" x="3" y="0" width="0"' in ok
    # the stylesheet gives the two parts different colours
    css = client.simulate_get("/console/static/console.css").text
    assert "svg.bar .bar-succeeded { fill: var(--accent); }" in css
    assert "svg.bar .bar-failed { fill: var(--bad); }" in css


def test_failed_items_page_fifty_at_a_time_in_the_console_and_the_json_api(client, cookie, wh):
    ghosts = sorted(uuid.uuid4() for _ in range(120))
    op = operation(wh, ghosts, ProductPatch(name="X"), {"patch": {"name": "X"}}, threshold=200)
    assert op.failed == 120

    first = client.simulate_get(f"/v1/admin/catalog/bulk-operations/{op.id}/failures", headers=ADMIN).json
    assert [f["position"] for f in first["items"]] == list(range(1, 51))
    assert first["items"][0] == {
        "position": 1,
        "productId": str(ghosts[0]),
        "sku": None,
        "name": None,
        "reason": "product not found",
    }
    rest = client.simulate_get(
        f"/v1/admin/catalog/bulk-operations/{op.id}/failures",
        params={"cursor": first["nextCursor"], "limit": "100"},
        headers=ADMIN,
    ).json
    assert [f["productId"] for f in rest["items"]] == [str(g) for g in ghosts[50:]]
    assert rest["nextCursor"] is None

    html = page(client, cookie, f"/console/bulk-operations/{op.id}")
    assert str(ghosts[49]) in html and str(ghosts[50]) not in html
    assert f"/console/bulk-operations/{op.id}?cursor=50" in html
    later = page(client, cookie, f"/console/bulk-operations/{op.id}?cursor=50")
    assert str(ghosts[50]) in later and str(ghosts[49]) not in later

    view = client.simulate_get(f"/v1/admin/catalog/bulk-operations/{op.id}", headers=ADMIN).json
    assert view["request"] == {"patch": {"name": "X"}}
    assert view["links"]["failures"] == f"/v1/admin/catalog/bulk-operations/{op.id}/failures"


def test_the_failures_json_answers_404_for_an_unknown_operation_and_422_for_a_foreign_cursor(client, wh):
    unknown = client.simulate_get(f"/v1/admin/catalog/bulk-operations/{uuid.uuid4()}/failures", headers=ADMIN)
    assert unknown.status_code == 404
    op = operation(wh, [uuid.uuid4()], ProductPatch(name="X"), {"patch": {"name": "X"}})
    for cursor in ("x", "-1", "9" * 12):
        bad = client.simulate_get(
            f"/v1/admin/catalog/bulk-operations/{op.id}/failures", params={"cursor": cursor}, headers=ADMIN
        )
        assert bad.status_code == 422 and bad.json["field"] == "cursor"
    empty = client.simulate_get(
        f"/v1/admin/catalog/bulk-operations/{op.id}/failures", params={"cursor": "1"}, headers=ADMIN
    )
    assert empty.status_code == 200 and empty.json == {"items": [], "nextCursor": None}


def test_with_the_catalog_module_off_the_json_refuses_and_the_pages_say_so(client, cookie, wh):
    ids = products(wh, 3)
    op = operation(wh, ids, ProductPatch(name="X"), {"patch": {"name": "X"}})
    wh.module_handlers.set_module("catalog", enabled=False, by="test")

    refused = client.simulate_get(f"/v1/admin/catalog/bulk-operations/{op.id}/failures", headers=ADMIN)
    assert refused.status_code == 409 and refused.json["code"] == "MODULE_DISABLED"
    for path in ("/console/bulk-operations", f"/console/bulk-operations/{op.id}"):
        html = page(client, cookie, path)
        assert "The catalog module is disabled" in html and "3 / 3" in html


# -- Webhooks ----------------------------------------------------------------------


def publish(gh: Components, event_type: str = "catalog.product.updated", **data: object) -> Event:
    event = Event(event_type, dict(data) or {"productId": str(uuid.uuid4())})
    with gh.uow.begin() as tx:
        tx.publish(event)  # its jobs' messages are sent after the commit; no worker takes them here
    return event


def delivery_of(gh: Components, event: Event):
    [d] = [d for d in gh.webhooks.list_deliveries(limit=200) if d.message_id == event.id]
    return d


def delivery_of_endpoint(gh: Components, event: Event, endpoint_id: uuid.UUID) -> uuid.UUID:
    [d] = [d for d in gh.webhooks.list_deliveries(endpoint_id=endpoint_id) if d.message_id == event.id]
    return d.id


def kill(gh: Components, delivery_id: uuid.UUID) -> None:
    with gh.engine.begin() as conn:
        conn.execute(
            text("UPDATE webhook_deliveries SET status = 'dead', attempts = 8 WHERE id = :id"),
            {"id": delivery_id},
        )


def endpoint(
    gh: Components, url: str, *, event_types: list[str] | None = None, description: str = ""
) -> Created:
    return gh.webhook_handlers.create_endpoint(url, event_types=event_types, description=description)


def test_endpoints_with_their_deliveries_counted_by_status(client, cookie, wh):
    erp = endpoint(wh, HOOK, description="ERP", event_types=["catalog.product.updated"])
    quiet = endpoint(wh, HOOK + "2", description="quiet")
    events = [publish(wh) for _ in range(3)]
    kill(wh, delivery_of_endpoint(wh, events[0], erp.endpoint.id))  # quiet takes every type: 3 pending

    counts = client.simulate_get("/v1/admin/webhooks/delivery-counts", headers=ADMIN).json["items"]
    by_endpoint = {c["endpointId"]: c for c in counts}
    assert by_endpoint[str(erp.endpoint.id)] == {
        "endpointId": str(erp.endpoint.id), "pending": 2, "delivering": 0, "failed": 0, "delivered": 0, "dead": 1,
    }  # fmt: skip
    assert by_endpoint[str(quiet.endpoint.id)]["pending"] == 3

    html = page(client, cookie, "/console/webhooks/endpoints")
    assert HOOK in html and "ERP" in html and "catalog.product.updated" in html and "every type" in html
    row = html[html.index(f'data-endpoint="{erp.endpoint.id}"') :]
    row = row[: row.index("</tr>")]
    assert "pending 2" in row and "dead 1" in row and "delivered 0" in row
    for label in ("Disable", "Rotate secret", "Send test", "Replay all dead"):
        assert label in row
    assert f'<label for="since-{erp.endpoint.id}">' in row and 'type="datetime-local"' in row


def test_disable_and_enable_an_endpoint_only_with_the_csrf_token(client, cookie, wh):
    e = endpoint(wh, HOOK).endpoint
    path = f"/console/webhooks/endpoints/{e.id}/enabled"
    assert post(client, cookie, path, "enabled=false", token=None).status_code == 403
    assert post(client, cookie, path, "enabled=false", token="00" * 16).status_code == 403
    assert wh.webhooks.get_endpoint(e.id).enabled

    response = post(client, cookie, path, "enabled=false")
    assert response.status_code == 303 and response.headers["location"] == "/console/webhooks/endpoints"
    assert not wh.webhooks.get_endpoint(e.id).enabled
    html = page(client, cookie, "/console/webhooks/endpoints")
    assert "disabled by an admin" in html and "Send test" not in html and "Enable" in html

    assert post(client, cookie, path, "enabled=true").status_code == 303
    assert wh.webhooks.get_endpoint(e.id).enabled
    assert post(client, cookie, path, "enabled=maybe").status_code == 400


def test_rotate_secret_shows_the_new_secret_once_on_the_answer_and_nowhere_else(client, cookie, wh):
    e = endpoint(wh, HOOK).endpoint
    before = wh.webhooks.get_endpoint(e.id).updated_at

    confirm = page(client, cookie, f"/console/webhooks/endpoints/{e.id}/rotate-secret")  # changes nothing
    assert "shown once, on the next page" in confirm and wh.webhooks.get_endpoint(e.id).updated_at == before
    response = post(client, cookie, f"/console/webhooks/endpoints/{e.id}/rotate-secret")

    assert response.status_code == 200 and "location" not in response.headers
    secret = re.search(r'<code id="secret">(whsec_[^<]+)</code>', response.text).group(1)
    assert "shown only on this page, once" in response.text
    assert response.headers["cache-control"] == "no-store"
    assert wh.webhooks.get_endpoint(e.id).updated_at > before
    assert secret not in page(client, cookie, "/console/webhooks/endpoints")
    event = publish(wh)
    delivery = delivery_of(wh, event)
    with wh.uow.begin() as tx:
        signing = wh.webhooks.begin_run(tx, delivery.job_id)  # what the next attempt signs with
    assert signing.secrets[0] == secret and len(signing.secrets) == 2  # the old one in its grace period


def test_send_test_goes_to_the_test_deliverys_page(client, cookie, wh):
    e = endpoint(wh, HOOK).endpoint
    response = post(client, cookie, f"/console/webhooks/endpoints/{e.id}/test")
    assert response.status_code == 303
    delivery_id = response.headers["location"].rsplit("/", 1)[1]
    delivery, _ = wh.webhooks.get_delivery(uuid.UUID(delivery_id))
    assert delivery.event_type == "webhook.test" and delivery.endpoint_id == e.id
    html = page(client, cookie, response.headers["location"])
    assert "webhook.test" in html and "Gatehouse test event" in html
    assert f'href="/console/jobs/{delivery.job_id}"' in html


def test_deliveries_filtered_newest_first_with_replay_only_on_dead_ones(client, cookie, wh):
    endpoint(wh, HOOK, description="A")
    b = endpoint(wh, HOOK + "b", event_types=["rfq.rfq.expired"]).endpoint
    first, _ = publish(wh), publish(wh)
    rfq = publish(wh, "rfq.rfq.expired", rfqId="r-1")
    dead = delivery_of(wh, first)
    kill(wh, dead.id)

    html = page(client, cookie, "/console/webhooks/deliveries")
    assert html.count("data-delivery=") == 4  # two events to A, the rfq one to A and to B
    ids = re.findall(r'data-delivery="([0-9a-f-]+)"', html)
    assert ids[-1] == str(dead.id)  # newest first
    assert html.count(">Replay</button>") == 1
    assert f'action="/console/webhooks/deliveries/{dead.id}/replay"' in html
    assert 'data-status="dead"' in html and 'id="deliveries" data-live' in html

    only_dead = page(client, cookie, "/console/webhooks/deliveries?status=dead&endpointId=&eventType=")
    assert re.findall(r'data-delivery="([0-9a-f-]+)"', only_dead) == [str(dead.id)]
    of_b = page(client, cookie, f"/console/webhooks/deliveries?endpointId={b.id}")
    assert re.findall(r'data-delivery="([0-9a-f-]+)"', of_b) == [str(delivery_of_endpoint(wh, rfq, b.id))]
    by_type = page(client, cookie, "/console/webhooks/deliveries?eventType=rfq.rfq.expired")
    assert by_type.count("data-delivery=") == 2
    assert "status must be one of" in page(client, cookie, "/console/webhooks/deliveries?status=x", 422)


def test_deliveries_page_fifty_at_a_time_on_the_json_lists_cursor(client, cookie, wh):
    endpoint(wh, HOOK)
    for _ in range(55):
        publish(wh)
    html = page(client, cookie, "/console/webhooks/deliveries?status=pending")
    assert html.count("data-delivery=") == 50
    next_url = re.search(r'href="(/console/webhooks/deliveries\?[^"]+)">Older deliveries', html).group(1)
    assert "status=pending" in next_url and "cursor=" in next_url
    older = page(client, cookie, next_url.replace("&amp;", "&"))
    assert older.count("data-delivery=") == 5
    assert not set(re.findall(r'data-delivery="([^"]+)"', older)) & set(
        re.findall(r'data-delivery="([^"]+)"', html)
    )


def test_a_delivery_page_shows_its_payload_as_text_its_attempts_and_job(client, cookie, wh):
    endpoint(wh, HOOK)
    event = publish(wh, name=XSS, message="Товар обновлён")
    d = delivery_of(wh, event)
    with wh.uow.begin() as tx:
        run = wh.webhooks.begin_run(tx, d.job_id)
    with wh.uow.begin() as tx:
        wh.webhooks.end_run(tx, run, [(run.attempts[0], Answer(500, 12, excerpt=f"down {XSS}"), "dead")])

    html = page(client, cookie, f"/console/webhooks/deliveries/{d.id}")
    assert XSS not in html
    assert "&#34;name&#34;: &#34;&lt;script&gt;alert(1)&lt;/script&gt;&#34;" in html  # pretty, escaped
    assert "Товар обновлён" in html and event.id in html
    assert 'data-attempt="1"' in html and ">500<" in html and "12 ms" in html
    assert "down &lt;script&gt;" in html
    assert 'data-dead-reason="exhausted"' in html  # why it is dead
    assert f'href="/console/jobs/{d.job_id}"' in html
    assert f'action="/console/webhooks/deliveries/{d.id}/replay"' in html
    assert page(client, cookie, f"/console/webhooks/deliveries/{uuid.uuid4()}", 404)


def test_replay_a_dead_delivery_from_its_page(client, cookie, wh):
    endpoint(wh, HOOK)
    d = delivery_of(wh, publish(wh))
    path = f"/console/webhooks/deliveries/{d.id}/replay"
    assert post(client, cookie, path, token=None).status_code == 403
    assert post(client, cookie, path).status_code == 409  # pending: NOT_REPLAYABLE, shown as a page
    kill(wh, d.id)

    response = post(client, cookie, path)

    assert (
        response.status_code == 303 and response.headers["location"] == f"/console/webhooks/deliveries/{d.id}"
    )
    again, _ = wh.webhooks.get_delivery(d.id)
    assert again.status == "pending" and again.job_id != d.job_id and again.message_id == d.message_id
    html = page(client, cookie, response.headers["location"])
    assert 'data-status="pending"' in html and ">Replay</button>" not in html
    json_view = client.simulate_get(f"/v1/admin/webhooks/deliveries/{d.id}", headers=ADMIN).json
    assert json_view["jobId"] == str(again.job_id)


def test_replay_all_dead_since_queues_one_replay_job(client, cookie, wh, sql):
    e = endpoint(wh, HOOK).endpoint
    path = f"/console/webhooks/endpoints/{e.id}/replay"

    response = post(client, cookie, path, "since=2026-12-01T10:00")
    assert response.status_code == 303
    location = response.headers["location"]
    assert location.startswith(f"/console/webhooks/deliveries?endpointId={e.id}&replayJob=")
    job_id = location.rsplit("=", 1)[1]
    [(job_type, payload)] = sql("SELECT type, payload FROM jobs WHERE id = :id", id=job_id)
    assert job_type == "webhook.replay"
    assert payload == {"endpointId": str(e.id), "since": "2026-12-01T10:00:00+00:00"}
    assert f'href="/console/jobs/{job_id}"' in page(client, cookie, location)

    everything = post(client, cookie, path, "since=")
    [(payload,)] = sql(
        "SELECT payload FROM jobs WHERE id = :id", id=everything.headers["location"].rsplit("=", 1)[1]
    )
    assert payload["since"] is None
    bad = post(client, cookie, path, "since=yesterday")
    assert bad.status_code == 422 and "since must be an ISO 8601 time" in bad.text


def test_replay_since_of_a_disabled_endpoint_is_refused_as_a_single_replay_is(client, cookie, wh, sql):
    e = endpoint(wh, HOOK).endpoint
    d = delivery_of(wh, publish(wh))
    kill(wh, d.id)
    token = csrf(client, cookie)
    wh.webhook_handlers.update_endpoint(e.id, enabled=False)

    single = client.simulate_post(f"/v1/admin/webhooks/deliveries/{d.id}/replay", headers=ADMIN)
    since = client.simulate_post(f"/v1/admin/webhooks/endpoints/{e.id}/replay", headers=ADMIN)

    for refused in (single, since):
        assert refused.status_code == 409, refused.text
        assert refused.headers["content-type"] == "application/problem+json"
        assert refused.json["code"] == "ENDPOINT_DISABLED"
    assert since.json["field"] == "enabled"
    # the console's form twin (a page rendered before the endpoint was disabled) says so too
    page_answer = post(client, cookie, f"/console/webhooks/endpoints/{e.id}/replay", "since=", token=token)
    assert page_answer.status_code == 409 and "is disabled: enable it first" in page_answer.text
    assert sql("SELECT count(*) FROM jobs WHERE type = 'webhook.replay'")[0][0] == 0
    missing = client.simulate_post(f"/v1/admin/webhooks/endpoints/{uuid.uuid4()}/replay", headers=ADMIN)
    assert (missing.status_code, missing.json["code"]) == (404, "NOT_FOUND")


def test_with_the_webhooks_module_off_pages_render_without_actions_and_actions_refuse(client, cookie, wh):
    e = endpoint(wh, HOOK).endpoint
    d = delivery_of(wh, publish(wh))
    kill(wh, d.id)
    token = csrf(client, cookie)
    wh.module_handlers.set_module("webhooks", enabled=False, by="test")

    for path in (
        "/console/webhooks/endpoints",
        "/console/webhooks/deliveries",
        f"/console/webhooks/deliveries/{d.id}",
    ):
        html = page(client, cookie, path)
        assert "The webhooks module is disabled" in html
        assert 'method="post"' not in html.split("</header>", 1)[1]  # no action offered (Sign out is above)
    for action, body in (
        (f"/console/webhooks/deliveries/{d.id}/replay", ""),
        (f"/console/webhooks/endpoints/{e.id}/replay", "since="),
        (f"/console/webhooks/endpoints/{e.id}/enabled", "enabled=false"),
        (f"/console/webhooks/endpoints/{e.id}/rotate-secret", ""),
        (f"/console/webhooks/endpoints/{e.id}/test", ""),
    ):
        refused = post(client, cookie, action, body, token=token)
        assert refused.status_code == 409 and "webhooks module is disabled" in refused.text, action
    assert wh.webhooks.get_delivery(d.id)[0].status == "dead" and wh.webhooks.get_endpoint(e.id).enabled
    json_refused = client.simulate_get("/v1/admin/webhooks/delivery-counts", headers=ADMIN)
    assert json_refused.status_code == 409 and json_refused.json["code"] == "MODULE_DISABLED"


def test_the_openapi_document_names_the_json_twins(client):
    paths = client.simulate_get("/openapi.json").json["paths"]
    assert "get" in paths["/v1/admin/catalog/bulk-operations/{operationId}/failures"]
    assert "get" in paths["/v1/admin/webhooks/delivery-counts"]
    detail = paths["/v1/admin/webhooks/deliveries/{deliveryId}"]["get"]["responses"]["200"]
    assert detail["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/DeliveryDetail"}


def test_a_bulk_operations_requester_shows_by_name_with_its_id(client, cookie, wh):
    user = wh.account_handlers.create_user("ops@example.com", "Ольга Операторова")
    op = operation(wh, products(wh, 2), ProductPatch(price=Price(5, "PLN")), {}, requester=user.id)
    for path in ("/console/bulk-operations", f"/console/bulk-operations/{op.id}"):
        html = page(client, cookie, path)
        assert f'<span title="{user.id}">Ольга Операторова</span>' in html
        assert f"<code>{str(user.id)[:8]}</code>" in html
