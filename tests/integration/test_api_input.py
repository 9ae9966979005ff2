"""Bad input is told precisely (issue 24): messages as written, every invalid field, duplicate keys,
ISO 4217 currencies, cart skus that exist, import periods not in the future; query parameters are
checked like body fields, names refuse invisible formatting characters, /v1 answers are never
cached (issue 26). The Falcon app
in-process, real PostgreSQL and Redis.
"""

from __future__ import annotations

import json
import re
import sys
import unicodedata
from datetime import UTC, datetime, timedelta

import pytest
from falcon import testing

from gatehouse.catalog import rules
from gatehouse.catalog.rules import Price
from gatehouse.errors import ValidationFailed
from gatehouse_api import schemas
from gatehouse_api.app import create_app
from tests.conftest import ADMIN_TOKEN

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
JSON = {**ADMIN, "Content-Type": "application/json"}
PROBLEM = "application/problem+json"
PRODUCTS = "/v1/admin/catalog/products"


@pytest.fixture
def client(gh):
    return testing.TestClient(create_app(gh))


def invalid(response, field: str | None) -> dict:
    """A 422 VALIDATION_ERROR whose ``field``/``detail`` are the first of its ``errors``."""
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == PROBLEM
    body = response.json
    assert body["code"] == "VALIDATION_ERROR" and body["field"] == field, body
    assert body["errors"][0] == {"field": body["field"], "message": body["detail"]}
    return body


def product(client, sku: str, currency: str = "PLN"):
    body = {"sku": sku, "name": f"product {sku}", "price": {"amount": 100, "currency": currency}}
    return client.simulate_post(PRODUCTS, json=body, headers=ADMIN)


def account(client) -> str:
    response = client.simulate_post("/v1/accounts", json={"name": "Shop", "wbToken": "t"}, headers=ADMIN)
    assert response.status_code == 201, response.text
    return response.json["accountId"]


# -- messages as written, patterns in words, every field ----------------------------------------


def test_messages_keep_their_case_and_say_patterns_in_words(client):
    body = invalid(product(client, "P-1", currency="pln"), "price.currency")
    assert body["detail"] == "price.currency: must be a three-letter ISO 4217 currency code such as PLN"

    late = {"name": "Zima", "validFrom": "2026-12-01X10:00:00Z", "validTo": "2027-01-01T00:00:00Z"}
    body = invalid(client.simulate_post("/v1/admin/price-lists", json=late, headers=ADMIN), "validFrom")
    assert "`T`" in body["detail"], body  # pydantic's words as it wrote them, the quoted T not lowered

    body = invalid(
        client.simulate_post("/v1/accounts", json={"name": "", "wbToken": "t"}, headers=ADMIN), "name"
    )
    assert body["detail"] == (
        "name: must hold at least one visible character, and no NUL or invisible formatting character "
        "(a bidi control, a zero-width space or joiner)"
    )
    assert "\\u0000" not in json.dumps(body) and "pattern" not in body["detail"]

    bad_sku = {"sku": "-x", "name": "n", "price": {"amount": 1, "currency": "PLN"}}
    body = invalid(client.simulate_post(PRODUCTS, json=bad_sku, headers=ADMIN), "sku")
    assert body["detail"] == f"sku: {rules.SKU_RULE}"


def test_every_invalid_field_is_reported(client):
    sent = {"name": "", "wbToken": 5, "admin": True}
    body = invalid(client.simulate_post("/v1/accounts", json=sent, headers=ADMIN), "name")
    assert [e["field"] for e in body["errors"]] == ["name", "wbToken", "admin"]
    assert body["errors"][2]["message"] == "admin: is not allowed"

    sent = {"sku": "", "name": " ", "price": {"amount": -1, "currency": "XYZ"}, "attributes": {"Bad": 1}}
    body = invalid(client.simulate_post(PRODUCTS, json=sent, headers=ADMIN), "sku")
    fields = [e["field"] for e in body["errors"]]
    assert fields == ["sku", "name", "price.amount", "price.currency", "attributes.Bad"]


def test_a_rule_of_the_domain_answers_errors_too(client):
    sent = {"kind": "feeds", "dateFrom": "2026-10-02", "dateTo": "2026-10-01"}
    url = f"/v1/accounts/{account(client)}/digitization/imports"
    body = invalid(client.simulate_post(url, json=sent, headers=ADMIN), "dateTo")
    assert body["errors"] == [{"field": "dateTo", "message": "dateTo: must not be before dateFrom"}]


# -- duplicate keys -------------------------------------------------------------------------------


def test_a_key_sent_twice_is_422_naming_it(client):
    twice = '{"name": "Shop", "wbToken": "a", "wbToken": "b"}'
    body = invalid(client.simulate_post("/v1/accounts", body=twice, headers=JSON), "wbToken")
    assert "more than once" in body["detail"]

    nested = (
        '{"sku": "P-2", "name": "n", "price": {"amount": 1, "currency": "PLN", "currency": "EUR"},'
        ' "name": "m"}'
    )
    body = invalid(client.simulate_post(PRODUCTS, body=nested, headers=JSON), "name")
    assert [e["field"] for e in body["errors"]] == ["name", "price.currency"]
    assert client.simulate_get(PRODUCTS, headers=ADMIN).json["items"] == []


# -- currencies -----------------------------------------------------------------------------------


@pytest.mark.parametrize("currency", ["XYZ", "ABC", "HRK", "QQQ"])
def test_a_currency_outside_iso_4217_is_422(client, currency):
    body = invalid(product(client, "P-3", currency=currency), "price.currency")
    assert body["detail"] == (
        f"price.currency: {currency} is not an active ISO 4217 currency code (e.g. PLN, EUR, USD)"
    )


def test_active_currencies_are_accepted_and_patches_are_held_to_the_list(client):
    for n, currency in enumerate(("PLN", "EUR", "USD", "JPY", "CHF")):
        assert product(client, f"P-{n}", currency=currency).status_code == 201
    made = product(client, "P-9").json
    patch = {"price": {"amount": 5, "currency": "XYZ"}}
    invalid(
        client.simulate_patch(f"{PRODUCTS}/{made['productId']}", json=patch, headers=ADMIN), "price.currency"
    )


def test_the_catalog_rule_refuses_a_made_up_currency_on_every_path():
    rules.check_price(Price(1, "PLN"))
    with pytest.raises(ValidationFailed) as refused:
        rules.check_price(Price(1, "XYZ"))
    assert refused.value.field == "price.currency"
    assert {"PLN", "EUR", "USD", "GBP", "UAH", "XCG", "ZWG"} <= rules.CURRENCIES
    assert not {"XYZ", "HRK", "CUC", "ZWL"} & rules.CURRENCIES


def test_the_contract_lists_the_currencies_and_the_errors(client):
    schemas = client.simulate_get("/openapi.json").json["components"]["schemas"]
    assert schemas["PriceBody"]["properties"]["currency"]["enum"] == sorted(rules.CURRENCIES)
    errors = schemas["Problem"]["properties"]["errors"]
    assert {"type": "array", "items": {"$ref": "#/components/schemas/FieldError"}} in errors["anyOf"]
    assert set(schemas["FieldError"]["properties"]) == {"field", "message"}


# -- carts: skus that exist -----------------------------------------------------------------------


def test_a_cart_line_whose_sku_is_no_product_is_422(client):
    assert product(client, "CH-1").status_code == 201
    items = [
        {"sku": "CH-1", "quantity": 1},
        {"sku": "NOPE-1", "quantity": 2},
        {"sku": "NOPE-2", "quantity": 1},
    ]
    body = invalid(
        client.simulate_post("/v1/admin/carts", json={"customerRef": "c", "items": items}, headers=ADMIN),
        "items.1.sku",
    )
    assert body["errors"] == [
        {"field": "items.1.sku", "message": "items.1.sku: no product has the sku 'NOPE-1'"},
        {"field": "items.2.sku", "message": "items.2.sku: no product has the sku 'NOPE-2'"},
    ]

    good = {"customerRef": "c", "items": items[:1]}
    cart = client.simulate_post("/v1/admin/carts", json=good, headers=ADMIN)
    assert cart.status_code == 201, cart.text
    url = f"/v1/admin/carts/{cart.json['cartId']}"
    invalid(
        client.simulate_patch(url, json={"items": [{"sku": "NOPE-1", "quantity": 1}]}, headers=ADMIN),
        "items.0.sku",
    )
    assert client.simulate_get(url, headers=ADMIN).json["items"] == items[:1]


# -- import periods -------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["feeds", "report"])
def test_an_import_starting_after_today_is_422_on_date_from(client, kind):
    url = f"/v1/accounts/{account(client)}/digitization/imports"
    today = datetime.now(UTC).date()
    later = {
        "kind": kind,
        "dateFrom": str(today + timedelta(days=1)),
        "dateTo": str(today + timedelta(days=30)),
    }
    body = invalid(client.simulate_post(url, json=later, headers=ADMIN), "dateFrom")
    assert "in the future" in body["detail"]

    from_today = {"kind": kind, "dateFrom": str(today), "dateTo": str(today + timedelta(days=30))}
    assert client.simulate_post(url, json=from_today, headers=ADMIN).status_code == 202


# -- query parameters, names, caching (issue 26) --------------------------------------------------


def test_a_nul_in_a_query_parameter_is_422_naming_it(client):
    accounts = "/v1/admin/accounts"
    body = invalid(client.simulate_get(accounts, query_string="name=a%00b", headers=ADMIN), "name")
    assert body["detail"] == "name: must not contain a NUL character"
    invalid(client.simulate_get(accounts, query_string="limit=5&hot=%00", headers=ADMIN), "hot")
    assert client.simulate_get(accounts, query_string="name=ab", headers=ADMIN).status_code == 200


NAMED = [
    ("/v1/accounts", {"name": "{}", "wbToken": "t"}),
    ("/v1/admin/users", {"email": "ops@example.com", "name": "{}"}),
    (PRODUCTS, {"sku": "P-1", "name": "{}", "price": {"amount": 1, "currency": "PLN"}}),
    (
        "/v1/admin/price-lists",
        {"name": "{}", "validFrom": "2027-01-01T00:00:00Z", "validTo": "2027-02-01T00:00:00Z"},
    ),
    ("/v1/admin/carts", {"customerRef": "{}"}),
]


@pytest.mark.parametrize("char", ["\u202e", "\u2066", "\u200b", "\u200d", "\ufeff", "\U000e0041"])
def test_a_name_with_an_invisible_formatting_character_is_422(client, char):
    for path, template in NAMED:
        sent = json.loads(json.dumps(template).replace("{}", f"Shop{char}exe.txt"))
        field = "customerRef" if "customerRef" in sent else "name"
        body = invalid(client.simulate_post(path, json=sent, headers=ADMIN), field)
        assert "invisible formatting character" in body["detail"]
    # … while a description, free text, keeps them
    described = {"sku": "P-2", "name": "Shop", "description": f"right-to-left {char} text"}
    described["price"] = {"amount": 1, "currency": "PLN"}
    assert client.simulate_post(PRODUCTS, json=described, headers=ADMIN).status_code == 201


def test_the_names_pattern_refuses_exactly_unicodes_format_characters():
    every = "".join(map(chr, range(sys.maxunicode + 1)))
    refused = re.findall(f"[{schemas.FORMAT_CHARS}]", every)
    assert refused == [c for c in every if unicodedata.category(c) == "Cf"]


def test_every_v1_answer_says_no_store_and_other_paths_need_not(client):
    answers = [
        client.simulate_get("/v1/admin/accounts", headers=ADMIN),  # 200
        client.simulate_head("/v1/admin/accounts", headers=ADMIN),
        client.simulate_post("/v1/accounts/keys", headers=ADMIN),  # 404 of the unrouted sink
        client.simulate_get("/v1/admin/accounts"),  # 401
        client.simulate_delete("/v1/admin/accounts", headers=ADMIN),  # 405
        client.simulate_get("/v1/admin/accounts", params={"limit": "0"}, headers=ADMIN),  # 422
    ]
    assert [a.status_code for a in answers] == [200, 200, 404, 401, 405, 422]
    assert all(a.headers["cache-control"] == "no-store" for a in answers)
    assert "cache-control" not in client.simulate_get("/healthz").headers
