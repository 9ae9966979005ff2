"""A bulk operation's dry run over 20,000 products: its latency through the API (budget 200 ms) vs the floor.

20,000 products are seeded in SQL (generate_series) in a throwaway database, half
of them already at the patched price, each with three attributes. The dry run
(``POST /v1/admin/catalog/bulk-operations`` with ``"dryRun": true``) goes through
the API app in process (routing, the admin token, the body's validation, the
one read, JSON: everything but the socket), for a filter over every product and
for the 20,000 product ids listed, each ``ROUNDS`` times after a warm-up. The
floor is the least a database can do to answer the two counts: one raw
``SELECT count(*), count(*) FILTER (WHERE <changed>)`` over the same products
(no per-field before/after, no sample, no HTTP). The figures: each dry run's p95
against the 200 ms budget, and floor/dry-run (the share of the time the bare
counting takes).
"""

from __future__ import annotations

import json
import os
import statistics

import psycopg
from falcon import testing

from bench.support import Result, bench_settings, latencies_ms, percentile
from gatehouse.composition import bootstrap
from gatehouse_api.app import create_app, settled

N = 20_000
ROUNDS = 15
BUDGET_MS = 200
ADMIN_TOKEN = "bench-preview-admin-0123456789abcdef"
REDIS_DB = int(os.environ.get("BENCH_REDIS_DB", "14"))  # nothing queued: any database that is free
PATCH = {"price": {"amount": 999, "currency": "PLN"}, "attributes": {"colour": "blue"}}

SEED = """
INSERT INTO attributes (code, label, searchable) VALUES ('colour', 'Kolor', true), ('material', 'Materiał', true),
  ('weight_kg', 'Waga', false);
INSERT INTO products (id, sku, name, description, price_amount, price_currency, status, attributes, created_at, updated_at)
SELECT gen_random_uuid(), 'PV-' || lpad(i::text, 6, '0'), 'Krzesło model ' || i, 'Mebel nr ' || i,
  CASE WHEN i %% 2 = 0 THEN 999 ELSE 1000 END, 'PLN', CASE WHEN i %% 3 = 0 THEN 'draft' ELSE 'active' END,
  jsonb_build_object('colour', (ARRAY['red', 'blue', 'green'])[1 + i %% 3], 'material', 'dąb', 'weight_kg', i %% 40),
  now(), now()
FROM generate_series(1, %(n)s) AS i
"""
FLOOR = """
SELECT count(*), count(*) FILTER (WHERE (price_amount, price_currency) <> (999, 'PLN')
  OR attributes->'colour' IS DISTINCT FROM '"blue"')
FROM products WHERE starts_with(sku, 'PV-')
"""


def main() -> list[Result]:
    with bench_settings(redis_db=REDIS_DB, admin_token=ADMIN_TOKEN) as settings:
        with psycopg.connect(settings.libpq_url, autocommit=True) as conn:
            for statement in SEED.split(";"):
                conn.execute(statement, {"n": N} if "%(n)s" in statement else None)
            conn.execute("VACUUM ANALYZE products")
            ids = [str(r[0]) for r in conn.execute("SELECT id FROM products")]
            expected = conn.execute(FLOOR).fetchone()
            floor = latencies_ms(lambda _: conn.execute(FLOOR).fetchone(), range(ROUNDS))
        gh = bootstrap(settings)
        try:
            client = testing.TestClient(settled(create_app(gh)))  # as get_app serves it
            headers = {"Authorization": f"Bearer {ADMIN_TOKEN}", "Content-Type": "application/json"}
            bodies = {
                "filter": {"filter": {"skuPrefix": "PV-"}, "patch": PATCH, "dryRun": True},
                "20,000 ids": {"productIds": ids, "patch": PATCH, "dryRun": True},
            }
            runs = {}
            for label, body in bodies.items():
                encoded = json.dumps(body)

                def preview(_: object, encoded: str = encoded) -> None:
                    answer = client.simulate_post(
                        "/v1/admin/catalog/bulk-operations", body=encoded, headers=headers
                    )
                    assert answer.status_code == 200, answer.text
                    got = answer.json
                    assert (got["matched"], got["wouldChange"], len(got["sample"])) == (*expected, 20), got

                runs[label] = latencies_ms(preview, range(ROUNDS))
            written = (
                gh.engine.connect().exec_driver_sql("SELECT count(*) FROM catalog_bulk_operations").scalar()
            )
            assert written == 0, written
        finally:
            gh.close()
    print(f"{N:,} products, {expected[1]:,} of them would change; {ROUNDS} rounds after a warm-up")
    print(
        f"floor (one raw count, no HTTP): median {statistics.median(floor):6.1f} ms  p95 {percentile(floor, 95):6.1f} ms"
    )
    results = []
    for label, times in runs.items():
        ratio = statistics.median(floor) / statistics.median(times)
        print(
            f"dry run, {label:10}: median {statistics.median(times):6.1f} ms  p95 {percentile(times, 95):6.1f} ms  "
            f"budget/p95 {BUDGET_MS / percentile(times, 95):.2f}  floor/dry-run {ratio:.2f}"
        )
        results += [
            Result(
                "bench_bulk_preview",
                f"{BUDGET_MS} ms budget / dry-run p95 ({label})",
                BUDGET_MS / percentile(times, 95),
                1.0,
            ),
            Result("bench_bulk_preview", f"floor/dry-run ({label})", ratio),
        ]
    return results


if __name__ == "__main__":
    main()
