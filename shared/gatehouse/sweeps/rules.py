"""The rules of carts, price lists and RFQs: their statuses, what a request may hold, and when each one moves.

Status changes that depend only on time are never made by a request process:
each is a sweep (``gatehouse.sweeps.sweep``) run as a job on a worker. The
moves here say which status becomes which, and when:

- a cart ``open`` and untouched for CART_ABANDON_AFTER_MS becomes ``abandoned``;
- a price list ``scheduled`` becomes ``active`` at ``valid_from`` and an
  ``active`` one ``expired`` at ``valid_to`` (a scheduled one already past
  ``valid_to`` goes straight to ``expired``);
- an RFQ ``open`` or ``quoted`` becomes ``expired`` at ``expires_at``.

At creation a price list's and an RFQ's status follows the same times, read
on the database clock (``*_STATUS_AT_CREATION``), so a sweep never has to
catch up with a row that was born late.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from gatehouse.errors import Conflict, ValidationFailed

CART_STATUSES = ("open", "abandoned", "converted")
PRICE_LIST_STATUSES = ("scheduled", "active", "expired")
RFQ_STATUSES = ("open", "quoted", "expired")

CUSTOMER_REF_MAX = 200
NAME_MAX = 200
ITEMS_MAX = 500
QUANTITY_MAX = 1_000_000
# Times outside these years are refused: they are typing mistakes, and far ones overflow in UTC.
YEAR_MIN, YEAR_MAX = 2000, 9998

# At creation (SQL over the bound :valid_from / :valid_to / :expires_at, on the database clock).
PRICE_LIST_STATUS_AT_CREATION = (
    "CASE WHEN :valid_to <= now() THEN 'expired' WHEN :valid_from <= now() THEN 'active' ELSE 'scheduled' END"
)
RFQ_STATUS_AT_CREATION = "CASE WHEN :expires_at <= now() THEN 'expired' ELSE 'open' END"


def check_time(at: datetime, field: str) -> None:
    if at.tzinfo is None or at.utcoffset() is None:
        raise ValidationFailed(f"{field} needs a time zone (e.g. 2026-12-01T10:00:00Z)", field=field)
    if not YEAR_MIN <= at.year <= YEAR_MAX:
        raise ValidationFailed(f"{field} must be between the years {YEAR_MIN} and {YEAR_MAX}", field=field)


def check_validity(valid_from: datetime, valid_to: datetime) -> None:
    check_time(valid_from, "validFrom")
    check_time(valid_to, "validTo")
    if valid_to <= valid_from:
        raise ValidationFailed("validTo must be after validFrom", field="validTo")


def check_text(value: str, field: str, max_length: int) -> None:
    if not value.strip() or "\x00" in value or len(value) > max_length:
        raise ValidationFailed(f"{field} must be 1 to {max_length} visible characters", field=field)


def check_items(items: list[dict[str, Any]]) -> None:
    """A cart's items: ``[{"sku", "quantity"}]``, each sku once (the API's schema says the same)."""
    if len(items) > ITEMS_MAX:
        raise ValidationFailed(f"a cart holds at most {ITEMS_MAX} items", field="items")
    seen: set[str] = set()
    for n, item in enumerate(items):
        if set(item) != {"sku", "quantity"}:
            raise ValidationFailed("an item is {sku, quantity}", field=f"items.{n}")
        quantity = item["quantity"]
        if isinstance(quantity, bool) or not isinstance(quantity, int) or not 1 <= quantity <= QUANTITY_MAX:
            raise ValidationFailed(f"quantity must be 1 to {QUANTITY_MAX}", field=f"items.{n}.quantity")
        if item["sku"] in seen:
            raise ValidationFailed(f"sku {item['sku']} is in the cart twice", field=f"items.{n}.sku")
        seen.add(item["sku"])


def check_editable(status: str, cart_id: object) -> None:
    """A converted cart became an order: its items are history. An abandoned one may come back."""
    if status == "converted":
        raise Conflict(f"cart {cart_id} is converted; its items cannot change", code="CART_CONVERTED")
