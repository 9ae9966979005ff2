"""Catalog bulk update and search re-index of 20,000 products vs the floor (one raw SQL statement each).

Both run in this process against the same throwaway database, alternating
floor and operation over several rounds (warm-up and drift favour neither):

- bulk update: a real ``product_bulk_update`` operation, created with
  ``gh.catalog_handlers.create_bulk_operation`` (admin actor, no requester) and
  driven to its end by ``gh.catalog_handlers.run_bulk_operation(op_id, …)``
  (one unit of work per batch of BULK_BATCH_SIZE), in this process — exactly
  what the job body does, without the broker hop (the job's message the
  creation sends waits unconsumed in the bench's Redis database). Each batch locks its products, applies the patch, writes the products,
  their audit rows (always on) and their search documents, and moves the
  counters. The floor is one ``UPDATE products … FROM (VALUES …)`` of the same
  patch over the same products in raw psycopg. The price alternates between two
  amounts, so every run (floor or operation) really changes every product.
- re-index: a real ``search_reindex`` operation (``gh.catalog_handlers.start_reindex``)
  driven the same way: shadow rebuilt batch by batch, then swapped into the
  live index. The floor is one ``INSERT … SELECT`` of the same document
  expression (``gatehouse.catalog.documents.DOCUMENT``, accents folded by the
  same ``gatehouse_fold``) over every product into an empty scratch table
  shaped like the shadow.

The tables are vacuumed before each timed run (outside the timing), so the
dead rows of the previous run weigh on neither side.
"""

from __future__ import annotations

import statistics
import time
import uuid
from dataclasses import dataclass

import psycopg

from bench.support import Result, bench_settings
from gatehouse.catalog import documents
from gatehouse.catalog.bulk import Selection
from gatehouse.catalog.rules import NewProduct, Price, ProductPatch
from gatehouse.composition import bootstrap

N = 20_000
CHUNK = 1_000  # create_products' batch limit
ROUNDS = 3
ACTOR = "admin"
CURRENCY = "PLN"

COLOURS = ("czerwony", "zielony", "niebieski", "czarny", "biały", "żółty")
MATERIALS = ("dąb", "buk", "sosna", "stal", "aluminium", "plastik")
NOUNS = ("Krzesło", "Stół", "Szafa", "Regał", "Komoda", "Łóżko", "Biurko", "Fotel")


def make_products(gh) -> list[uuid.UUID]:
    gh.catalog_handlers.create_attribute("colour", "Kolor", True)
    gh.catalog_handlers.create_attribute("material", "Materiał", True)
    gh.catalog_handlers.create_attribute("weight_kg", "Waga (kg)", False)
    for start in range(0, N, CHUNK):
        gh.catalog_handlers.create_products(
            [
                NewProduct(
                    sku=f"CH-{i:05d}",
                    name=f"{NOUNS[i % len(NOUNS)]} model {i} {COLOURS[i % len(COLOURS)]}",
                    price=Price(1_000, CURRENCY),
                    description=f"Mebel nr {i}: {MATERIALS[i % len(MATERIALS)]}, wymiary 80x60x{40 + i % 50} cm.",
                    status="active" if i % 3 else "draft",
                    attributes={
                        "colour": COLOURS[i % len(COLOURS)],
                        "material": MATERIALS[(i // 7) % len(MATERIALS)],
                        "weight_kg": round(1.5 + i % 40 * 0.25, 2),
                    },
                )
                for i in range(start, min(start + CHUNK, N))
            ]
        )
    with psycopg.connect(gh.settings.libpq_url) as conn:
        return [row[0] for row in conn.execute("SELECT id FROM products ORDER BY id")]


def vacuum(settings, *tables: str) -> None:
    with psycopg.connect(settings.libpq_url, autocommit=True) as conn:
        conn.execute(f"VACUUM (ANALYZE) {', '.join(tables)}")


def count(settings, query: str, params: tuple = ()) -> int:
    with psycopg.connect(settings.libpq_url) as conn:
        return conn.execute(query, params).fetchone()[0]


def drive(gh, op_id: uuid.UUID) -> None:
    """What the job body does: batches until the operation is done (its e-mail: nobody to tell)."""
    gh.catalog_handlers.run_bulk_operation(op_id, last_attempt=False, between_batches=lambda: None)


# -- bulk update --------------------------------------------------------------------


@dataclass(frozen=True)
class Patch:
    """One kind of bulk patch: the floor's SET of it and the operation's patch, each to its own value.

    The two values alternate between floor and operation, so every run really changes every product.
    """

    label: str
    floor_set: str  # SQL assignments; %s is the floor's value
    floor_value: object
    patch: ProductPatch
    request: dict  # the same patch as the API's JSON (the job body reads it from the operation row)
    check: str  # counts the products carrying the operation's value; %s is that value
    check_value: object


PATCHES = (
    # Price only: no document input changes, so the batches leave the search index alone.
    Patch(
        "price",
        "price_amount = %s, price_currency = 'PLN'",
        1_111,
        ProductPatch(price=Price(2_222, CURRENCY)),
        {"price": {"amount": 2_222, "currency": CURRENCY}},
        "SELECT count(*) FROM products WHERE price_amount = %s",
        2_222,
    ),
    # Status: kept beside each document for the status filter, so every batch moves it (not the text).
    Patch(
        "status",
        "status = %s",
        "archived",
        ProductPatch(status="active"),
        {"status": "active"},
        "SELECT count(*) FROM products WHERE status = %s",
        "active",
    ),
)


def floor_update(settings, ids: list[uuid.UUID], patch: Patch) -> float:
    vacuum(settings, "products")
    values = ", ".join(["(%s::uuid)"] * len(ids))
    query = (
        f"UPDATE products AS p SET {patch.floor_set}, updated_at = now() "
        f"FROM (VALUES {values}) AS v(id) WHERE p.id = v.id"
    )
    with psycopg.connect(settings.libpq_url) as conn:
        start = time.perf_counter()
        changed = conn.execute(query, [patch.floor_value, *ids]).rowcount
        conn.commit()
        elapsed = time.perf_counter() - start
    assert changed == len(ids), changed
    return len(ids) / elapsed


def bulk_update(gh, ids: list[uuid.UUID], patch: Patch) -> float:
    settings = gh.settings
    vacuum(settings, "products", "search_documents", "search_documents_build", "audit_log")
    audits = count(settings, "SELECT count(*) FROM audit_log WHERE action = 'product.bulk_update'")
    start = time.perf_counter()
    op = gh.catalog_handlers.create_bulk_operation(
        Selection(product_ids=tuple(ids)),
        patch.patch,
        {"productIds": [str(i) for i in ids], "patch": patch.request},
        requester=None,
        actor=ACTOR,
    )
    drive(gh, op.id)
    elapsed = time.perf_counter() - start
    done = gh.bulk.get(op.id)
    assert (done.status, done.succeeded, done.failed) == ("completed", len(ids), 0), done
    assert count(settings, patch.check, (patch.check_value,)) == len(ids)
    added = count(settings, "SELECT count(*) FROM audit_log WHERE action = 'product.bulk_update'") - audits
    assert added == len(ids), added  # one audit row per changed product
    return len(ids) / elapsed


# -- re-index -----------------------------------------------------------------------

SCRATCH = "bench_reindex_floor"
FLOOR_REINDEX = f"""
INSERT INTO {SCRATCH} (product_id, document, status)
SELECT p.id, {documents.DOCUMENT}, p.status FROM products AS p"""


def floor_reindex(settings) -> float:
    with psycopg.connect(settings.libpq_url, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE IF NOT EXISTS {SCRATCH} (LIKE search_documents_build INCLUDING ALL)")
        conn.execute(f"TRUNCATE {SCRATCH}")
    vacuum(settings, "products", SCRATCH)
    with psycopg.connect(settings.libpq_url) as conn:
        # The text search dictionaries load (and the fold's regular expressions compile) once per
        # session: the operation's pooled sessions have them.
        conn.execute(f"SELECT to_tsvector('{documents.CONFIG}', {documents.FOLD}('Krzesło'))")
        start = time.perf_counter()
        built = conn.execute(FLOOR_REINDEX).rowcount
        conn.commit()
        elapsed = time.perf_counter() - start
    assert built == N, built
    return N / elapsed


def reindex(gh) -> float:
    vacuum(gh.settings, "products", "search_documents", "search_documents_build")
    start = time.perf_counter()
    started = gh.catalog_handlers.start_reindex(requester=None, reason="benchmark")
    assert not started.already_running
    drive(gh, started.operation.id)
    elapsed = time.perf_counter() - start
    done = gh.bulk.get(started.operation.id)
    assert (done.status, done.succeeded, done.failed) == ("completed", N, 0), done
    return N / elapsed


DOCS = {"price": "no document input changed", "status": "the documents' status column moved per batch"}


def report(label: str, what: str, rounds: list[tuple[float, float]], target: str) -> float:
    for i, (flo, ours) in enumerate(rounds, 1):
        print(f"  round {i}: floor {flo:8.0f} items/s   {label} {ours:8.0f} items/s   ratio {ours / flo:.2f}")
    flo, ours = (statistics.median(r[i] for r in rounds) for i in range(2))
    pairs = sorted(o / f for f, o in rounds)
    print(f"floor  : {flo:8.0f} items/s ({what})")
    print(f"{label:7}: {ours:8.0f} items/s")
    print(f"ratio {label}/floor: {ours / flo:.2f} (rounds {pairs[0]:.2f}–{pairs[-1]:.2f}{target})")
    return ours / flo


def main() -> list[Result]:
    with bench_settings() as settings:
        gh = bootstrap(settings)
        try:
            start = time.perf_counter()
            ids = make_products(gh)
            assert len(ids) == N
            print(f"created {N} products in {time.perf_counter() - start:.1f} s (create_products × {CHUNK})")
            print(f"batch size {settings.bulk_batch_size}; run_batch driven in-process (the job body's loop)")
            updates = {
                p.label: [(floor_update(settings, ids, p), bulk_update(gh, ids, p)) for _ in range(ROUNDS)]
                for p in PATCHES
            }
            searchable = count(settings, "SELECT count(*) FROM search_documents WHERE status = 'active'")
            assert searchable == N, searchable  # the status patch kept the index current
            reindexes = [(floor_reindex(settings), reindex(gh)) for _ in range(ROUNDS)]
        finally:
            gh.close()
    results = []
    for label, rounds in updates.items():
        print(f"bulk update of {N} products, {label} patch (audit rows on; {DOCS[label]}):")
        ratio = report("bulk", "one UPDATE … FROM (VALUES …) in raw psycopg", rounds, "; target >= 0.5")
        results.append(Result("bench_catalog", f"bulk/floor ({label} patch)", ratio, 0.5))
    print(f"re-index of {N} products (shadow built in batches, then swapped in):")
    ratio = report("reindex", "one INSERT … SELECT of the same document into a scratch table", reindexes, "")
    return [*results, Result("bench_catalog", "reindex/floor", ratio)]


if __name__ == "__main__":
    main()
