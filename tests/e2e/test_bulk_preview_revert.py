"""Bulk operations' dry run and revert end to end: a real API, a real worker, real PostgreSQL."""

from __future__ import annotations

import uuid

import httpx

from tests.conftest import ADMIN_TOKEN
from tests.support.processes import wait_until

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
BULK = "/v1/admin/catalog/bulk-operations"


def seed(sql, n: int) -> None:
    """``n`` products in one statement: SKU-000001 …; the odd ones cost 100 PLN with a red colour, the
    even ones 999 PLN with no colour."""
    sql(
        "INSERT INTO products (id, sku, name, price_amount, price_currency, status, attributes, created_at, updated_at) "
        "SELECT gen_random_uuid(), 'SKU-' || lpad(i::text, 6, '0'), 'p' || i, "
        "CASE WHEN i % 2 = 1 THEN 100 ELSE 999 END, 'PLN', 'draft', "
        "CASE WHEN i % 2 = 1 THEN '{\"color\": \"red\"}'::jsonb ELSE '{}'::jsonb END, now(), now() "
        "FROM generate_series(1, :n) AS i",
        n=n,
    )


def written(sql) -> tuple:
    """Everything a bulk operation writes."""
    return sql(
        "SELECT (SELECT count(*) FROM catalog_bulk_operations), (SELECT count(*) FROM audit_log), "
        "(SELECT count(*) FROM jobs), (SELECT count(*) FROM products WHERE price_amount = 999), "
        "(SELECT max(updated_at) FROM products)"
    )[0]


def operation(url: str, op_id: str) -> dict:
    return httpx.get(f"{url}{BULK}/{op_id}", headers=ADMIN).json()


def finished(url: str, op_id: str) -> dict:
    return wait_until(
        lambda: (op := operation(url, op_id))["status"] in ("completed", "failed") and op,
        timeout=30,
        what=f"operation {op_id}",
    )


def test_a_dry_run_over_20000_products_counts_and_samples_without_writing(processes, gh, sql):
    _, url = processes.api(env={"BACKEND_ROLE": "api"})
    seed(sql, 20_000)
    before = written(sql)

    preview = httpx.post(
        f"{url}{BULK}",
        json={"filter": {"skuPrefix": "SKU-"}, "patch": {"price": {"amount": 999, "currency": "PLN"}}, "dryRun": True},
        headers=ADMIN,
    )  # fmt: skip

    assert preview.status_code == 200, preview.text
    body = preview.json()
    assert (body["matched"], body["wouldChange"]) == (20_000, 10_000)  # the even ones cost 999 already
    cheapest = sql(
        "SELECT id::text, sku FROM products WHERE price_amount = 100 ORDER BY id LIMIT 20"
    )  # the sample: the first 20 it would change, by id
    assert [(s["productId"], s["sku"]) for s in body["sample"]] == [tuple(r) for r in cheapest]
    assert {(str(s["before"]), str(s["after"])) for s in body["sample"]} == {
        (
            str({"price": {"amount": 100, "currency": "PLN"}}),
            str({"price": {"amount": 999, "currency": "PLN"}}),
        )
    }
    assert written(sql) == before  # no operation, audit row, job or product change


def test_a_revert_restores_the_audited_values_and_skips_a_product_edited_since(processes, gh, sql):
    _, url = processes.api(env={"BACKEND_ROLE": "api"})
    gh.catalog_handlers.create_attribute("color", "Kolor", True)
    seed(sql, 60)  # above BULK_SYNC_THRESHOLD (50): it runs on the worker
    original = {r[0]: tuple(r[1:]) for r in sql("SELECT sku, price_amount, status, attributes FROM products")}
    patch = {"price": {"amount": 500, "currency": "PLN"}, "status": "active", "attributes": {"color": "blue"}}

    # Given an operation queued while no worker runs: its revert is refused, an unknown one is 404
    started = httpx.post(
        f"{url}{BULK}", json={"filter": {"skuPrefix": "SKU-"}, "patch": patch}, headers=ADMIN
    )
    assert started.status_code == 202 and started.json()["status"] == "pending"
    op_id = started.json()["operationId"]
    early = httpx.post(f"{url}{BULK}/{op_id}/revert", headers=ADMIN)
    assert early.status_code == 409 and early.json()["code"] == "OPERATION_NOT_FINISHED"
    assert early.headers["content-type"].startswith("application/problem+json")
    assert httpx.post(f"{url}{BULK}/{uuid.uuid4()}/revert", headers=ADMIN).status_code == 404

    # … which a real worker then runs; after it, one product is edited by hand
    processes.start("worker", "gatehouse-worker", "--processes", "1", "--threads", "2")
    assert finished(url, op_id)["counters"]["succeeded"] == 60
    [(edited_id, edited_sku)] = sql("SELECT id::text, sku FROM products WHERE sku = 'SKU-000007'")
    edit = httpx.patch(
        f"{url}/v1/admin/catalog/products/{edited_id}", json={"name": "edited by hand"}, headers=ADMIN
    )
    assert edit.status_code == 200, edit.text

    # When the operation is reverted
    revert = httpx.post(f"{url}{BULK}/{op_id}/revert", headers=ADMIN)

    # Then a new operation restores every product as it was, but the edited one: changed-since
    assert revert.status_code == 202, revert.text
    assert revert.json()["revertOf"] == op_id and revert.json()["request"] == {"revertOf": op_id}
    done = finished(url, revert.json()["operationId"])
    assert done["status"] == "completed"
    assert done["counters"] == {"total": 60, "processed": 60, "succeeded": 59, "failed": 1}
    assert done["failedItems"] == [{"productId": edited_id, "reason": "changed-since"}]
    now = {r[0]: tuple(r[1:]) for r in sql("SELECT sku, price_amount, status, attributes FROM products")}
    assert {sku: v for sku, v in now.items() if sku != edited_sku} == {
        sku: v for sku, v in original.items() if sku != edited_sku
    }
    assert now[edited_sku] == (500, "active", {"color": "blue"})
    # … recorded as its own audit rows (the reverse of the operation's), which a revert of it reads
    assert sql(
        "SELECT count(*) FROM audit_log WHERE operation_id = :r AND action = 'product.bulk_revert'",
        r=uuid.UUID(done["operationId"]),
    ) == [(59,)]
    again = httpx.post(f"{url}{BULK}/{done['operationId']}/revert", headers=ADMIN)
    assert again.status_code == 202
    assert finished(url, again.json()["operationId"])["counters"]["succeeded"] == 59
    assert sql("SELECT count(*) FROM products WHERE price_amount = 500 AND status = 'active'") == [(60,)]
