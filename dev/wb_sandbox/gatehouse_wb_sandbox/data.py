"""Deterministic WB data per seller.

Everything a seller sees is drawn from random generators seeded with
sha256(seed, seller, what), so two sandboxes with the same seed and the same
anchor serve identical data, and a call pages the same way however often it is
repeated. The anchor is "today" in Moscow time when the sandbox starts: the
history covers the ``history_days`` complete days before it, so data does not
move while a test (or a `make run` day) pages through it.

Times in statistics rows are Moscow wall-clock time without an offset, as WB
sends them; the feeds' ``lastChangeDate`` is the 30-minute update run after a
change, shared by every row that run changed. Report rows are camelCase with
money as decimal strings (finance API).
"""

from __future__ import annotations

import hashlib
import random
import uuid
from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta, timezone
from functools import lru_cache
from typing import Any

MSK = timezone(timedelta(hours=3))
HISTORY_DAYS = 90
NEVER = "0001-01-01T00:00:00"  # WB's "no date" (e.g. cancelDate of a live order)

# (id, name, federal district, region)
WAREHOUSES = (
    (507, "Коледино", "Центральный федеральный округ", "Московская область"),
    (117501, "Подольск", "Центральный федеральный округ", "Московская область"),
    (120762, "Электросталь", "Центральный федеральный округ", "Московская область"),
    (117986, "Казань", "Приволжский федеральный округ", "Республика Татарстан"),
    (130744, "Краснодар", "Южный федеральный округ", "Краснодарский край"),
    (1733, "Екатеринбург - Испытателей 14г", "Уральский федеральный округ", "Свердловская область"),
    (686, "Новосибирск", "Сибирский федеральный округ", "Новосибирская область"),
    (206348, "Тула", "Центральный федеральный округ", "Тульская область"),
)
# (subject id, subject, category, sizes)
SUBJECTS = (
    (192, "Футболки", "Одежда", ("S", "M", "L", "XL")),
    (69, "Платья", "Одежда", ("42", "44", "46", "48")),
    (105, "Кроссовки", "Обувь", ("39", "40", "41", "42", "43")),
    (52, "Кошельки", "Аксессуары", ("0",)),
    (2560, "Рюкзаки", "Аксессуары", ("0",)),
    (1229, "Пледы", "Дом", ("150x200", "200x220")),
    (3091, "Кружки", "Дом", ("0",)),
)
BRANDS = ("Северный ветер", "Lumen", "Mokko", "Тёплый дом", "Urban Fox", "Vesna")
RETURN_SHARE, BUYOUT_SHARE, CANCEL_SHARE = 0.07, 0.8, 0.1


def moscow_today() -> date:
    return datetime.now(MSK).date()


def wb_time(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S")


def utc_time(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True)
class DataSpec:
    seed: int
    anchor: date  # first day without data: the sandbox's "today"
    rows_per_day: int  # orders per day; sales and report rows follow from them
    history_days: int = HISTORY_DAYS

    @property
    def start(self) -> datetime:
        return datetime.combine(self.anchor - timedelta(days=self.history_days), time())

    @property
    def end(self) -> datetime:
        return datetime.combine(self.anchor, time())


@dataclass(frozen=True)
class Size:
    chrt_id: int
    tech_size: str
    barcode: str


@dataclass(frozen=True)
class Product:
    nm_id: int
    imt_id: int
    vendor_code: str
    brand: str
    subject_id: int
    subject: str
    category: str
    title: str
    sizes: tuple[Size, ...]
    price: int  # roubles, before the seller's discount
    discount: int  # percent
    photos: int
    created_at: datetime
    updated_at: datetime  # unique per seller: the catalog cursor orders by it


@dataclass(frozen=True)
class Campaign:
    advert_id: int
    name: str
    bid_type: str  # manual | unified
    payment_type: str  # cpm | cpc
    status: int  # 4 ready, 7 finished, 9 active, 11 paused
    placements: dict[str, bool]
    nm_ids: tuple[int, ...]
    bids: dict[tuple[int, str], int]  # (nm_id, placement) -> kopecks; placement search|recommendations
    created: datetime
    started: datetime | None
    updated: datetime


@dataclass
class Dataset:
    products: list[Product]
    orders: list[dict[str, Any]]  # by lastChangeDate (never decreasing; some rows share one)
    order_keys: list[datetime]
    sales: list[dict[str, Any]]
    sale_keys: list[datetime]
    report: list[dict[str, Any]]  # by rrdId; rrDate never decreases along it
    report_ids: list[int]
    report_days: list[date]
    stocks: list[dict[str, Any]]
    campaigns: list[Campaign]
    by_nm: dict[int, Product]


def rng(spec: DataSpec, seller: str, *what: object) -> random.Random:
    key = ":".join(str(part) for part in (spec.seed, seller, *what))
    return random.Random(int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big"))


def _unique_ints(r: random.Random, count: int, low: int, span: int) -> list[int]:
    seen: set[int] = set()
    while len(seen) < count:
        seen.add(low + r.randrange(span))
    return sorted(seen)


def _barcode(r: random.Random) -> str:
    return "20" + "".join(str(r.randrange(10)) for _ in range(11))


def _products(spec: DataSpec, seller: str) -> list[Product]:
    r = rng(spec, seller, "products")
    count = r.randint(12, 30)
    nm_ids = _unique_ints(r, count, 100_000_000, 400_000_000)
    # Distinct update times (one per second at least) keep the catalog cursor unambiguous.
    updates = _unique_ints(r, count, 0, spec.history_days * 86_400)
    r.shuffle(updates)
    chrt_ids = iter(_unique_ints(r, count * 5, 200_000_000, 700_000_000))
    products = []
    for number, nm_id in enumerate(nm_ids):
        subject_id, subject, category, sizes = r.choice(SUBJECTS)
        updated = datetime.combine(spec.anchor, time(), MSK) - timedelta(seconds=updates[number] + 1)
        updated += timedelta(microseconds=r.randrange(1_000_000))
        vendor_code = f"{subject[:3].upper()}-{number + 1:03d}"
        brand = r.choice(BRANDS)
        products.append(
            Product(
                nm_id=nm_id,
                imt_id=nm_id // 10 + 7,
                vendor_code=vendor_code,
                brand=brand,
                subject_id=subject_id,
                subject=subject,
                category=category,
                title=f"{subject} {brand} {vendor_code}",
                sizes=tuple(Size(next(chrt_ids), size, _barcode(r)) for size in sizes),
                price=r.randrange(500, 8_000, 10),
                discount=r.choice((0, 10, 15, 20, 30, 40, 50)),
                photos=r.choice((0, 1, 3, 5)),
                created_at=updated - timedelta(days=r.randint(30, 400)),
                updated_at=updated,
            )
        )
    return products


UPDATE_MINUTES = 30  # WB's statistics: "data is updated once every 30 minutes"


def _change_keys(spec: DataSpec, rows: list[dict[str, Any]], moments: list[datetime]) -> list[datetime]:
    """Sort rows by lastChangeDate and set it: the update run after each change.

    Like WB's, the feeds are updated in runs (every 30 minutes; each run's
    second is fixed by the seed), so every change of one run shares its
    ``lastChangeDate``: ``dateFrom = last lastChangeDate`` returns all rows of
    that run again. Never after the history's end.
    """
    last_key = spec.end - timedelta(seconds=1)
    keys_of: list[datetime] = []
    for moment in moments:
        run = datetime.combine(moment.date(), time()) + timedelta(
            minutes=-(-(moment.hour * 60 + moment.minute + 1) // UPDATE_MINUTES) * UPDATE_MINUTES
        )
        second = int(hashlib.sha256(f"{spec.seed}:{run.isoformat()}".encode()).hexdigest()[:4], 16) % 60
        keys_of.append(min(run + timedelta(seconds=second), last_key))
    order = sorted(range(len(rows)), key=lambda i: (keys_of[i], moments[i], rows[i]["srid"]))
    rows[:] = [rows[i] for i in order]
    keys = [keys_of[i] for i in order]
    for row, key in zip(rows, keys, strict=True):
        row["lastChangeDate"] = wb_time(key)
    return keys


def _place(spec: DataSpec, r: random.Random, after: datetime, low_s: int, high_s: int) -> datetime | None:
    """A moment ``low_s..high_s`` seconds after ``after``, or None when that is not history yet."""
    moment = after + timedelta(seconds=r.randint(low_s, high_s))
    return moment if moment < spec.end else None


COMMON_KEYS = (
    "warehouseName",
    "warehouseType",
    "countryName",
    "oblastOkrugName",
    "regionName",
    "supplierArticle",
    "nmId",
    "barcode",
    "category",
    "subject",
    "brand",
    "techSize",
    "incomeID",
    "isSupply",
    "isRealization",
)


def _common(product: Product, size: Size, warehouse: tuple, income_id: int) -> dict[str, Any]:
    """The fields orders and sales share (COMMON_KEYS)."""
    _, name, district, region = warehouse
    return {
        "warehouseName": name,
        "warehouseType": "Склад WB",
        "countryName": "Россия",
        "oblastOkrugName": district,
        "regionName": region,
        "supplierArticle": product.vendor_code,
        "nmId": product.nm_id,
        "barcode": size.barcode,
        "category": product.category,
        "subject": product.subject,
        "brand": product.brand,
        "techSize": size.tech_size,
        "incomeID": income_id,
        "isSupply": False,
        "isRealization": True,
    }


def _orders(spec: DataSpec, seller: str, products: list[Product]) -> tuple[list[dict], list[datetime]]:
    rows: list[dict[str, Any]] = []
    moments: list[datetime] = []
    for day_index in range(spec.history_days):
        day = spec.start + timedelta(days=day_index)
        r = rng(spec, seller, "orders", day.date())
        for _ in range(spec.rows_per_day):
            product = r.choice(products)
            size = r.choice(product.sizes)
            placed = day + timedelta(seconds=r.randrange(86_400))
            cancelled = r.random() < CANCEL_SHARE
            changed = _place(spec, r, placed, 60, 3 * 86_400 if cancelled else 4 * 3_600)
            if changed is None:  # the change would be after "now": it happened just before it
                changed = placed + (spec.end - placed) * r.random()
            spp = r.choice((0, 5, 10, 15, 20, 25))
            with_disc = round(product.price * (100 - product.discount) / 100, 2)
            srid = uuid.UUID(int=r.getrandbits(128)).hex
            rows.append(
                {
                    "date": wb_time(placed),
                    "lastChangeDate": "",  # set by _change_keys
                    **_common(product, size, r.choice(WAREHOUSES), r.randrange(10_000_000, 30_000_000)),
                    "totalPrice": float(product.price),
                    "discountPercent": product.discount,
                    "spp": spp,
                    "finishedPrice": round(with_disc * (100 - spp) / 100, 2),
                    "priceWithDisc": with_disc,
                    "isCancel": cancelled,
                    "cancelDate": wb_time(changed) if cancelled else NEVER,
                    "sticker": str(r.randrange(10**9, 10**10)),
                    "gNumber": str(r.randrange(10**19, 10**20)),
                    "srid": srid,
                }
            )
            moments.append(changed)
    return rows, _change_keys(spec, rows, moments)


def _sales(spec: DataSpec, seller: str, orders: list[dict]) -> tuple[list[dict], list[datetime]]:
    """Most live orders are bought out some days later; a few of those come back as returns."""
    rows: list[dict[str, Any]] = []
    moments: list[datetime] = []
    for order in orders:
        r = rng(spec, seller, "sale", order["srid"])
        if order["isCancel"] or r.random() >= BUYOUT_SHARE:
            continue
        sold = _place(spec, r, datetime.fromisoformat(order["date"]), 86_400, 6 * 86_400)
        if sold is None:
            continue
        events = [("S", sold)]
        if r.random() < RETURN_SHARE and (returned := _place(spec, r, sold, 2 * 86_400, 10 * 86_400)):
            events.append(("R", returned))
        commission = r.choice((0.17, 0.2, 0.235, 0.25))
        for kind, moment in events:
            sign = 1 if kind == "S" else -1
            rows.append(
                {
                    "date": wb_time(moment),
                    "lastChangeDate": "",  # set by _change_keys
                    **{key: order[key] for key in COMMON_KEYS},
                    "totalPrice": order["totalPrice"],
                    "discountPercent": order["discountPercent"],
                    "spp": order["spp"],
                    "paymentSaleAmount": 0,
                    "forPay": sign * round(order["priceWithDisc"] * (1 - commission), 2),
                    "finishedPrice": sign * order["finishedPrice"],
                    "priceWithDisc": sign * order["priceWithDisc"],
                    "saleID": f"{kind}{r.randrange(10**9, 10**10)}",
                    "sticker": order["sticker"],
                    "gNumber": order["gNumber"],
                    "srid": order["srid"],
                }
            )
            moments.append(moment + timedelta(seconds=r.randint(30, 3_600)))
    return rows, _change_keys(spec, rows, moments)


def money(value: float) -> str:
    """A money amount as WB's finance API sends it: a decimal string, no trailing zeros ("1249", "399.68")."""
    text = f"{round(value, 2):.2f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


@dataclass(frozen=True)
class SellerProfile:
    name: str
    tin: str
    trade_mark: str


def seller_profile(spec: DataSpec, seller: str) -> SellerProfile:
    """The seller's legal name, TIN (ИНН) and trade mark (GET /api/v1/seller-info, the report's partner)."""
    r = rng(spec, seller, "profile")
    tin = "".join(str(r.randrange(10)) for _ in range(12))
    return SellerProfile(f"ИП Продавец {seller}", tin, r.choice(BRANDS))


def _report(spec: DataSpec, seller: str, sales: list[dict], by_nm: dict[int, Product]) -> list[dict]:
    """The realization report (finance API, camelCase): a sale or return row plus a logistics row per sale row.

    Money is a decimal string where WB's schema says string; the amounts follow
    from the sale (retail = its priceWithDisc, forPay = its forPay).
    """
    r = rng(spec, seller, "report")
    report_base = r.randrange(100_000_000, 500_000_000)
    profile = seller_profile(spec, seller)
    entries = []
    for sale in sales:
        moment = datetime.fromisoformat(sale["date"])
        entries.append((moment, 0, sale))
        entries.append((moment, 1, sale))
    entries.sort(key=lambda e: (e[0], e[2]["saleID"], e[1]))
    rrd_id = r.randrange(1_000_000_000, 2_000_000_000)
    rows = []
    for moment, kind, sale in entries:
        rrd_id += r.randint(1, 4)
        product = by_nm[sale["nmId"]]
        monday = moment.date() - timedelta(days=moment.weekday())
        is_return = sale["saleID"].startswith("R")
        retail = abs(sale["priceWithDisc"]) if kind == 0 else 0.0
        for_pay = abs(sale["forPay"]) if kind == 0 else 0.0
        commission = round(retail - for_pay, 2)
        commission_percent = round(commission / retail * 100, 2) if retail else 0.0
        operation = ("Возврат" if is_return else "Продажа") if kind == 0 else "Логистика"
        order_key = hashlib.sha256(f"{seller}/{sale['srid']}".encode()).hexdigest()
        rows.append(
            {
                "reportId": report_base + monday.toordinal() // 7,
                "dateFrom": monday.isoformat(),
                "dateTo": (monday + timedelta(days=6)).isoformat(),
                "createDate": (monday + timedelta(days=7)).isoformat(),
                "currency": "RUB",
                "reportType": 1,
                "rrdId": rrd_id,
                "giId": sale["incomeID"],
                "dlvPrc": 1.0,
                "fixTariffDateFrom": monday.isoformat(),
                "fixTariffDateTo": (monday + timedelta(days=6)).isoformat(),
                "subjectName": product.subject,
                "nmId": product.nm_id,
                "brandName": product.brand,
                "vendorCode": product.vendor_code,
                "title": product.title,
                "techSize": sale["techSize"],
                "sku": sale["barcode"],
                "docTypeName": operation if kind == 0 else "",
                "quantity": 1 if kind == 0 else 0,
                "retailPrice": money(sale["totalPrice"]),
                "retailAmount": money(retail),
                "salePercent": sale["discountPercent"],
                "commissionPercent": commission_percent,
                "officeName": sale["warehouseName"],
                "sellerOperName": operation,
                "orderDt": f"{wb_time(moment - timedelta(days=2))}Z",
                "saleDt": f"{wb_time(moment)}Z",
                "rrDate": moment.date().isoformat(),
                "shkId": r.randrange(10**10, 10**11),
                "retailPriceWithDisc": money(retail),
                "deliveryAmount": 1 if kind == 1 and not is_return else 0,
                "returnAmount": 1 if kind == 1 and is_return else 0,
                "deliveryService": money(r.randrange(40, 150)) if kind == 1 else "0",
                "giBoxTypeName": "Короба",
                "productDiscountForReport": sale["discountPercent"],
                "sellerPromo": "0",
                "spp": sale["spp"],
                "kvwBase": commission_percent,
                "kvw": commission_percent,
                "supRatingUp": 0,
                "isKgvpV2": 0,
                "ppvzSalesCommission": money(commission),
                "forPay": money(for_pay),
                "ppvzReward": "0",
                "acquiringFee": money(retail * 0.015),
                "acquiringPercent": 1.5 if retail else 0,
                "paymentProcessing": "Комиссия за организацию платежа с НДС" if retail else "",
                "acquiringBank": "Тинькофф",
                "vw": money(commission),
                "vwNds": money(commission * 0.2),
                "ppvzOfficeName": "",
                "ppvzOfficeId": 0,
                "ppvzSupplierName": profile.name,
                "ppvzSupplierInn": profile.tin,
                "declarationNumber": "",
                "stickerId": sale["sticker"],
                "country": "Россия",
                "srvDbs": False,
                "penalty": "0",
                "additionalPayment": "0",
                "rebillLogisticCost": "0",
                "paidStorage": "0",
                "deduction": "0",
                "paidAcceptance": "0",
                "orderId": int(order_key[:12], 16) % 10**10,
                "isB2b": False,
                "trbxId": "",
                "installmentCofinancingAmount": "0",
                "wibesDiscountPercent": 0,
                "cashbackAmount": "0",
                "cashbackDiscount": "0",
                "cashbackCommissionChange": "0",
                "paymentSchedule": "0",
                "deliveryMethod": "FBO",
                "sellerPromoId": 0,
                "sellerPromoDiscount": 0,
                "loyaltyId": 0,
                "loyaltyDiscount": 0,
                "uuidPromocode": "",
                "salePricePromocodeDiscountPrc": 0,
                "articleSubstitution": "",
                "salePriceAffiliatedDiscountPrc": 0,
                "salePriceWholesaleDiscountPrc": 0,
                "b2bCustomerTin": "",
                "orderUid": f"id{order_key[12:44]}",
                "srid": sale["srid"],
            }
        )
    return rows


def _stocks(spec: DataSpec, seller: str, products: list[Product]) -> list[dict]:
    r = rng(spec, seller, "stocks")
    rows = []
    for product in products:
        for size in product.sizes:
            for warehouse_id, name, _, region in sorted(r.sample(WAREHOUSES, r.randint(1, 4))):
                rows.append(
                    {
                        "nmId": product.nm_id,
                        "chrtId": size.chrt_id,
                        "warehouseId": warehouse_id,
                        "warehouseName": name,
                        "regionName": region,
                        "quantity": r.randint(0, 300),
                        "inWayToClient": r.randint(0, 20),
                        "inWayFromClient": r.randint(0, 5),
                    }
                )
    return rows


def min_bid(spec: DataSpec, seller: str, nm_id: int, payment_type: str, placement: str) -> int:
    """WB's minimum bid in kopecks for a card, payment type and placement."""
    low = 150 if payment_type == "cpm" else 400
    return low + rng(spec, seller, "min-bid", nm_id, payment_type, placement).randrange(0, 200, 5)


def _campaigns(spec: DataSpec, seller: str, products: list[Product]) -> list[Campaign]:
    r = rng(spec, seller, "campaigns")
    campaigns = []
    for advert_id in _unique_ints(r, r.randint(3, 8), 10_000_000, 90_000_000):
        bid_type = r.choice(("manual", "unified"))
        payment_type = "cpm" if r.random() < 0.75 else "cpc"
        status = r.choice((9, 9, 9, 11, 7, 4))
        if bid_type == "unified":
            placements = {"search": True, "recommendations": True}
        else:
            search = r.random() < 0.8
            placements = {"search": search, "recommendations": not search or r.random() < 0.4}
        nm_ids = tuple(p.nm_id for p in r.sample(products, min(len(products), r.randint(1, 4))))
        bids = {}
        for nm_id in nm_ids:
            unified = r.randrange(250, 1_500, 10) * (3 if payment_type == "cpc" else 1)
            for placement, on in placements.items():
                bids[nm_id, placement] = unified if bid_type == "unified" else (unified if on else 0)
        created = datetime.combine(spec.anchor, time(), MSK) - timedelta(
            days=r.randint(10, spec.history_days), seconds=r.randrange(86_400)
        )
        started = None if status == 4 else created + timedelta(hours=r.randint(1, 48))
        updated = (started or created) + (spec.end.replace(tzinfo=MSK) - (started or created)) * r.random()
        campaigns.append(
            Campaign(
                advert_id=advert_id,
                name=f"Кампания от {created:%d.%m.%Y}",
                bid_type=bid_type,
                payment_type=payment_type,
                status=status,
                placements=placements,
                nm_ids=nm_ids,
                bids=bids,
                created=created,
                started=started,
                updated=updated,
            )
        )
    return campaigns


@lru_cache(maxsize=64)
def dataset(spec: DataSpec, seller: str) -> Dataset:
    """The seller's whole history, built once per (spec, seller)."""
    products = _products(spec, seller)
    by_nm = {p.nm_id: p for p in products}
    orders, order_keys = _orders(spec, seller, products)
    sales, sale_keys = _sales(spec, seller, orders)
    report = _report(spec, seller, sales, by_nm)
    return Dataset(
        products=products,
        orders=orders,
        order_keys=order_keys,
        sales=sales,
        sale_keys=sale_keys,
        report=report,
        report_ids=[row["rrdId"] for row in report],
        report_days=[date.fromisoformat(row["rrDate"]) for row in report],
        stocks=_stocks(spec, seller, products),
        campaigns=_campaigns(spec, seller, products),
        by_nm=by_nm,
    )


def changed_since(rows: list[dict], keys: list[datetime], since: datetime, limit: int) -> list[dict]:
    """Statistics paging: rows with lastChangeDate >= ``since``, at most ``limit``; [] when none is newer.

    ``>=`` repeats the previous page's rows of its last second (the client dedups
    them by their natural key); once nothing is strictly newer the answer is ``[]``.
    """
    if bisect_right(keys, since) == len(keys):
        return []
    start = bisect_left(keys, since)
    return rows[start : start + limit]


def report_page(data: Dataset, first: date, last: date, after_rrd_id: int, limit: int) -> list[dict]:
    """Report rows with rrDate in [first, last] and rrdId > ``after_rrd_id``, ascending."""
    lo, hi = bisect_left(data.report_days, first), bisect_right(data.report_days, last)
    start = max(lo, bisect_right(data.report_ids, after_rrd_id, lo, hi))
    return data.report[start : min(hi, start + limit)]


def day_stats(
    spec: DataSpec, seller: str, campaign: Campaign, nm_id: int, day: date
) -> dict[str, Any] | None:
    """One card's ad statistics in one campaign on one day (None before start or after the end)."""
    if campaign.started is None or day < campaign.started.date() or day >= spec.anchor:
        return None
    if campaign.status == 7 and day > campaign.updated.date():
        return None
    r = rng(spec, seller, "stats", campaign.advert_id, nm_id, day)
    views = r.randint(50, 4_000)
    clicks = int(views * r.uniform(0.01, 0.06))
    bid_rub = max(campaign.bids.values(), default=0) / 100
    spent = views / 1000 * bid_rub if campaign.payment_type == "cpm" else clicks * bid_rub
    atbs = int(clicks * r.uniform(0.05, 0.2))
    orders = int(atbs * r.uniform(0.2, 0.6))
    price = round(r.uniform(300, 5_000), 2)
    return {
        "views": views,
        "clicks": clicks,
        "sum": round(spent, 2),
        "atbs": atbs,
        "orders": orders,
        "shks": orders,
        "sum_price": round(orders * price, 2),
        "canceled": int(orders * r.uniform(0, 0.1)),
    }
