"""The catalog store and staff users against real PostgreSQL: uniqueness, all-or-nothing batches, audit, paging."""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from gatehouse.catalog import NewProduct, Price, ProductPatch
from gatehouse.errors import Conflict, NotFound, ValidationFailed

PLN = Price(1999, "PLN")


def product(sku: str, **kw) -> NewProduct:
    return NewProduct(sku=sku, name=kw.pop("name", f"Product {sku}"), price=kw.pop("price", PLN), **kw)


def count(sql, table: str = "products") -> int:
    return sql(f"SELECT count(*) FROM {table}")[0][0]


# -- products --------------------------------------------------------------------------


def test_a_sku_is_unique(gh, sql):
    # Given a product
    first = gh.catalog_handlers.create_product(product("CH-1"))

    # When another one takes its sku
    with pytest.raises(Conflict) as err:
        gh.catalog_handlers.create_product(product("CH-1", name="Other"))

    # Then it is refused naming the field, and the first is untouched
    assert err.value.field == "sku"
    assert count(sql) == 1
    assert gh.catalog.get_product(first.id).name == "Product CH-1"


def test_concurrent_creates_of_one_sku_make_one_product(gh, sql):
    def create(_: int) -> bool:
        try:
            gh.catalog_handlers.create_product(product("RACE"))
            return True
        except Conflict:
            return False

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(create, range(16)))

    assert results.count(True) == 1
    assert count(sql) == 1


def test_a_created_product_has_its_defaults(gh):
    created = gh.catalog_handlers.create_product(product("CH-2"))
    assert (created.status, created.description, created.attributes) == ("draft", "", {})
    assert (created.price_amount, created.price_currency) == (1999, "PLN")
    assert created.created_at == created.updated_at
    assert gh.catalog.get_product(created.id) == created


def test_a_batch_is_created_in_one_go(gh, sql):
    assert gh.catalog_handlers.create_products([product(f"B-{i}") for i in range(1000)]) == 1000
    assert count(sql) == 1000


def test_a_batch_with_a_taken_sku_creates_nothing(gh, sql):
    # Given an existing product
    gh.catalog_handlers.create_product(product("TAKEN"))

    # When a batch holds its sku in the middle
    batch = [product("N-1"), product("N-2"), product("TAKEN"), product("N-3")]
    with pytest.raises(Conflict) as err:
        gh.catalog_handlers.create_products(batch)

    # Then nothing of the batch was created, and the error names the item
    assert err.value.field == "items.2.sku"
    assert [r[0] for r in sql("SELECT sku FROM products")] == ["TAKEN"]


def test_a_batch_with_one_sku_twice_creates_nothing(gh, sql):
    with pytest.raises(Conflict) as err:
        gh.catalog_handlers.create_products([product("D-1"), product("D-2"), product("D-1")])
    assert err.value.field == "items.2.sku"
    assert count(sql) == 0


def test_a_batch_with_an_invalid_item_creates_nothing(gh, sql):
    with pytest.raises(ValidationFailed) as err:
        gh.catalog_handlers.create_products([product("V-1"), product("V-2", price=Price(-1, "PLN"))])
    assert err.value.field == "items.1.price.amount"
    assert count(sql) == 0


@pytest.mark.parametrize("size", [0, 1001])
def test_a_batch_has_1_to_1000_items(gh, size):
    with pytest.raises(ValidationFailed) as err:
        gh.catalog_handlers.create_products([product(f"S-{i}") for i in range(size)])
    assert err.value.field == "items"


def test_attribute_codes_must_be_defined(gh, sql):
    gh.catalog_handlers.create_attribute("color", "Kolor", searchable=True)

    with pytest.raises(ValidationFailed) as err:
        gh.catalog_handlers.create_product(product("A-1", attributes={"color": "red", "size": "XL"}))
    assert err.value.field == "attributes.size"

    with pytest.raises(ValidationFailed) as err:
        gh.catalog_handlers.create_products([product("A-2"), product("A-3", attributes={"weight": 3})])
    assert err.value.field == "items.1.attributes.weight"
    assert count(sql) == 0

    created = gh.catalog_handlers.create_product(product("A-4", attributes={"color": "red"}))
    assert created.attributes == {"color": "red"}


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"sku": "has space"}, "sku"),
        ({"sku": "x" * 101}, "sku"),
        ({"name": "  "}, "name"),
        ({"name": "a\x00b"}, "name"),
        ({"price": Price(1, "pln")}, "price.currency"),
        ({"price": Price(2**63, "PLN")}, "price.amount"),
        ({"status": "deleted"}, "status"),
        ({"attributes": {"Color": "red"}}, "attributes.Color"),
        ({"attributes": {"color": float("nan")}}, "attributes.color"),
        ({"attributes": {"color": ["red"]}}, "attributes.color"),
    ],
)
def test_invalid_products_are_refused_naming_the_field(gh, change, field):
    gh.catalog_handlers.create_attribute("color", "Kolor", searchable=False)
    with pytest.raises(ValidationFailed) as err:
        gh.catalog_handlers.create_product(product(change.pop("sku", "OK-1"), **change))
    assert err.value.field == field


# -- patch and audit -------------------------------------------------------------------


def audit_rows(sql) -> list:
    return sql("SELECT actor, action, entity, entity_id, before, after FROM audit_log ORDER BY id")


def test_a_patch_writes_one_audit_row_with_before_and_after_of_what_changed(gh, sql):
    # Given a product with two attributes
    gh.catalog_handlers.create_attribute("color", "Kolor", searchable=True)
    gh.catalog_handlers.create_attribute("size", "Rozmiar", searchable=False)
    created = gh.catalog_handlers.create_product(product("P-1", attributes={"color": "red", "size": "M"}))
    actor = str(uuid.uuid4())

    # When a staff user changes its price, keeps its name, recolours it and drops its size
    patch = ProductPatch(
        name=created.name, price=Price(2500, "PLN"), attributes={"color": "blue", "size": None}
    )
    patched = gh.catalog_handlers.patch_product(created.id, patch, actor=actor)

    # Then the product changed, attributes merged …
    assert (patched.price_amount, patched.attributes, patched.name) == (2500, {"color": "blue"}, created.name)
    assert patched.updated_at > created.updated_at
    # … and one audit row names the actor and only the changed fields
    assert audit_rows(sql) == [
        (
            actor,
            "product.update",
            "product",
            str(created.id),
            {"price": {"amount": 1999, "currency": "PLN"}, "attributes": {"color": "red", "size": "M"}},
            {"price": {"amount": 2500, "currency": "PLN"}, "attributes": {"color": "blue", "size": None}},
        )
    ]


def test_a_patch_that_changes_nothing_writes_no_audit_row(gh, sql):
    created = gh.catalog_handlers.create_product(product("P-2"))
    with gh.uow.begin() as tx:
        same, changed = gh.catalog.patch_product(tx, created.id, ProductPatch(status="draft"), actor="admin")
    assert same == created and not changed
    assert audit_rows(sql) == []


def test_a_refused_patch_changes_nothing_and_audits_nothing(gh, sql):
    created = gh.catalog_handlers.create_product(product("P-3"))

    with pytest.raises(ValidationFailed) as err:
        gh.catalog_handlers.patch_product(
            created.id, ProductPatch(status="active", attributes={"ghost": 1}), actor="admin"
        )

    assert err.value.field == "attributes.ghost"
    assert gh.catalog.get_product(created.id) == created
    assert audit_rows(sql) == []


def test_patch_rules(gh):
    created = gh.catalog_handlers.create_product(product("P-4"))
    with pytest.raises(ValidationFailed):
        gh.catalog_handlers.patch_product(created.id, ProductPatch(), actor="admin")
    with pytest.raises(ValidationFailed) as err:
        gh.catalog_handlers.patch_product(created.id, ProductPatch(status="gone"), actor="admin")
    assert err.value.field == "status"
    with pytest.raises(NotFound):
        gh.catalog_handlers.patch_product(uuid.uuid4(), ProductPatch(status="active"), actor="admin")


def test_a_json_true_is_not_the_number_1(gh, sql):
    gh.catalog_handlers.create_attribute("flag", "Flaga", searchable=False)
    created = gh.catalog_handlers.create_product(product("P-5", attributes={"flag": 1}))
    patched = gh.catalog_handlers.patch_product(
        created.id, ProductPatch(attributes={"flag": True}), actor="admin"
    )
    assert patched.attributes == {"flag": True}
    assert len(audit_rows(sql)) == 1


# -- paging ----------------------------------------------------------------------------


def test_products_page_newest_first_and_filter_by_status(gh):
    ids = [gh.catalog_handlers.create_product(product(f"L-{i}")).id for i in range(5)]
    gh.catalog_handlers.patch_product(ids[1], ProductPatch(status="active"), actor="admin")
    gh.catalog_handlers.patch_product(ids[3], ProductPatch(status="active"), actor="admin")

    seen, before = [], None
    while True:
        page = gh.catalog.list_products(limit=2, before=before)
        seen += [p.id for p in page]
        if len(page) < 2:
            break
        before = (page[-1].created_at, page[-1].id)

    assert seen == ids[::-1]
    assert [p.id for p in gh.catalog.list_products(status="active")] == [ids[3], ids[1]]
    assert gh.catalog.list_products(status="archived") == []


def test_products_of_one_batch_page_without_gaps_or_repeats(gh):
    # One batch shares one created_at: the id breaks the tie.
    gh.catalog_handlers.create_products([product(f"T-{i}") for i in range(25)])
    seen, before = [], None
    while page := gh.catalog.list_products(limit=10, before=before):
        seen += [p.sku for p in page]
        before = (page[-1].created_at, page[-1].id)
    assert sorted(seen) == sorted(f"T-{i}" for i in range(25))
    assert len(seen) == 25


# -- attributes ------------------------------------------------------------------------


def test_attributes_create_list_patch(gh, sql):
    gh.catalog_handlers.create_attribute("size", "Rozmiar", searchable=False)
    gh.catalog_handlers.create_attribute("color", "Kolor", searchable=False)
    with pytest.raises(Conflict) as err:
        gh.catalog_handlers.create_attribute("color", "Barwa", searchable=True)
    assert err.value.field == "code"

    flipped, _ = gh.catalog_handlers.patch_attribute("color", searchable=True, actor="admin")

    assert flipped.searchable and flipped.label == "Kolor"
    assert [(a.code, a.searchable) for a in gh.catalog.list_attributes()] == [
        ("color", True),
        ("size", False),
    ]
    assert audit_rows(sql) == [
        ("admin", "attribute.update", "attribute", "color", {"searchable": False}, {"searchable": True})
    ]
    with pytest.raises(NotFound):
        gh.catalog_handlers.patch_attribute("nope", label="x", actor="admin")
    with pytest.raises(ValidationFailed):
        gh.catalog_handlers.patch_attribute("color", actor="admin")


# -- staff users -----------------------------------------------------------------------


def test_a_users_email_is_unique_regardless_of_case(gh, sql):
    user = gh.account_handlers.create_user("Ala@Example.com", "Ala")
    assert user.email == "ala@example.com" and user.role == "admin"
    with pytest.raises(Conflict) as err:
        gh.account_handlers.create_user("ala@EXAMPLE.com", "Another Ala")
    assert err.value.field == "email"
    assert count(sql, "users") == 1


def test_a_user_key_authenticates_as_its_user_and_is_stored_hashed(gh, sql):
    user = gh.account_handlers.create_user("ola@example.com", "Ola")
    key = gh.account_handlers.issue_user_key(user.id, actor="admin")

    principal = gh.accounts.authenticate(key)

    assert key.startswith("ghu_")
    assert principal.admin and principal.user_id == user.id and principal.account_id is None
    assert principal.actor == str(user.id) and not principal.bootstrap
    [(stored,)] = sql("SELECT secret_sha256 FROM user_api_keys")
    assert key.split("_", 2)[2] not in stored  # the secret may hold "_" itself
    assert gh.accounts.authenticate(key + "x") is None
    assert gh.accounts.authenticate("ghu_nope_nope") is None
    with pytest.raises(NotFound):
        gh.account_handlers.issue_user_key(uuid.uuid4(), actor="admin")


def test_the_admin_token_and_account_keys_stay_as_they_were(gh, settings):
    admin = gh.accounts.authenticate(settings.admin_token.get_secret_value())
    assert admin.admin and admin.bootstrap and admin.user_id is None and admin.actor == "admin"
    account = gh.account_handlers.create_account("Shop", "wb-token")
    keyed = gh.accounts.authenticate(gh.account_handlers.issue_account_key(account.id, actor="admin"))
    assert not keyed.admin and keyed.account_id == account.id and keyed.user_id is None
