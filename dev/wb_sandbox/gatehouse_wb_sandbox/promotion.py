"""Promotion (advert-api): campaigns, their daily statistics, bids and minimum bids."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from gatehouse_wb_sandbox.calls import Call, Invalid, Reply, body_object, id_list, integer, moment
from gatehouse_wb_sandbox.data import Campaign, day_stats, min_bid

ADVERT_IDS_MAX = 50
BIDS_MAX = 50  # per array of a bids change
FULLSTATS_MAX_DAYS = 31
NOT_DELETED = "2100-01-01T00:00:00+03:00"  # WB's "deleted" of a live campaign


def _bid(call: Call, campaign: Campaign, nm_id: int, placement: str) -> int:
    generated = campaign.bids[nm_id, placement]
    return call.sandbox.bids.get(call.seller, campaign.advert_id, nm_id, placement, generated)


def _advert(call: Call, campaign: Campaign) -> dict[str, Any]:
    changed = call.sandbox.bids.changed(call.seller, campaign.advert_id)
    updated = max(campaign.updated, changed) if changed else campaign.updated
    return {
        "bid_type": campaign.bid_type,
        "currency": "RUB",
        "id": campaign.advert_id,
        "nm_settings": [
            {
                "bids_kopecks": {p: _bid(call, campaign, nm_id, p) for p in ("search", "recommendations")},
                "nm_id": nm_id,
                "subject": {"id": call.data.by_nm[nm_id].subject_id, "name": call.data.by_nm[nm_id].subject},
            }
            for nm_id in campaign.nm_ids
        ],
        "restrictions": {"can_change_nms": campaign.status in (4, 9, 11)},
        "settings": {
            "name": campaign.name,
            "payment_type": campaign.payment_type,
            "placements": dict(campaign.placements),
        },
        "status": campaign.status,
        "timestamps": {
            "created": campaign.created.isoformat(),
            "deleted": NOT_DELETED,
            "started": campaign.started.isoformat() if campaign.started else None,
            "updated": updated.isoformat(),
        },
    }


def adverts(call: Call) -> Reply:
    ids = set(id_list(call.query.get("ids"), "ids", high=ADVERT_IDS_MAX))
    statuses = set(id_list(call.query.get("statuses"), "statuses", high=10))
    payment_type = call.query.get("payment_type")
    if payment_type not in (None, "cpm", "cpc"):
        raise Invalid("invalid payment_type value")
    chosen = [
        c
        for c in call.data.campaigns
        if (not ids or c.advert_id in ids)
        and (not statuses or c.status in statuses)
        and payment_type in (None, c.payment_type)
    ]
    return Reply(200, {"adverts": [_advert(call, c) for c in chosen]})


def _with_rates(totals: dict[str, Any]) -> dict[str, Any]:
    views, clicks = totals["views"], totals["clicks"]
    return {
        **totals,
        "sum": round(totals["sum"], 2),
        "sum_price": round(totals["sum_price"], 2),
        "ctr": round(clicks / views * 100, 2) if views else 0,
        "cpc": round(totals["sum"] / clicks, 2) if clicks else 0,
        "cr": round(totals["orders"] / clicks * 100, 2) if clicks else 0,
    }


def _add(into: dict[str, Any], stats: dict[str, Any]) -> None:
    for key, value in stats.items():
        into[key] = into.get(key, 0) + value


def fullstats(call: Call) -> Reply:
    ids = id_list(call.query.get("ids"), "ids", high=ADVERT_IDS_MAX, required=True)
    begin = moment(call.query.get("beginDate"), "beginDate").date()
    end = moment(call.query.get("endDate"), "endDate").date()
    if begin > end:
        raise Invalid("beginDate: must not be after endDate")
    if (end - begin).days + 1 > FULLSTATS_MAX_DAYS:
        raise Invalid(f"the period must not exceed {FULLSTATS_MAX_DAYS} days")
    spec, out = call.sandbox.spec, []
    for campaign in (c for c in call.data.campaigns if c.advert_id in ids):
        days, campaign_totals = [], {}
        for offset in range((end - begin).days + 1):
            day = begin + timedelta(days=offset)
            nms, day_totals = [], {}
            for nm_id in campaign.nm_ids:
                stats = day_stats(spec, call.seller, campaign, nm_id, day)
                if stats:
                    nms.append({"nmId": nm_id, "name": call.data.by_nm[nm_id].title, **_with_rates(stats)})
                    _add(day_totals, stats)
            if nms:
                _add(campaign_totals, day_totals)
                app = {"appType": 1, **_with_rates(day_totals), "nms": nms}
                days.append(
                    {"date": f"{day.isoformat()}T00:00:00+03:00", **_with_rates(day_totals), "apps": [app]}
                )
        if days:
            out.append(
                {
                    "advertId": campaign.advert_id,
                    **_with_rates(campaign_totals),
                    "currency": "RUB",
                    "days": days,
                    "boosterStats": [],
                }
            )
    return Reply(200, out)


def _campaign(call: Call, advert_id: Any, name: str) -> Campaign:
    wanted = integer(advert_id, name, low=1)
    for campaign in call.data.campaigns:
        if campaign.advert_id == wanted:
            return campaign
    raise Invalid(f"advert {wanted} not found")


def _list(value: Any, name: str, high: int) -> list[Any]:
    if not isinstance(value, list) or not value:
        raise Invalid(f"{name}: must be a non-empty list")
    if len(value) > high:
        raise Invalid(f"{name}: at most {high} items")
    return value


def bids(call: Call) -> Reply:
    """Validates all changes first, then applies them together; echoes what was set."""
    changes, echo = [], []
    for item in _list(body_object(call).get("bids"), "bids", BIDS_MAX):
        if not isinstance(item, dict):
            raise Invalid("bids: each item is an object")
        campaign = _campaign(call, item.get("advert_id"), "advert_id")
        if campaign.status not in (4, 9, 11):
            raise Invalid(f"advert {campaign.advert_id} has status {campaign.status}; bids cannot be changed")
        allowed = ("combined",) if campaign.bid_type == "unified" else ("search", "recommendations")
        nm_bids = []
        for nm_bid in _list(item.get("nm_bids"), "nm_bids", BIDS_MAX):
            if not isinstance(nm_bid, dict):
                raise Invalid("nm_bids: each item is an object")
            nm_id = integer(nm_bid.get("nm_id"), "nm_id", low=1)
            if nm_id not in campaign.nm_ids:
                raise Invalid(f"nm {nm_id} is not in advert {campaign.advert_id}")
            placement = nm_bid.get("placement")
            if placement not in allowed:
                raise Invalid(f"placement: must be one of {', '.join(allowed)} for a {campaign.bid_type} bid")
            kopecks = integer(nm_bid.get("bid_kopecks"), "bid_kopecks", low=1)
            floor = min_bid(call.sandbox.spec, call.seller, nm_id, campaign.payment_type, placement)
            if kopecks < floor:
                raise Invalid(f"wrong bid value: {kopecks}; min: {floor}")
            targets = ("search", "recommendations") if placement == "combined" else (placement,)
            changes += [(campaign.advert_id, nm_id, target, kopecks) for target in targets]
            nm_bids.append({"nm_id": nm_id, "bid_kopecks": kopecks, "placement": placement})
        echo.append({"advert_id": campaign.advert_id, "nm_bids": nm_bids})
    call.sandbox.bids.set(call.seller, changes)
    return Reply(200, {"bids": echo, "currency": "RUB"})


def min_bids(call: Call) -> Reply:
    body = body_object(call)
    _campaign(call, body.get("advert_id"), "advert_id")
    nm_ids = id_list(_list(body.get("nm_ids"), "nm_ids", 100), "nm_ids", high=100)
    payment_type = body.get("payment_type")
    if payment_type not in ("cpm", "cpc"):
        raise Invalid("payment_type: must be cpm or cpc")
    types = _list(body.get("placement_types"), "placement_types", 3)
    if any(t not in ("combined", "search", "recommendation") for t in types):
        raise Invalid("placement_types: must be combined, search or recommendation")
    spec = call.sandbox.spec
    # min_bid names the placement as PATCH bids does ("recommendations").
    names = {"combined": "combined", "search": "search", "recommendation": "recommendations"}
    return Reply(
        200,
        {
            "bids": [
                {
                    "nm_id": nm_id,
                    "bids": [
                        {
                            "type": t,
                            "value": min_bid(spec, call.seller, nm_id, payment_type, names[t]),
                            "currency": "RUB",
                        }
                        for t in types
                    ],
                }
                for nm_id in nm_ids
            ]
        },
    )
