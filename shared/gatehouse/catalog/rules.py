"""Catalog rules, pure: what a valid product, patch and attribute are, and what a patch changes.

The API's schemas take their limits from here, and every path that changes a
product (the admin API, bulk operations) checks through these functions, so
one rule holds everywhere. Errors name the offending field as the API spells
it (``price.amount``, ``attributes.color``), under a prefix for batch items
(``items.3.sku``).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from gatehouse.errors import Conflict, ValidationFailed

STATUSES = ("draft", "active", "archived")
SKU_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:/-]*$"
SKU_MAX = 100
CODE_PATTERN = r"^[a-z][a-z0-9_]*$"
CODE_MAX = 64
CURRENCY_PATTERN = r"^[A-Z]{3}$"
# The active ISO 4217 codes (iso4217.txt names its source and date).
CURRENCIES = frozenset(
    line.strip()
    for line in resources.files(__package__).joinpath("iso4217.txt").read_text("ascii").splitlines()
    if line.strip() and not line.startswith("#")
)
# The rules above in words, as errors say them.
SKU_RULE = (
    f"a sku is letters, digits and . _ : / -, starting with a letter or digit, at most {SKU_MAX} characters"
)
CODE_RULE = (
    "an attribute code is lower-case letters, digits and _, starting with a letter, "
    f"at most {CODE_MAX} characters"
)
CURRENCY_RULE = "must be a three-letter ISO 4217 currency code such as PLN"
NAME_MAX = 500
DESCRIPTION_MAX = 10_000
LABEL_MAX = 200
# A string attribute value, in characters; a product holds at most ATTRIBUTES_MAX attributes.
VALUE_MAX = 1_000
ATTRIBUTES_MAX = 100
# Prices are minor units in a PostgreSQL bigint.
AMOUNT_MAX = 2**63 - 1
# Products per POST /v1/admin/catalog/products/batch.
BATCH_MAX = 1_000

# A value of a product attribute: a string, a number or a boolean (null in a patch removes it).
Value = str | int | float | bool


@dataclass(frozen=True)
class Price:
    amount: int
    currency: str

    def as_json(self) -> dict[str, Any]:
        return {"amount": self.amount, "currency": self.currency}


@dataclass(frozen=True)
class NewProduct:
    sku: str
    name: str
    price: Price
    description: str = ""
    status: str = "draft"
    attributes: dict[str, Value] = field(default_factory=dict)


@dataclass(frozen=True)
class ProductPatch:
    """Fields left None stay as they are; ``attributes`` merges (a None value removes the code)."""

    name: str | None = None
    description: str | None = None
    price: Price | None = None
    status: str | None = None
    attributes: dict[str, Value | None] | None = None

    def is_empty(self) -> bool:
        return all(v is None for v in (self.name, self.description, self.price, self.status, self.attributes))


@dataclass(frozen=True)
class Change:
    """What a patch does to one product: the new column values, and before/after of the changed fields."""

    columns: dict[str, Any]
    before: dict[str, Any]
    after: dict[str, Any]


def _text(value: str, field: str, *, max_len: int, blank_ok: bool = False) -> None:
    if "\x00" in value:
        raise ValidationFailed(f"{field} must not contain NUL characters", field=field)
    if not blank_ok and not value.strip():
        raise ValidationFailed(f"{field} must not be blank", field=field)
    if len(value) > max_len:
        raise ValidationFailed(f"{field} may be at most {max_len} characters", field=field)


def check_code(code: str, field: str = "code") -> None:
    if len(code) > CODE_MAX or not re.fullmatch(CODE_PATTERN, code):
        raise ValidationFailed(f"{field}: {CODE_RULE}", field=field)


def check_label(label: str, field: str = "label") -> None:
    _text(label, field, max_len=LABEL_MAX)


def check_sku(sku: str, field: str = "sku") -> None:
    if len(sku) > SKU_MAX or not re.fullmatch(SKU_PATTERN, sku):
        raise ValidationFailed(f"{field}: {SKU_RULE}", field=field)


def check_price(price: Price, field: str = "price") -> None:
    if isinstance(price.amount, bool) or not isinstance(price.amount, int):
        raise ValidationFailed(f"{field}.amount must be an integer (minor units)", field=f"{field}.amount")
    if not 0 <= price.amount <= AMOUNT_MAX:
        raise ValidationFailed(f"{field}.amount must be from 0 to {AMOUNT_MAX}", field=f"{field}.amount")
    check_currency(price.currency, f"{field}.currency")


def check_currency(currency: str, field: str = "currency") -> None:
    if currency not in CURRENCIES:
        raise ValidationFailed(f"{field}: {currency_problem(currency)}", field=field)


def currency_problem(currency: str) -> str:
    """What is wrong with a currency that is not an active ISO 4217 code."""
    if isinstance(currency, str) and re.fullmatch(CURRENCY_PATTERN, currency):
        return f"{currency} is not an active ISO 4217 currency code (e.g. PLN, EUR, USD)"
    return CURRENCY_RULE


def check_status(status: str, field: str = "status") -> None:
    if status not in STATUSES:
        raise ValidationFailed(f"{field} must be one of {', '.join(STATUSES)}", field=field)


def check_value(value: Any, field: str, *, removable: bool = False) -> None:
    if value is None and removable:
        return
    if isinstance(value, str):
        _text(value, field, max_len=VALUE_MAX, blank_ok=True)
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise ValidationFailed(f"{field} must be a finite number", field=field)
    elif not isinstance(value, int | bool):
        kinds = "a string, a number, a boolean" + (" or null (to remove it)" if removable else "")
        raise ValidationFailed(f"{field} must be {kinds}", field=field)


def check_attributes(
    attributes: dict[str, Any], field: str = "attributes", *, removable: bool = False
) -> None:
    for code, value in attributes.items():
        check_code(code, f"{field}.{code}")
        check_value(value, f"{field}.{code}", removable=removable)


def check_new(product: NewProduct, prefix: str = "") -> None:
    check_sku(product.sku, f"{prefix}sku")
    _text(product.name, f"{prefix}name", max_len=NAME_MAX)
    _text(product.description, f"{prefix}description", max_len=DESCRIPTION_MAX, blank_ok=True)
    check_price(product.price, f"{prefix}price")
    check_status(product.status, f"{prefix}status")
    check_attributes(product.attributes, f"{prefix}attributes")
    if len(product.attributes) > ATTRIBUTES_MAX:
        raise ValidationFailed(
            f"a product has at most {ATTRIBUTES_MAX} attributes", field=f"{prefix}attributes"
        )


def check_batch(products: list[NewProduct]) -> None:
    """Each item valid, at most BATCH_MAX of them, no sku twice (a second one would collide: 409)."""
    if not products:
        raise ValidationFailed("items must hold at least one product", field="items")
    if len(products) > BATCH_MAX:
        raise ValidationFailed(f"items may hold at most {BATCH_MAX} products", field="items")
    seen: dict[str, int] = {}
    for i, product in enumerate(products):
        check_new(product, f"items.{i}.")
        if product.sku in seen:
            raise Conflict(
                f"sku {product.sku} appears twice in the batch (items {seen[product.sku]} and {i})",
                field=f"items.{i}.sku",
            )
        seen[product.sku] = i


def check_patch(patch: ProductPatch) -> None:
    if patch.is_empty():
        raise ValidationFailed("the patch changes nothing: send at least one field", field=None)
    if patch.name is not None:
        _text(patch.name, "name", max_len=NAME_MAX)
    if patch.description is not None:
        _text(patch.description, "description", max_len=DESCRIPTION_MAX, blank_ok=True)
    if patch.price is not None:
        check_price(patch.price)
    if patch.status is not None:
        check_status(patch.status)
    if patch.attributes is not None:
        check_attributes(patch.attributes, removable=True)


def apply(
    patch: ProductPatch,
    *,
    name: str,
    description: str,
    price: Price,
    status: str,
    attributes: dict[str, Any],
) -> Change:
    """What ``patch`` changes on a product with these values; unchanged fields are left out."""
    columns: dict[str, Any] = {}
    before: dict[str, Any] = {}
    after: dict[str, Any] = {}
    for key, old, new in (
        ("name", name, patch.name),
        ("description", description, patch.description),
        ("status", status, patch.status),
    ):
        if new is not None and new != old:
            columns[key], before[key], after[key] = new, old, new
    if patch.price is not None and patch.price != price:
        columns["price_amount"], columns["price_currency"] = patch.price.amount, patch.price.currency
        before["price"], after["price"] = price.as_json(), patch.price.as_json()
    if patch.attributes:
        merged = dict(attributes)
        old_values, new_values = {}, {}
        for code, value in patch.attributes.items():
            current = attributes.get(code)
            # A JSON true is not 1: compare type and value.
            if (type(current), current) == (type(value), value):
                continue
            old_values[code], new_values[code] = current, value
            if value is None:
                merged.pop(code, None)
            else:
                merged[code] = value
        if new_values:
            if len(merged) > ATTRIBUTES_MAX:
                raise ValidationFailed(
                    f"a product has at most {ATTRIBUTES_MAX} attributes", field="attributes"
                )
            columns["attributes"] = merged
            before["attributes"], after["attributes"] = old_values, new_values
    return Change(columns=columns, before=before, after=after)
