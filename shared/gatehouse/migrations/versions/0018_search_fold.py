"""search folds accents itself (gatehouse_fold), on every server alike; every document rebuilt

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-02

Until now the configuration ``gatehouse_search`` put the ``unaccent`` dictionary in
front of ``simple`` where the extension could be created (migration 0010), so a
server without the contrib package (the embedded PostgreSQL of ``make run``) folded
case only: "krzeslo" did not find "Krzesło" there. Now the documents and the query
both go through ``gatehouse_fold(text)``, a plain SQL function of ours, before
``to_tsvector`` / ``to_tsquery``, and the configuration is ``simple`` alone on every
server: the same text gives the same lexemes whatever the server has installed.

What it folds: every letter with a diacritic that decomposes (NFD) into an ASCII letter
and combining marks (é, ą, ż, ó, č, ř, ä, ü, ñ, ș …: Latin-1, Latin Extended-A and
Additional, Romanian), the letters that do not decompose as unaccent does
(ł → l, ø → o, đ/ð → d, ħ → h, ı → i, ŀ → l, ŋ → n, ŧ → t, ſ → s, ĸ → q, ß → ss, æ → ae,
œ → oe, þ → th, ĳ → ij, ŉ → n), Cyrillic ё → е, and text in decomposed form (NFD)
like its composed one. Other Cyrillic letters keep their marks (й stays й), as with
unaccent. Case is left to the ``simple`` dictionary. It needs a UTF-8 database
(``normalize``), as every database of ours is.

A text without any of those characters (ASCII, Cyrillic without ё) skips the work
after one regular-expression test. The ``unaccent`` extension, where 0010 created it,
stays installed and unused.

Every document, live and shadow, is rebuilt here in SQL (one UPDATE per table, in the
migration's transaction; about 30 s per 100,000 products on 2 cores): no re-index needed.
Folding costs the document build about 35 µs per product (20,000 in 0.7 s more).
"""

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

# Letters NFD leaves whole (or whose unaccent folding differs from NFD's), lower-cased;
# Ё and ё become the Cyrillic е.
_SINGLE_FROM = "ÐðØøĐđĦħıĸĿŀŁłŊŋŦŧſЁё"
_SINGLE_TO = "ddooddhhiqllllnnttsее"
_MULTI = (("ß", "ss"), ("ẞ", "ss"), ("æ", "ae"), ("Æ", "ae"), ("œ", "oe"), ("Œ", "oe"), ("þ", "th"),
          ("Þ", "th"), ("ĳ", "ij"), ("Ĳ", "ij"), ("ŉ", "n"))  # fmt: skip


def _fold_body() -> str:
    # NFD, then the marks after an ASCII letter dropped, then NFC (a Cyrillic й put back together).
    body = (
        r"translate(normalize(regexp_replace(normalize($1, NFD), '([A-Za-z])[\u0300-\u036f]+', '\1', 'g'), NFC), "
        f"'{_SINGLE_FROM}', '{_SINGLE_TO}')"
    )
    for letter, folded in _MULTI:
        body = f"replace({body}, '{letter}', '{folded}')"
    # Only a text holding one of those characters needs the work.
    return rf"CASE WHEN $1 ~ '[\u00c0-\u024f\u0300-\u036f\u1e00-\u1eff\u0401\u0451]' THEN {body} ELSE $1 END"


FOLD = f"""
CREATE OR REPLACE FUNCTION gatehouse_fold(text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT {_fold_body()} $$
"""

SEPARATORS = "'-./:,;+#', '        '"


def _document(fold: str) -> str:
    """The document of product ``p`` as of this revision (``fold``: the function around each text, or none)."""

    def part(expr: str, weight: str) -> str:
        inner = f"translate({expr}, {SEPARATORS})"
        return f"setweight(to_tsvector('gatehouse_search', {fold}({inner})), '{weight}')"

    attributes = """coalesce((
         SELECT string_agg(v.value #>> '{}', ' ' ORDER BY v.key)
         FROM jsonb_each(p.attributes) AS v JOIN attributes AS a ON a.code = v.key
         WHERE a.searchable AND jsonb_typeof(v.value) IN ('string', 'number')), '')"""
    return " || ".join(
        (part("p.name", "A"), part("p.sku", "A"), part(attributes, "B"), part("p.description", "C"))
    )


def _rebuild(fold: str) -> None:
    for table in ("search_documents", "search_documents_build"):
        op.execute(
            f"UPDATE {table} AS d SET document = {_document(fold)} FROM products AS p WHERE p.id = d.product_id"
        )


def upgrade() -> None:
    op.execute(FOLD)
    op.execute(
        "ALTER TEXT SEARCH CONFIGURATION gatehouse_search ALTER MAPPING FOR hword, hword_part, word WITH simple"
    )
    _rebuild("gatehouse_fold")


def downgrade() -> None:
    conn = op.get_bind()
    if conn.execute(
        sa.text("SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'unaccent')")
    ).scalar():
        op.execute(
            "ALTER TEXT SEARCH CONFIGURATION gatehouse_search "
            "ALTER MAPPING FOR hword, hword_part, word WITH unaccent, simple"
        )
    _rebuild("")
    op.execute("DROP FUNCTION gatehouse_fold(text)")
