"""Our WB rate-limit table (gatehouse.wb.limits.WB_LIMITS) against WB's YAML: a snapshot that changes a limit fails here."""

from __future__ import annotations

from collections import defaultdict

import pytest

from gatehouse.wb.limits import WB_LIMITS
from gatehouse_wb_sandbox import contract
from gatehouse_wb_sandbox.routes import ROUTES


def _routes_by_bucket() -> dict[str, list[tuple[str, str, str]]]:
    by_bucket: dict[str, list[tuple[str, str, str]]] = defaultdict(list)
    for key, route in ROUTES.items():
        by_bucket[route.bucket].append(key)
    return by_bucket


def test_every_bucket_covers_routes_and_every_route_has_a_bucket():
    assert set(_routes_by_bucket()) == set(WB_LIMITS)


@pytest.mark.parametrize("bucket", sorted(WB_LIMITS))
def test_each_bucket_equals_the_personal_and_service_rows_of_its_operations(bucket):
    for host, method, path in _routes_by_bucket()[bucket]:
        table = contract.limit_table(host, method, path)
        assert table is not None, f"WB documents no limit for {method} {path} on {host}"
        for token_type in ("personal", "service"):
            assert table[token_type].as_tuple() == WB_LIMITS[bucket], (bucket, host, path, token_type)


def test_the_limit_blocks_are_read_in_each_of_wbs_forms():
    typed = """<div class="description_limit">
| Тип | Период | Лимит | Интервал | Всплеск |
| --- | --- | --- | --- | --- |
| Персональный | 1 мин | 3 запроса | 20 сек | 1 запрос |
| Сервисный | 1 сек | 5 запросов | 200 мс | 5 запросов |
| Базовый | 24 ч | 2 запроса | 12 ч | 1 запрос |
</div>"""
    untyped = """<div class="description_limit">
| Период | Лимит | Интервал | Всплеск |
| --- | --- | --- | --- |
| 1 мин | 100 запросов | 600 мс | 5 запросов |
</div>"""
    prose = (
        '<div class="description_limit">\n  Максимум 3 запроса за 30 <a href="/x">секунд</a>. Лимит …\n</div>'
    )
    assert {k: v.as_tuple() for k, v in contract.parse_limit(typed).items()} == {
        "personal": (60_000, 3, 1),
        "service": (1_000, 5, 5),
    }
    assert {v.as_tuple() for v in contract.parse_limit(untyped).values()} == {(60_000, 100, 5)}
    assert {v.as_tuple() for v in contract.parse_limit(prose).values()} == {(30_000, 3, 3)}
    assert contract.parse_limit("no limit block") == {}


def test_every_operation_on_our_hosts_has_a_readable_limit():
    tables = contract.limit_tables()
    assert len(tables) == len(contract.operations())  # the parser understood every block
    assert tables["finance-api", "POST", "/api/finance/v1/sales-reports/detailed"]["personal"].burst == 1


def test_openapi_3_0_nullable_is_honoured():
    """openapi-core reads 3.0's ``nullable``: adverts' ``started`` may be null, ``deleted`` may not."""

    def answer(started: str | None, deleted: str | None) -> list[str]:
        stamp = "2026-05-01T10:00:00+03:00"
        advert = {
            "id": 1,
            "bid_type": "manual",
            "status": 4,
            "nm_settings": None,
            "restrictions": {"can_change_nms": True},
            "settings": {
                "payment_type": "cpm",
                "name": "n",
                "placements": {"search": True, "recommendations": False},
            },
            "timestamps": {"created": stamp, "updated": stamp, "started": started, "deleted": deleted},
        }
        path = "/api/advert/v2/adverts"
        return contract.check_response(
            "advert-api", "GET", path, 200, {"adverts": [advert]}, "application/json"
        )

    assert answer(None, "2100-01-01T00:00:00+03:00") == []
    assert any("deleted" in line and "None" in line for line in answer(None, None))
