"""Content: the cards list, paged by the (updatedAt, nmID) cursor."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from gatehouse_wb_sandbox.calls import Call, Invalid, Reply, body_object, integer, moment
from gatehouse_wb_sandbox.data import MSK, Product, utc_time

CARDS_MAX_LIMIT = 100
CARDS_DEFAULT_LIMIT = 10


def _card(seller: str, product: Product) -> dict[str, Any]:
    nm = product.nm_id
    photo = f"https://basket-01.wbbasket.ru/vol{nm // 100_000}/part{nm // 1_000}/{nm}/images"
    return {
        "nmID": nm,
        "imtID": product.imt_id,
        "nmUUID": str(uuid.uuid5(uuid.NAMESPACE_OID, f"{seller}/{nm}")),
        "subjectID": product.subject_id,
        "subjectName": product.subject,
        "vendorCode": product.vendor_code,
        "brand": product.brand,
        "title": product.title,
        "description": f"{product.title}: описание для песочницы.",
        "needKiz": False,
        "photos": [
            {"big": f"{photo}/big/{i}.webp", "c246x328": f"{photo}/c246x328/{i}.webp"}
            for i in range(1, product.photos + 1)
        ],
        "video": "",
        "dimensions": {"length": 30, "width": 20, "height": 10, "weightBrutto": 0.5, "isValid": True},
        "characteristics": [{"id": 14177449, "name": "Цвет", "value": ["разноцветный"]}],
        "sizes": [
            {"chrtID": s.chrt_id, "techSize": s.tech_size, "wbSize": "", "skus": [s.barcode]}
            for s in product.sizes
        ],
        "tags": [],
        "createdAt": utc_time(product.created_at),
        "updatedAt": utc_time(product.updated_at),
    }


def _matches_filter(product: Product, flt: dict[str, Any]) -> bool:
    text = str(flt.get("textSearch") or "").lower()
    with_photo = flt.get("withPhoto", -1)
    return (
        (
            not text
            or text in product.vendor_code.lower()
            or text in product.title.lower()
            or text == str(product.nm_id)
        )
        and (with_photo == -1 or (product.photos > 0) == (with_photo == 1))
        and (not flt.get("brands") or product.brand in flt["brands"])
        and (not flt.get("objectIDs") or product.subject_id in flt["objectIDs"])
        and (not flt.get("imtID") or product.imt_id == flt["imtID"])
    )


def cards(call: Call) -> Reply:
    """Cards by (updatedAt, nmID), newest first unless sort.ascending; the cursor is the last card's pair."""
    settings = body_object(call).get("settings")
    if not isinstance(settings, dict):
        raise Invalid("settings: field required")
    cursor, flt, sort = (settings.get(key) or {} for key in ("cursor", "filter", "sort"))
    if not all(isinstance(part, dict) for part in (cursor, flt, sort)):
        raise Invalid("settings: cursor, filter and sort must be objects")
    limit = integer(
        cursor.get("limit"), "cursor.limit", default=CARDS_DEFAULT_LIMIT, low=1, high=CARDS_MAX_LIMIT
    )
    ascending = sort.get("ascending") is True

    def position(product: Product) -> tuple[datetime, int]:
        return product.updated_at.astimezone(MSK).replace(tzinfo=None), product.nm_id

    chosen = sorted(
        (p for p in call.data.products if _matches_filter(p, flt)), key=position, reverse=not ascending
    )
    if cursor.get("updatedAt") and cursor.get("nmID"):
        after = (moment(cursor["updatedAt"], "cursor.updatedAt"), integer(cursor["nmID"], "cursor.nmID"))
        chosen = [p for p in chosen if (position(p) > after if ascending else position(p) < after)]
    page = chosen[:limit]
    if page:
        position_out = {"updatedAt": utc_time(page[-1].updated_at), "nmID": page[-1].nm_id}
    else:  # nothing after the cursor: it comes back as sent (without what was not sent)
        position_out = {key: cursor[key] for key in ("updatedAt", "nmID") if cursor.get(key) is not None}
    return Reply(
        200,
        {"cards": [_card(call.seller, p) for p in page], "cursor": {**position_out, "total": len(page)}},
    )
