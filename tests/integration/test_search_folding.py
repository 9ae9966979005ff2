"""Search folds accents the same on every server: with the unaccent extension and without it.

Two servers, each with a database of this module migrated to head and the same products:
the test session's PostgreSQL (the machine's, where unaccent exists) and the embedded one
of ``make run`` (the pgserver wheel, which has no unaccent). Every query must find the same
products on both, the ones it should.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import unicodedata
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from sqlalchemy import text

from dev.embedded import start_postgres, stop_postgres
from gatehouse.catalog import NewProduct, Price
from gatehouse.composition import Components, bootstrap
from gatehouse.db import make_engine
from gatehouse.migrate import upgrade
from gatehouse.settings import load_settings
from tests.conftest import ADMIN_TOKEN, IN_CI, TOKEN_KEY, _libpq, with_database

pytest.importorskip("pgserver", reason="the embedded PostgreSQL needs the 'embedded' dependency group")

PRODUCTS = [
    NewProduct(sku="CH-1", name="Krzesło dębowe", price=Price(100, "PLN"), description="do jadalni"),
    NewProduct(sku="TU-1", name="ŻÓŁW ogrodowy", price=Price(100, "PLN")),
    NewProduct(sku="MAP-1", name="Mapa: Łódź", price=Price(100, "PLN")),
    NewProduct(sku="DE-1", name="Äpfelkorb", price=Price(100, "EUR"), description="für die Straße"),
    NewProduct(sku="FR-1", name="Crème brûlée", price=Price(100, "EUR"), description="Éclair, cœur"),
    NewProduct(sku="CZ-1", name="Židle čalouněná", price=Price(100, "CZK")),
    NewProduct(sku="NO-1", name="Smørbrød", price=Price(100, "NOK")),
    NewProduct(sku="RU-1", name="Ёлочная игрушка", price=Price(100, "RUB"), description="Стул мой"),
    # Decomposed (NFD), as some clients send it: z + combining dot, o + combining acute …
    NewProduct(sku="NFD-1", name=unicodedata.normalize("NFD", "Żółta lampa"), price=Price(100, "PLN")),
    NewProduct(sku="PL-2", name="Zolw plastikowy", price=Price(100, "PLN")),
]

# query → the skus it finds (sorted)
EXPECTED = {
    "krzeslo": ["CH-1"],
    "krzesło": ["CH-1"],
    "KRZESŁO": ["CH-1"],
    "Krzes": ["CH-1"],  # the last word is a prefix
    "debowe": ["CH-1"],
    "zolw": ["PL-2", "TU-1"],
    "żółw": ["PL-2", "TU-1"],
    "ŻÓŁW ogrod": ["TU-1"],
    "lodz": ["MAP-1"],
    "Łódź": ["MAP-1"],
    "ŁÓDŹ": ["MAP-1"],
    "apfelkorb": ["DE-1"],
    "äpfelkorb": ["DE-1"],
    "ÄPFELKORB": ["DE-1"],
    "fur strasse": ["DE-1"],
    "straße": ["DE-1"],
    "creme brulee": ["FR-1"],
    "eclair coeur": ["FR-1"],
    "zidle calounena": ["CZ-1"],
    "smorbrod": ["NO-1"],
    "елочная": ["RU-1"],
    "ёлочная": ["RU-1"],
    "ЁЛОЧНАЯ": ["RU-1"],
    "стул": ["RU-1"],
    "мой": ["RU-1"],  # й keeps its mark: "мои" is another word
    "мои": [],
    "zolta": ["NFD-1"],
    "żółta": ["NFD-1"],
    unicodedata.normalize("NFD", "żółta"): ["NFD-1"],
}


def _database(server: str) -> Iterator[str]:
    name = f"gatehouse_fold_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(_libpq(server), autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield with_database(server, name)
    finally:
        with psycopg.connect(_libpq(server), autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="module")
def embedded_server() -> Iterator[str]:
    # World-traversable: the embedded PostgreSQL runs as its own system user when we are root.
    var = Path(tempfile.mkdtemp(prefix="gh-fold-"))
    var.chmod(0o755)
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    try:
        yield start_postgres(var)
    finally:
        stop_postgres(var)
        if runtime is None:  # start_postgres sets it for pgserver's lock file, if unset
            os.environ.pop("XDG_RUNTIME_DIR", None)
        shutil.rmtree(var, ignore_errors=True)


def _catalog(database_url: str, redis_url: str) -> Iterator[Components]:
    engine = make_engine(load_settings(database_url=database_url), bounded_waits=False)
    upgrade(engine)
    engine.dispose()
    gh = bootstrap(
        load_settings(
            database_url=database_url,
            redis_url=redis_url,
            admin_token=ADMIN_TOKEN,
            token_encryption_key=TOKEN_KEY,
        )
    )
    gh.catalog_handlers.create_products(PRODUCTS)
    yield gh
    gh.close()


@pytest.fixture(scope="module")
def machine(pg_server: str, redis_url: str) -> Iterator[Components]:
    for url in _database(pg_server):
        yield from _catalog(url, redis_url)


@pytest.fixture(scope="module")
def embedded(embedded_server: str, redis_url: str) -> Iterator[Components]:
    for url in _database(embedded_server):
        yield from _catalog(url, redis_url)


def has_unaccent(gh: Components) -> bool:
    with gh.engine.connect() as conn:
        return bool(
            conn.execute(
                text("SELECT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'unaccent')")
            ).scalar()
        )


def found(gh: Components, q: str) -> list[str]:
    return sorted(hit.sku for hit in gh.search.search(q, limit=100))


@pytest.mark.parametrize("q", list(EXPECTED))
def test_a_query_finds_the_same_products_with_and_without_unaccent(machine, embedded, q):
    assert not has_unaccent(embedded)  # the point of the comparison
    assert (found(machine, q), found(embedded, q)) == (EXPECTED[q], EXPECTED[q])


def test_the_documents_are_the_same_lexemes_on_both_servers(machine, embedded):
    def lexemes(gh):
        with gh.engine.connect() as conn:
            rows = conn.execute(
                text(
                    "SELECT p.sku, d.document::text FROM search_documents AS d "
                    "JOIN products AS p ON p.id = d.product_id ORDER BY p.sku"
                )
            )
            return dict(rows.all())

    assert lexemes(machine) == lexemes(embedded)
    assert lexemes(machine)["CH-1"] == "'1':4A 'ch':3A 'debowe':2A 'do':5C 'jadalni':6C 'krzeslo':1A"


# The letters of Latin-1, Latin Extended-A and Romanian, and Cyrillic ё: folded as unaccent folds them
# (ŉ alone becomes "n", where unaccent writes "'n", a quote a query must not hold).
LETTERS = [
    chr(c) for c in range(0xC0, 0x180) if unicodedata.category(chr(c)).startswith("L") and chr(c) != "ŉ"
] + list("ȘșȚțЁё")


def test_gatehouse_fold_folds_every_letter_as_unaccent_does(machine):
    if not has_unaccent(machine):
        if IN_CI:
            pytest.fail("the test PostgreSQL has no unaccent extension to compare with")
        pytest.skip(
            "no unaccent extension in this PostgreSQL to compare the fold with — point DATABASE_URL at "
            "a server that has it (Debian's postgresql package ships it)"
        )
    with machine.engine.begin() as conn:
        conn.execute(text("CREATE EXTENSION IF NOT EXISTS unaccent"))
        rows = conn.execute(
            text(
                "SELECT c, lower(gatehouse_fold(c)), lower(unaccent(c)) FROM unnest(CAST(:letters AS text[])) AS c"
            ),
            {"letters": LETTERS},
        ).all()
        decomposed = conn.execute(
            text("SELECT gatehouse_fold(:nfd)"), {"nfd": unicodedata.normalize("NFD", "ąćęłńóśźż ÄÖÜ éèç")}
        ).scalar()
    assert [(c, ours) for c, ours, theirs in rows if ours != theirs] == []
    assert decomposed == "acelnoszz AOU eec"


def test_the_migration_rebuilds_the_documents_written_before_it(embedded_server):
    for url in _database(embedded_server):
        engine = make_engine(load_settings(database_url=url))
        try:
            upgrade(engine, "0017")
            with engine.begin() as conn:
                conn.execute(
                    text(
                        "INSERT INTO products (id, sku, name, price_amount, price_currency) "
                        "VALUES (gen_random_uuid(), 'CH-1', 'Krzesło', 100, 'PLN')"
                    )
                )
                conn.execute(
                    text(
                        "INSERT INTO search_documents (product_id, document, status) "
                        "SELECT id, to_tsvector('gatehouse_search', name), status FROM products"
                    )
                )
            upgrade(engine)
            with engine.connect() as conn:
                assert conn.execute(text("SELECT document::text FROM search_documents")).scalar() == (
                    "'1':3A 'ch':2A 'krzeslo':1A"
                )
        finally:
            engine.dispose()
