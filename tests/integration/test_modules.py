"""Modules: the registry, their routes answering MODULE_DISABLED, their events not emitted (in-process app)."""

from __future__ import annotations

import time

import pytest
from falcon import testing

from gatehouse.events import Event
from gatehouse.modules import (
    MODULES,
    REFRESH_S,
    ModuleDisabled,
    module_of_event,
    module_of_path,
    module_of_queue,
)
from gatehouse_api.app import create_app
from tests.conftest import ADMIN_TOKEN

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
PROBLEM = "application/problem+json"


@pytest.fixture
def client(gh):
    return testing.TestClient(create_app(gh))


def test_the_migration_installs_and_enables_every_module(client):
    response = client.simulate_get("/v1/admin/modules", headers=ADMIN)
    assert response.status_code == 200
    items = {m["name"]: m for m in response.json["items"]}
    assert list(items) == list(MODULES)
    assert all(m["installed"] and m["enabled"] for m in items.values())
    assert items["catalog"]["queues"] == ["catalog.bulk-operation"]
    assert items["webhooks"]["queues"] == ["webhook.deliver"]


def test_a_disabled_module_answers_409_and_an_uninstalled_one_404_both_module_disabled(client):
    assert client.simulate_get("/v1/admin/catalog/products", headers=ADMIN).status_code == 200

    put = client.simulate_put("/v1/admin/modules/catalog", json={"enabled": False}, headers=ADMIN)
    assert put.status_code == 200 and put.json["enabled"] is False and put.json["updatedBy"] == "admin"
    off = client.simulate_get("/v1/admin/catalog/products", headers=ADMIN)
    assert off.status_code == 409 and off.headers["content-type"] == PROBLEM
    assert (off.json["code"], off.json["module"]) == ("MODULE_DISABLED", "catalog")
    # every route of the module, whatever the method
    assert client.simulate_post("/v1/admin/catalog/search/reindex", headers=ADMIN).status_code == 409
    # other modules' routes are not affected
    assert client.simulate_get("/v1/admin/webhooks/endpoints", headers=ADMIN).status_code == 200

    client.simulate_put(
        "/v1/admin/modules/catalog", json={"installed": False, "enabled": True}, headers=ADMIN
    )
    gone = client.simulate_get("/v1/admin/catalog/products", headers=ADMIN)
    assert gone.status_code == 404 and (gone.json["code"], gone.json["module"]) == (
        "MODULE_DISABLED",
        "catalog",
    )

    client.simulate_put("/v1/admin/modules/catalog", json={"installed": True}, headers=ADMIN)
    assert client.simulate_get("/v1/admin/catalog/products", headers=ADMIN).status_code == 200


def test_authentication_comes_before_the_module_check(client, gh):
    gh.module_handlers.set_module("catalog", enabled=False, by="test")
    assert client.simulate_get("/v1/admin/catalog/products").status_code == 401


def test_bad_module_requests_are_refused(client):
    unknown = client.simulate_put("/v1/admin/modules/nope", json={"enabled": False}, headers=ADMIN)
    assert unknown.status_code == 404 and unknown.json["code"] == "NOT_FOUND"
    bad = client.simulate_put("/v1/admin/modules/catalog", json={"enabled": "no"}, headers=ADMIN)
    assert bad.status_code == 422
    extra = client.simulate_put("/v1/admin/modules/catalog", json={"colour": 1}, headers=ADMIN)
    assert extra.status_code == 422
    assert client.simulate_put("/v1/admin/modules/catalog", json={"enabled": False}).status_code == 401


def test_another_process_sees_a_change_within_the_refresh(gh, settings):
    from gatehouse.composition import bootstrap

    other = bootstrap(settings)
    try:
        assert other.modules.state("carts").on
        gh.module_handlers.set_module("carts", enabled=False, by="test")
        deadline = time.monotonic() + REFRESH_S + 1
        while other.modules.state("carts").on:
            assert time.monotonic() < deadline, "the change did not arrive within a second"
            time.sleep(0.05)
        with pytest.raises(ModuleDisabled):
            other.modules.require("carts")
    finally:
        other.close()


def test_events_of_a_module_that_is_off_are_not_emitted(gh, sql):
    # a literal address: never contacted here
    gh.webhook_handlers.create_endpoint("https://93.184.216.34/hook", event_types=None, description="")

    def publish(event_type: str) -> int:
        """How many delivery jobs the event made (what its unit of work sends after the commit)."""
        with gh.uow.begin() as tx:
            tx.publish(Event(event_type, {}))
            return len(tx.messages)

    assert publish("catalog.product.updated") == 1
    gh.module_handlers.set_module("catalog", enabled=False, by="test")
    assert publish("catalog.product.updated") == 0
    assert publish("wb.job.completed") == 1  # the WB side is not a module
    # webhooks off: deliveries are still recorded (sent once it is back on)
    gh.module_handlers.set_module("webhooks", enabled=False, by="test")
    assert publish("wb.job.completed") == 1


def test_every_route_queue_and_event_prefix_belongs_to_one_module():
    assert module_of_path("/v1/admin/catalog/products").name == "catalog"
    assert module_of_path("/v1/admin/price-lists/x").name == "price_lists"
    assert module_of_path("/v1/accounts") is None and module_of_path("/v1/admin/modules") is None
    assert module_of_queue("webhook.deliver").name == "webhooks" and module_of_queue("wb-user") is None
    assert (
        module_of_event("carts.cart.abandoned").name == "carts" and module_of_event("wb.job.failed") is None
    )
