"""The B2B admin API (staff users, catalog) under real gunicorn, against real PostgreSQL."""

from __future__ import annotations

import uuid

import httpx
import pytest

from tests.conftest import ADMIN_TOKEN

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
PROBLEM = "application/problem+json"
CATALOG = "/v1/admin/catalog"


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def assert_problem(response: httpx.Response, status: int, code: str, field: str | None = None) -> dict:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == PROBLEM
    body = response.json()
    assert body["status"] == status and body["code"] == code, body
    if field is not None:
        assert body.get("field") == field, body
    return body


def item(sku: str, **kw) -> dict:
    return {"sku": sku, "name": f"Product {sku}", "price": {"amount": 1999, "currency": "PLN"}, **kw}


@pytest.fixture
def api(module_api: str, clean: None) -> httpx.Client:
    with httpx.Client(base_url=module_api, timeout=30) as client:
        yield client


def staff_key(api: httpx.Client, email: str = "ala@example.com") -> dict[str, str]:
    user = api.post("/v1/admin/users", json={"email": email, "name": "Ala"}, headers=ADMIN)
    assert user.status_code == 201, user.text
    key = api.post(f"/v1/admin/users/{user.json()['userId']}/keys", headers=ADMIN)
    assert key.status_code == 201, key.text
    return bearer(key.json()["key"])


def account_key(api: httpx.Client) -> dict[str, str]:
    account = api.post("/v1/accounts", json={"name": "Shop", "wbToken": "t"}, headers=ADMIN).json()
    return bearer(api.post(f"/v1/accounts/{account['accountId']}/keys", headers=ADMIN).json()["key"])


def test_staff_users_and_who_may_do_what(api, sql):
    # Given the admin token creates a staff user and issues their key
    created = api.post("/v1/admin/users", json={"email": "Ala@Example.com", "name": "Ala"}, headers=ADMIN)
    assert created.status_code == 201
    user = created.json()
    assert set(user) == {"userId", "email", "name"} and user["email"] == "ala@example.com"
    issued = api.post(f"/v1/admin/users/{user['userId']}/keys", headers=ADMIN)
    assert issued.status_code == 201 and set(issued.json()) == {"key"}
    staff = bearer(issued.json()["key"])
    seller = account_key(api)

    # Then the same email (any case) is a conflict
    again = api.post("/v1/admin/users", json={"email": "ALA@example.com", "name": "A"}, headers=ADMIN)
    assert_problem(again, 409, "CONFLICT", "email")
    # … the key is kept hashed
    [(stored,)] = sql("SELECT secret_sha256 FROM user_api_keys")
    assert issued.json()["key"].split("_", 2)[2] not in stored  # the secret may hold "_"
    # … a staff key works the catalog but manages no users; an account key does neither
    assert api.get(f"{CATALOG}/products", headers=staff).status_code == 200
    assert_problem(
        api.post("/v1/admin/users", json={"email": "b@example.com", "name": "B"}, headers=staff),
        403,
        "FORBIDDEN",
    )
    assert_problem(api.post(f"/v1/admin/users/{user['userId']}/keys", headers=staff), 403, "FORBIDDEN")
    for path in (
        f"{CATALOG}/products",
        f"{CATALOG}/attributes",
        f"/v1/admin/catalog/products/{uuid.uuid4()}",
    ):
        assert_problem(api.get(path, headers=seller), 403, "FORBIDDEN")
    assert_problem(api.post(f"{CATALOG}/products", json=item("X"), headers=seller), 403, "FORBIDDEN")
    # … and no token, or a bad one, is 401
    assert_problem(api.get(f"{CATALOG}/products"), 401, "UNAUTHORIZED")
    assert_problem(
        api.get(f"{CATALOG}/products", headers=bearer(issued.json()["key"] + "x")), 401, "UNAUTHORIZED"
    )
    assert_problem(api.post(f"/v1/admin/users/{uuid.uuid4()}/keys", headers=ADMIN), 404, "NOT_FOUND")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": "Ala"}, "email"),
        ({"email": "not-an-email", "name": "Ala"}, "email"),
        ({"email": "a@example.com", "name": " "}, "name"),
        ({"email": "a@example.com", "name": "Ala", "role": "owner"}, "role"),
    ],
)
def test_bad_users_are_422_naming_the_field(api, body, field):
    response = api.post("/v1/admin/users", json=body, headers=ADMIN)
    assert_problem(response, 422, "VALIDATION_ERROR", field)


def test_products_create_read_patch_and_audit(api, sql):
    staff = staff_key(api)
    user_id = sql("SELECT id FROM users")[0][0]
    assert (
        api.post(f"{CATALOG}/attributes", json={"code": "color", "label": "Kolor"}, headers=staff).status_code
        == 201
    )

    # When a staff user creates a product
    created = api.post(f"{CATALOG}/products", json=item("CH-1", attributes={"color": "red"}), headers=staff)

    # Then it answers 201 with the product
    assert created.status_code == 201, created.text
    product = created.json()
    assert set(product) == {
        "productId", "sku", "name", "description", "price", "status", "attributes", "createdAt", "updatedAt",
    }  # fmt: skip
    assert (product["status"], product["description"], product["attributes"]) == (
        "draft",
        "",
        {"color": "red"},
    )
    assert created.headers["location"] == f"{CATALOG}/products/{product['productId']}"
    assert api.get(created.headers["location"], headers=staff).json() == product
    # … a taken sku is a conflict
    assert_problem(api.post(f"{CATALOG}/products", json=item("CH-1"), headers=staff), 409, "CONFLICT", "sku")

    # When it is patched
    patched = api.patch(
        f"{CATALOG}/products/{product['productId']}",
        json={
            "status": "active",
            "price": {"amount": 2500, "currency": "PLN"},
            "attributes": {"color": None},
        },
        headers=staff,
    )

    # Then the product changed and one audit row names the user and what changed
    assert patched.status_code == 200, patched.text
    body = patched.json()
    assert (body["status"], body["price"]["amount"], body["attributes"]) == ("active", 2500, {})
    assert sql("SELECT actor, action, entity_id, before, after FROM audit_log WHERE entity = 'product'") == [
        (
            str(user_id),
            "product.update",
            product["productId"],
            {"status": "draft", "price": {"amount": 1999, "currency": "PLN"}, "attributes": {"color": "red"}},
            {"status": "active", "price": {"amount": 2500, "currency": "PLN"}, "attributes": {"color": None}},
        )
    ]
    # … with the admin token the actor is "admin"
    api.patch(f"{CATALOG}/products/{product['productId']}", json={"name": "Krzesło"}, headers=ADMIN)
    assert sql("SELECT actor FROM audit_log ORDER BY id DESC LIMIT 1") == [("admin",)]
    # … and an unknown product is 404
    assert_problem(api.get(f"{CATALOG}/products/{uuid.uuid4()}", headers=staff), 404, "NOT_FOUND")
    assert_problem(
        api.patch(f"{CATALOG}/products/{uuid.uuid4()}", json={"name": "x"}, headers=staff), 404, "NOT_FOUND"
    )
    assert_problem(api.get(f"{CATALOG}/products/not-a-uuid", headers=staff), 404, "NOT_FOUND")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": "x", "price": {"amount": 1, "currency": "PLN"}}, "sku"),
        (item("a b"), "sku"),
        (item("S-1", price={"amount": -1, "currency": "PLN"}), "price.amount"),
        (item("S-1", price={"amount": 1.5, "currency": "PLN"}), "price.amount"),
        (item("S-1", price={"amount": "100", "currency": "PLN"}), "price.amount"),
        (item("S-1", price={"amount": 2**63, "currency": "PLN"}), "price.amount"),
        (item("S-1", price={"amount": 1, "currency": "zł"}), "price.currency"),
        (item("S-1", price={"amount": 1, "currency": "PLN", "tax": 23}), "price.tax"),
        (item("S-1", status="deleted"), "status"),
        (item("S-1", attributes={"ghost": "boo"}), "attributes.ghost"),
        (item("S-1", attributes={"color": {"nested": 1}}), "attributes.color"),
        (item("S-1", stock=5), "stock"),
    ],
)
def test_bad_products_are_422_naming_the_field(api, body, field):
    api.post(f"{CATALOG}/attributes", json={"code": "color", "label": "Kolor"}, headers=ADMIN)
    assert_problem(api.post(f"{CATALOG}/products", json=body, headers=ADMIN), 422, "VALIDATION_ERROR", field)


def test_bad_patches_are_422(api):
    product = api.post(f"{CATALOG}/products", json=item("PP-1"), headers=ADMIN).json()
    url = f"{CATALOG}/products/{product['productId']}"
    for body, field in [
        ({}, None),
        ({"sku": "PP-2"}, "sku"),
        ({"name": None}, "name"),
        ({"status": "gone"}, "status"),
        ({"attributes": {"ghost": 1}}, "attributes.ghost"),
    ]:
        response = api.patch(url, json=body, headers=ADMIN)
        assert_problem(response, 422, "VALIDATION_ERROR", field)
    assert api.get(url, headers=ADMIN).json() == product


def test_a_batch_is_all_or_nothing(api, sql):
    # Given one existing product
    api.post(f"{CATALOG}/products", json=item("TAKEN"), headers=ADMIN)

    # When a batch of 1,000 is posted (a body well over MAX_BODY_BYTES)
    batch = {"items": [item(f"B-{i:04}", description="opis " * 10) for i in range(1000)]}
    created = api.post(f"{CATALOG}/products/batch", json=batch, headers=ADMIN)

    # Then all are created
    assert created.status_code == 201, created.text
    assert created.json() == {"created": 1000}
    assert sql("SELECT count(*) FROM products")[0][0] == 1001

    # When a batch holds a taken sku, or one sku twice
    taken = {"items": [item("C-1"), item("TAKEN"), item("C-2")]}
    twice = {"items": [item("D-1"), item("D-1")]}
    assert_problem(
        api.post(f"{CATALOG}/products/batch", json=taken, headers=ADMIN), 409, "CONFLICT", "items.1.sku"
    )
    assert_problem(
        api.post(f"{CATALOG}/products/batch", json=twice, headers=ADMIN), 409, "CONFLICT", "items.1.sku"
    )

    # Then nothing of either was created
    assert sql("SELECT count(*) FROM products")[0][0] == 1001
    # … and a bad item, an empty or an oversized batch are 422
    bad = {"items": [item("E-1"), item("E-2", status="nope")]}
    assert_problem(
        api.post(f"{CATALOG}/products/batch", json=bad, headers=ADMIN),
        422,
        "VALIDATION_ERROR",
        "items.1.status",
    )
    assert_problem(
        api.post(f"{CATALOG}/products/batch", json={"items": []}, headers=ADMIN),
        422,
        "VALIDATION_ERROR",
        "items",
    )
    too_many = {"items": [item(f"F-{i}") for i in range(1001)]}
    assert_problem(
        api.post(f"{CATALOG}/products/batch", json=too_many, headers=ADMIN), 422, "VALIDATION_ERROR", "items"
    )
    assert sql("SELECT count(*) FROM products")[0][0] == 1001


def test_products_list_pages_newest_first_and_filters_by_status(api):
    batch = {"items": [item(f"L-{i}") for i in range(3)]}
    api.post(f"{CATALOG}/products/batch", json=batch, headers=ADMIN)
    newest = api.post(f"{CATALOG}/products", json=item("L-new", status="active"), headers=ADMIN).json()

    seen, cursor = [], None
    while True:
        page = api.get(
            f"{CATALOG}/products",
            params={"limit": 3, **({"cursor": cursor} if cursor else {})},
            headers=ADMIN,
        ).json()
        seen += [p["sku"] for p in page["items"]]
        if not (cursor := page["nextCursor"]):
            break

    assert seen[0] == "L-new" and sorted(seen[1:]) == ["L-0", "L-1", "L-2"]
    active = api.get(f"{CATALOG}/products", params={"status": "active"}, headers=ADMIN).json()
    assert active == {"items": [newest], "nextCursor": None}
    for params, field in [
        ({"status": "deleted"}, "status"),
        ({"limit": "0"}, "limit"),
        ({"cursor": "???"}, "cursor"),
    ]:
        assert_problem(
            api.get(f"{CATALOG}/products", params=params, headers=ADMIN), 422, "VALIDATION_ERROR", field
        )


def test_attributes_create_list_patch(api, sql):
    staff = staff_key(api)

    created = api.post(
        f"{CATALOG}/attributes", json={"code": "color", "label": "Kolor", "searchable": False}, headers=staff
    )
    assert created.status_code == 201, created.text
    assert {k: v for k, v in created.json().items() if k != "createdAt"} == {
        "code": "color", "label": "Kolor", "searchable": False,
    }  # fmt: skip
    api.post(f"{CATALOG}/attributes", json={"code": "size", "label": "Rozmiar"}, headers=staff)
    assert_problem(
        api.post(f"{CATALOG}/attributes", json={"code": "color", "label": "Barwa"}, headers=staff),
        409,
        "CONFLICT",
        "code",
    )

    flipped = api.patch(f"{CATALOG}/attributes/color", json={"searchable": True}, headers=staff)

    assert flipped.status_code == 200 and flipped.json()["searchable"] is True
    listed = api.get(f"{CATALOG}/attributes", headers=staff).json()["items"]
    assert [(a["code"], a["searchable"]) for a in listed] == [("color", True), ("size", False)]
    assert sql("SELECT action, entity_id, before, after FROM audit_log WHERE entity = 'attribute'") == [
        ("attribute.update", "color", {"searchable": False}, {"searchable": True})
    ]
    assert_problem(
        api.patch(f"{CATALOG}/attributes/nope", json={"label": "x"}, headers=staff), 404, "NOT_FOUND"
    )
    assert_problem(api.patch(f"{CATALOG}/attributes/color", json={}, headers=staff), 422, "VALIDATION_ERROR")
    for body, field in [
        ({"code": "Color", "label": "x"}, "code"),
        ({"code": "c", "label": ""}, "label"),
        ({"code": "c", "label": "x", "searchable": "yes"}, "searchable"),
        ({"code": "c", "label": "x", "type": "text"}, "type"),
    ]:
        assert_problem(
            api.post(f"{CATALOG}/attributes", json=body, headers=staff), 422, "VALIDATION_ERROR", field
        )
