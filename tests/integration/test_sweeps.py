"""Sweeps of carts, price lists and RFQs: whole batches, racing sweeps, their times, modules off; their API.

Real PostgreSQL and Redis; the sweeps run in this process as their jobs run them
on a worker (``gh.sweep_handlers.run``), the API is the Falcon app in-process.
"""

from __future__ import annotations

import threading
import time
import uuid
from datetime import datetime, timedelta

import pytest
from falcon import testing

from gatehouse import job_types as jt
from gatehouse.catalog import NewProduct, Price
from gatehouse.modules import ModuleDisabled
from gatehouse.schedules import schedules
from gatehouse_api.app import create_app
from tests.conftest import ADMIN_TOKEN
from tests.support.accounts import forget_account_checks
from tests.support.probe import PROBE

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
PROBLEM = "application/problem+json"


@pytest.fixture
def events(gh):
    """Every event raised on the bus, as (type, data), in the order of their transactions' commits."""
    raised: list[tuple[str, dict]] = []

    def subscriber(tx, events):
        raised.extend((event.type, event.data) for event in events)

    subscribe(gh, subscriber)
    return raised


def subscribe(gh, subscriber) -> None:
    """Add a subscriber to the composition's event bus (the one its units of work publish on)."""
    gh.uow._bus.subscribe(subscriber)


def products(gh, *skus: str) -> None:
    """Products of these skus in the catalog: a cart's items name existing products."""
    for sku in skus:
        gh.catalog_handlers.create_product(NewProduct(sku, f"product {sku}", Price(100, "PLN")))


def batch_size(gh, size: int) -> None:
    gh.sweep_handlers.batch_size = size


def stale_carts(sql, n: int, *, age: str = "2 days") -> list[uuid.UUID]:
    """``n`` open carts last touched ``age`` ago (inserted so, as a customer who left would leave them)."""
    rows = sql(
        "INSERT INTO carts (id, customer_ref, items, updated_at, created_at) "
        'SELECT gen_random_uuid(), \'customer-\' || g, \'[{"sku": "SKU-1", "quantity": 1}]\', '
        f"now() - interval '{age}', now() - interval '{age}' FROM generate_series(1, :n) AS g RETURNING id",
        n=n,
    )
    return [r.id for r in rows]


def statuses(sql, table: str) -> dict[uuid.UUID, str]:
    return {r.id: r.status for r in sql(f"SELECT id, status FROM {table}")}


def audit(sql, entity: str) -> list:
    return sql(
        "SELECT entity_id, action, actor, before, after FROM audit_log WHERE entity = :e ORDER BY id",
        e=entity,
    )


def flipped_twice(sql, entity: str, action: str) -> list:
    return sql(
        "SELECT entity_id FROM audit_log WHERE entity = :e AND action = :a GROUP BY entity_id HAVING count(*) > 1",
        e=entity,
        a=action,
    )


def db_now(sql):
    return sql("SELECT now() AS now")[0].now


# -- carts -------------------------------------------------------------------------------


def test_cart_batches_commit_whole_with_their_audit_rows_and_events(gh, sql, events):
    stale = stale_carts(sql, 120)
    fresh = stale_carts(sql, 5, age="1 hour")
    fresh_before = {
        r.id: r.updated_at for r in sql("SELECT id, updated_at FROM carts WHERE id = ANY(:i)", i=fresh)
    }
    batch_size(gh, 50)

    run = gh.sweep_handlers.run("cart-abandonment")

    assert run.result() == {"abandoned": 120, "batches": 3}
    now = statuses(sql, "carts")
    assert {now[i] for i in stale} == {"abandoned"}
    assert {now[i] for i in fresh} == {"open"}
    assert {
        r.id: r.updated_at for r in sql("SELECT id, updated_at FROM carts WHERE id = ANY(:i)", i=fresh)
    } == (fresh_before)
    rows = audit(sql, "cart")
    assert sorted(r.entity_id for r in rows) == sorted(str(i) for i in stale)
    assert all(
        (r.action, r.actor, r.before, r.after)
        == ("cart.abandon", "sweep:cart-abandonment", {"status": "open"}, {"status": "abandoned"})
        for r in rows
    )
    # One event per batch, with the batch's ids
    assert [(t, len(d["cartIds"])) for t, d in events] == [("carts.cart.abandoned", n) for n in (50, 50, 20)]
    assert sorted(i for _, d in events for i in d["cartIds"]) == sorted(str(i) for i in stale)

    # A second sweep finds nothing due
    assert gh.sweep_handlers.run("cart-abandonment").result() == {"abandoned": 0, "batches": 0}
    assert len(audit(sql, "cart")) == 120


def test_an_interrupted_cart_sweep_leaves_whole_batches_and_the_next_run_continues(gh, sql, events):
    stale = stale_carts(sql, 120)
    batch_size(gh, 50)

    # The second batch fails inside its transaction (after its flips and audit rows were written)
    calls = []

    def failing(tx, events):
        calls.append(events)
        if len(calls) == 2:
            raise RuntimeError("the process died here")

    subscribe(gh, failing)
    with pytest.raises(RuntimeError):
        gh.sweep_handlers.run("cart-abandonment")

    # Then only the first batch is there, whole: its flips, its audit rows and its event
    assert list(statuses(sql, "carts").values()).count("abandoned") == 50
    assert len(audit(sql, "cart")) == 50
    assert [len(d["cartIds"]) for _, d in events] == [50, 50]  # seen by the bus; the second rolled back

    # And the next run continues with what is still due: every cart abandoned once
    assert gh.sweep_handlers.run("cart-abandonment").result() == {"abandoned": 70, "batches": 2}
    assert set(statuses(sql, "carts").values()) == {"abandoned"} and len(stale) == 120
    assert len(audit(sql, "cart")) == 120
    assert flipped_twice(sql, "cart", "cart.abandon") == []


def race(gh, name: str, n: int = 2) -> list[dict]:
    """``n`` sweeps of ``name`` started at the same moment on their own threads; their results."""
    start = threading.Barrier(n)
    results: list[dict] = []
    errors: list[BaseException] = []

    def sweep() -> None:
        start.wait()
        try:
            results.append(gh.sweep_handlers.run(name).result())
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=sweep) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors, errors
    return results


def test_two_cart_sweeps_at_once_flip_each_cart_once(gh, sql, events):
    stale = stale_carts(sql, 2_000)
    batch_size(gh, 50)

    results = race(gh, "cart-abandonment")

    assert sum(r["abandoned"] for r in results) == 2_000
    assert set(statuses(sql, "carts").values()) == {"abandoned"}
    assert len(audit(sql, "cart")) == 2_000 and flipped_twice(sql, "cart", "cart.abandon") == []
    ids = [i for _, d in events for i in d["cartIds"]]
    assert len(ids) == len(set(ids)) == len(stale)  # no cart in two events


def test_touching_a_cart_keeps_it_open_and_an_abandoned_cart_comes_back(gh, sql):
    [old] = stale_carts(sql, 1)
    products(gh, "SKU-2")
    gh.sweep_handlers.set_cart_items(old, [{"sku": "SKU-2", "quantity": 3}], actor="admin")
    assert gh.sweep_handlers.run("cart-abandonment").result()["abandoned"] == 0  # touched just now

    sql("UPDATE carts SET updated_at = now() - interval '2 days' WHERE id = :i", i=old)
    assert gh.sweep_handlers.run("cart-abandonment").result()["abandoned"] == 1
    back = gh.sweep_handlers.set_cart_items(old, [], actor="admin")
    assert back.status == "open" and back.items == []
    assert [(r.action, r.after) for r in audit(sql, "cart")][-1] == (
        "cart.update",
        {"items": [], "status": "open"},
    )


# -- price lists and RFQs ------------------------------------------------------------------


def test_price_lists_move_at_their_times_each_once(gh, sql, events):
    now = db_now(sql)
    soon, later = now + timedelta(seconds=1.5), now + timedelta(seconds=3)
    starts_soon = gh.sweep_handlers.create_price_list("starts soon, ends later", soon, later).id
    starts_soon_long = gh.sweep_handlers.create_price_list("starts soon", soon, now + timedelta(days=30)).id
    far = gh.sweep_handlers.create_price_list("far", now + timedelta(days=1), now + timedelta(days=2)).id
    # Rows the sweeps missed (made by SQL): one scheduled already past its end, one active past its end
    missed = sql(
        "INSERT INTO price_lists (id, name, status, valid_from, valid_to) VALUES "
        "(gen_random_uuid(), 'missed', 'scheduled', now() - interval '2 hours', now() - interval '1 hour'), "
        "(gen_random_uuid(), 'ended', 'active', now() - interval '2 hours', now() - interval '1 minute') "
        "RETURNING id, name"
    )
    missed_ids = {r.name: r.id for r in missed}
    assert {gh.sweeps.get_price_list(i).status for i in (starts_soon, starts_soon_long, far)} == {"scheduled"}

    # Before validFrom: only the missed ones move, both straight to expired
    assert gh.sweep_handlers.run("price-list-status").result() == {"activated": 0, "expired": 2, "batches": 1}
    assert statuses(sql, "price_lists")[missed_ids["missed"]] == "expired"
    assert statuses(sql, "price_lists")[starts_soon] == "scheduled"

    # At validFrom: both that start soon are active
    time.sleep(max(0.0, (soon - db_now(sql)).total_seconds()) + 0.05)
    racing = race(gh, "price-list-status")
    assert (sum(r["activated"] for r in racing), sum(r["expired"] for r in racing)) == (2, 0)
    assert statuses(sql, "price_lists")[starts_soon] == "active"

    # At validTo: the short one expires; the far one never moved
    time.sleep(max(0.0, (later - db_now(sql)).total_seconds()) + 0.05)
    assert sum(r["expired"] for r in race(gh, "price-list-status")) == 1
    final = statuses(sql, "price_lists")
    assert (final[starts_soon], final[starts_soon_long], final[far]) == ("expired", "active", "scheduled")
    assert gh.sweep_handlers.run("price-list-status").result() == {"activated": 0, "expired": 0, "batches": 0}

    moves = [(r.entity_id, r.action, r.before["status"], r.after["status"]) for r in audit(sql, "price_list")]
    assert sorted(moves) == sorted(
        [
            (str(missed_ids["missed"]), "price_list.expire", "scheduled", "expired"),
            (str(missed_ids["ended"]), "price_list.expire", "active", "expired"),
            (str(starts_soon), "price_list.activate", "scheduled", "active"),
            (str(starts_soon_long), "price_list.activate", "scheduled", "active"),
            (str(starts_soon), "price_list.expire", "active", "expired"),
        ]
    )
    activated = sorted(
        i for t, d in events if t == "price_lists.price_list.activated" for i in d["priceListIds"]
    )
    expired = sorted(i for t, d in events if t == "price_lists.price_list.expired" for i in d["priceListIds"])
    assert activated == sorted([str(starts_soon), str(starts_soon_long)])
    assert expired == sorted([str(missed_ids["missed"]), str(missed_ids["ended"]), str(starts_soon)])


def test_many_due_price_lists_and_rfqs_flip_once_under_two_racing_sweeps(gh, sql):
    batch_size(gh, 40)
    sql(
        "INSERT INTO price_lists (id, name, status, valid_from, valid_to) "
        "SELECT gen_random_uuid(), 'p' || g, 'scheduled', now() - interval '1 hour', "
        "now() + CASE WHEN g % 2 = 0 THEN interval '1 day' ELSE interval '-1 minute' END "
        "FROM generate_series(1, 500) AS g"
    )
    sql(
        "INSERT INTO rfqs (id, customer_ref, status, expires_at) "
        "SELECT gen_random_uuid(), 'c' || g, CASE WHEN g % 2 = 0 THEN 'open' ELSE 'quoted' END, "
        "now() - interval '1 second' FROM generate_series(1, 500) AS g"
    )

    prices, rfqs = race(gh, "price-list-status", 3), race(gh, "rfq-expiry", 3)

    assert (sum(r["activated"] for r in prices), sum(r["expired"] for r in prices)) == (250, 250)
    assert sum(r["expired"] for r in rfqs) == 500
    assert sorted(statuses(sql, "price_lists").values()) == ["active"] * 250 + ["expired"] * 250
    assert set(statuses(sql, "rfqs").values()) == {"expired"}
    assert len(audit(sql, "price_list")) == 500 and len(audit(sql, "rfq")) == 500
    assert flipped_twice(sql, "price_list", "price_list.expire") == []
    assert flipped_twice(sql, "price_list", "price_list.activate") == []
    assert flipped_twice(sql, "rfq", "rfq.expire") == []


def test_rfqs_expire_at_their_time_each_once(gh, sql, events):
    now = db_now(sql)
    soon = now + timedelta(seconds=1)
    open_rfq = gh.sweep_handlers.create_rfq("customer-1", soon).id
    quoted = gh.sweep_handlers.create_rfq("customer-2", soon).id
    sql("UPDATE rfqs SET status = 'quoted' WHERE id = :i", i=quoted)
    far = gh.sweep_handlers.create_rfq("customer-3", now + timedelta(days=7)).id
    born_late = gh.sweep_handlers.create_rfq("customer-4", now - timedelta(seconds=1))
    assert born_late.status == "expired"

    assert gh.sweep_handlers.run("rfq-expiry").result() == {"expired": 0, "batches": 0}
    time.sleep(max(0.0, (soon - db_now(sql)).total_seconds()) + 0.05)
    assert sum(r["expired"] for r in race(gh, "rfq-expiry")) == 2

    final = statuses(sql, "rfqs")
    assert (final[open_rfq], final[quoted], final[far]) == ("expired", "expired", "open")
    assert sorted((r.entity_id, r.before["status"]) for r in audit(sql, "rfq")) == sorted(
        [(str(open_rfq), "open"), (str(quoted), "quoted")]
    )
    assert [(t, sorted(d["rfqIds"])) for t, d in events] == [
        ("rfq.rfq.expired", sorted([str(open_rfq), str(quoted)]))
    ]


# -- modules off -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sweep", "module", "how"),
    [
        ("cart-abandonment", "carts", {"installed": False}),
        ("cart-abandonment", "carts", {"enabled": False}),
        ("price-list-status", "price_lists", {"enabled": False}),
        ("rfq-expiry", "rfq", {"installed": False}),
    ],
)
def test_with_its_module_off_a_sweep_changes_nothing(gh, sql, events, sweep, module, how):
    stale_carts(sql, 10)
    sql(
        "INSERT INTO price_lists (id, name, status, valid_from, valid_to) "
        "VALUES (gen_random_uuid(), 'due', 'scheduled', now() - interval '1 hour', now() + interval '1 hour')"
    )
    sql(
        "INSERT INTO rfqs (id, customer_ref, status, expires_at) VALUES (gen_random_uuid(), 'c', 'open', now())"
    )
    before = {t: statuses(sql, t) for t in ("carts", "price_lists", "rfqs")}
    gh.module_handlers.set_module(module, by="test", **how)

    with pytest.raises(ModuleDisabled) as raised:
        gh.sweep_handlers.run(sweep)

    assert raised.value.code == "MODULE_DISABLED" and raised.value.module == module
    assert {t: statuses(sql, t) for t in ("carts", "price_lists", "rfqs")} == before
    assert sql("SELECT count(*) FROM audit_log")[0][0] == 0 and events == []


def test_a_module_switched_off_mid_run_stops_the_sweep_between_batches(gh, sql):
    stale_carts(sql, 120)
    batch_size(gh, 50)

    run = gh.sweep_handlers.run(
        "cart-abandonment",
        between_batches=lambda: gh.module_handlers.set_module("carts", enabled=False, by="t"),
    )

    assert run.result() == {"abandoned": 50, "batches": 1, "stopped": "MODULE_DISABLED"}
    assert list(statuses(sql, "carts").values()).count("abandoned") == 50


# -- one live sweep job; single-job ticks --------------------------------------------------


def test_one_live_sweep_job_of_a_type_however_many_ask_at_once(gh, sql):
    start = threading.Barrier(8)
    got: list = []

    def ask() -> None:
        start.wait()
        got.append(gh.job_handlers.submit(jt.CART_ABANDONMENT_SWEEP, account_id=None))

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    assert len({job.id for job, _ in got}) == 1 and sum(created for _, created in got) == 1
    # Another sweep type is another job; an ended sweep lets the next one in
    other, created = gh.job_handlers.submit(jt.RFQ_EXPIRY_SWEEP, account_id=None)
    assert created and other.id != got[0][0].id
    sql("UPDATE jobs SET state = 'completed' WHERE id = :i", i=got[0][0].id)
    assert gh.job_handlers.submit(jt.CART_ABANDONMENT_SWEEP, account_id=None)[1] is True
    # Jobs of no account that are not system jobs (user tier) are not limited by it
    assert (
        gh.job_handlers.submit(PROBE, account_id=None)[1]
        and gh.job_handlers.submit(PROBE, account_id=None)[1]
    )


def test_a_single_job_tick_makes_one_job_and_none_while_its_module_is_off(gh, sql):
    gh.account_handlers.create_account("shop", "seller-1")  # accounts play no part in a single-job schedule
    forget_account_checks(gh)
    by_name = schedules({})
    tick = by_name["price-list-status"]
    assert (tick.per_account, tick.cron, tick.job_type) == (False, "*/5 * * * *", jt.PRICE_LIST_STATUS_SWEEP)
    assert (by_name["rfq-expiry"].cron, by_name["cart-abandonment"].cron) == ("*/5 * * * *", "0 * * * *")

    assert gh.fan_out_handlers.tick(tick) == (1, 0)
    assert gh.fan_out_handlers.tick(tick) == (0, 1)  # one live at a time
    [job] = sql("SELECT type, queue, tier, account_id FROM jobs")
    assert tuple(job) == ("price_lists.status-sweep", "price_lists.sweep", "scheduled", None)

    gh.module_handlers.set_module("carts", enabled=False, by="test")
    assert gh.fan_out_handlers.tick(by_name["cart-abandonment"]) == (0, 0)
    assert sql("SELECT count(*) FROM jobs WHERE type = 'carts.abandonment-sweep'")[0][0] == 0
    # a tick that created nothing is not its schedule's last run
    assert gh.schedule_runs.runs("cart-abandonment")[0] is None
    assert gh.schedule_runs.runs("price-list-status")[0] is not None


# -- the API -------------------------------------------------------------------------------


@pytest.fixture
def client(gh):
    return testing.TestClient(create_app(gh))


def problem(response, status: int, code: str, field: str | None = None) -> dict:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == PROBLEM
    assert response.json["code"] == code
    if field is not None:
        assert response.json.get("field") == field, response.json
    return response.json


def test_carts_are_created_read_and_touched_through_the_api(client, gh, sql):
    products(gh, "CH-1")
    created = client.simulate_post(
        "/v1/admin/carts",
        json={"customerRef": "cust-42", "items": [{"sku": "CH-1", "quantity": 2}]},
        headers=ADMIN,
    )
    assert created.status_code == 201, created.text
    cart = created.json
    assert created.headers["location"] == f"/v1/admin/carts/{cart['cartId']}"
    assert (cart["customerRef"], cart["status"], cart["items"]) == (
        "cust-42",
        "open",
        [{"sku": "CH-1", "quantity": 2}],
    )
    assert client.simulate_get(f"/v1/admin/carts/{cart['cartId']}", headers=ADMIN).json == cart

    # A staff user's key may do it too, and the PATCH is audited under the user
    user = gh.account_handlers.create_user("ala@example.com", "Ala")
    staff = {"Authorization": f"Bearer {gh.account_handlers.issue_user_key(user.id, actor='admin')}"}
    patched = client.simulate_patch(
        f"/v1/admin/carts/{cart['cartId']}", json={"items": [{"sku": "CH-1", "quantity": 3}]}, headers=staff
    )
    assert patched.status_code == 200 and patched.json["items"] == [{"sku": "CH-1", "quantity": 3}]
    assert datetime.fromisoformat(patched.json["updatedAt"]) > datetime.fromisoformat(cart["updatedAt"])
    [row] = sql("SELECT actor, action, before, after FROM audit_log WHERE entity = 'cart'")
    assert (row.actor, row.action, row.before, row.after) == (
        str(user.id),
        "cart.update",
        {"items": [{"sku": "CH-1", "quantity": 2}]},
        {"items": [{"sku": "CH-1", "quantity": 3}]},
    )
    empty = client.simulate_post("/v1/admin/carts", json={"customerRef": "c"}, headers=ADMIN)
    assert empty.status_code == 201 and empty.json["items"] == []


def test_price_list_status_at_creation_follows_its_times(client, sql):
    now = db_now(sql)

    def create(valid_from, valid_to) -> dict:
        body = {"name": "Zima", "validFrom": valid_from.isoformat(), "validTo": valid_to.isoformat()}
        response = client.simulate_post("/v1/admin/price-lists", json=body, headers=ADMIN)
        assert response.status_code == 201, response.text
        return response.json

    hour = timedelta(hours=1)
    assert create(now + hour, now + 2 * hour)["status"] == "scheduled"
    current = create(now - hour, now + hour)
    assert current["status"] == "active"
    assert create(now - 2 * hour, now - hour)["status"] == "expired"
    read = client.simulate_get(f"/v1/admin/price-lists/{current['priceListId']}", headers=ADMIN).json
    assert read == current and set(read) == {
        "priceListId", "name", "status", "validFrom", "validTo", "createdAt", "updatedAt",
    }  # fmt: skip


def test_rfqs_are_created_and_read_through_the_api(client, sql):
    at = (db_now(sql) + timedelta(days=3)).isoformat()
    created = client.simulate_post(
        "/v1/admin/rfqs", json={"customerRef": "buyer-7", "expiresAt": at}, headers=ADMIN
    )
    assert created.status_code == 201, created.text
    assert (created.json["status"], created.json["customerRef"]) == ("open", "buyer-7")
    assert client.simulate_get(f"/v1/admin/rfqs/{created.json['rfqId']}", headers=ADMIN).json == created.json


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/v1/admin/carts", {}, "customerRef"),
        ("/v1/admin/carts", {"customerRef": " "}, "customerRef"),
        ("/v1/admin/carts", {"customerRef": "c", "items": [{"sku": "A", "quantity": 0}]}, "items.0.quantity"),
        ("/v1/admin/carts", {"customerRef": "c", "items": [{"sku": "A"}]}, "items.0.quantity"),
        ("/v1/admin/carts", {"customerRef": "c", "items": [{"sku": "A", "quantity": 1}] * 2}, "items.1.sku"),
        ("/v1/admin/carts", {"customerRef": "c", "status": "converted"}, "status"),
        (
            "/v1/admin/price-lists",
            {"name": "x", "validFrom": "2026-12-02T00:00:00Z", "validTo": "2026-12-01T00:00:00Z"},
            "validTo",
        ),
        ("/v1/admin/price-lists", {"name": "x", "validFrom": "2026-12-01T00:00:00", "validTo": "2027-01-01T00:00:00Z"}, "validFrom"),
        ("/v1/admin/price-lists", {"name": "x", "validFrom": "0001-01-01T00:00:00Z", "validTo": "2027-01-01T00:00:00Z"}, "validFrom"),
        ("/v1/admin/rfqs", {"customerRef": "c", "expiresAt": "soon"}, "expiresAt"),
    ],
)  # fmt: skip
def test_bad_bodies_are_422_naming_the_field(client, path, body, field):
    problem(client.simulate_post(path, json=body, headers=ADMIN), 422, "VALIDATION_ERROR", field)


def test_unknown_ids_are_404_account_keys_403_and_a_converted_cart_409(client, gh, sql):
    for path in ("/v1/admin/carts", "/v1/admin/price-lists", "/v1/admin/rfqs"):
        problem(client.simulate_get(f"{path}/{uuid.uuid4()}", headers=ADMIN), 404, "NOT_FOUND")
    problem(
        client.simulate_patch(f"/v1/admin/carts/{uuid.uuid4()}", json={"items": []}, headers=ADMIN),
        404,
        "NOT_FOUND",
    )
    account = gh.account_handlers.create_account("shop", "seller-1")
    keyed = {"Authorization": f"Bearer {gh.account_handlers.issue_account_key(account.id, actor='admin')}"}
    problem(
        client.simulate_post("/v1/admin/carts", json={"customerRef": "c"}, headers=keyed), 403, "FORBIDDEN"
    )

    cart = client.simulate_post("/v1/admin/carts", json={"customerRef": "c"}, headers=ADMIN).json
    sql("UPDATE carts SET status = 'converted' WHERE id = :i", i=cart["cartId"])
    problem(
        client.simulate_patch(f"/v1/admin/carts/{cart['cartId']}", json={"items": []}, headers=ADMIN),
        409,
        "CART_CONVERTED",
    )


def test_the_routes_of_a_module_that_is_off_answer_module_disabled(client, gh):
    gh.module_handlers.set_module("rfq", installed=False, by="test")
    gh.module_handlers.set_module("price_lists", enabled=False, by="test")
    body = problem(
        client.simulate_get(f"/v1/admin/rfqs/{uuid.uuid4()}", headers=ADMIN), 404, "MODULE_DISABLED"
    )
    assert body["module"] == "rfq"
    problem(client.simulate_post("/v1/admin/price-lists", json={}, headers=ADMIN), 409, "MODULE_DISABLED")
    assert (
        client.simulate_post("/v1/admin/carts", json={"customerRef": "c"}, headers=ADMIN).status_code == 201
    )


def test_the_schedules_list_the_three_sweeps_as_single_jobs(client):
    items = {i["name"]: i for i in client.simulate_get("/v1/admin/schedules", headers=ADMIN).json["items"]}
    for name, job_type, cron, module in (
        ("cart-abandonment", "carts.abandonment-sweep", "0 * * * *", "carts"),
        ("price-list-status", "price_lists.status-sweep", "*/5 * * * *", "price_lists"),
        ("rfq-expiry", "rfq.expiry-sweep", "*/5 * * * *", "rfq"),
    ):
        assert items[name] == {
            "name": name, "jobType": job_type, "cron": cron, "maxWaitMs": None, "perAccount": False,
            "spreadMs": 0, "enabled": True, "module": module, "moduleEnabled": True, "lastRun": None, "nextRun": None,
        }  # fmt: skip
    assert items["rnp-ads"]["perAccount"] is True and items["rnp-ads"]["module"] is None
    assert items["rnp-ads"]["spreadMs"] == 150_000  # half its 5-minute cadence
