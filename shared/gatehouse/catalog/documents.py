"""Documents derived from products, set-based: one statement per batch of products, never one per product.

The text search configuration ``gatehouse_search`` (migrations 0010, 0018) is
``simple`` (no stemming, no stop words: SKUs, names and codes in any
language). Every text goes through ``gatehouse_fold`` (migration 0018, our own
SQL function, so every server folds alike, with or without the ``unaccent``
extension) before it: "Krzesło" is found by "krzeslo", "Łódź" by "lodz",
"Straße" by "strasse", "ёлка" by "елка"; the query goes through it too
(``gatehouse.search.store``). Separators inside words (``CH-1``, ``1.5``)
become spaces first, as the query splits on them too (the default parser would
read ``-1`` as a signed number).

Every edit (create, batch create, PATCH, a bulk-update batch whose patch can
change a document: ``patch_refresh``) refreshes the documents of the
products it changed in its own transaction (``refresh``, or ``STATUS_CTES`` for
a bulk patch of the status alone): in
the live index, and in the shadow too while a re-index is live (between
re-indexes the shadow may go stale; the next re-index rebuilds every row). A re-index rebuilds the shadow
(``build``) and swaps it in (``swap``). See ``gatehouse.catalog.bulk`` for why
nothing an edit writes during a re-index is lost.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Sequence

from sqlalchemy import Connection, text

CONFIG = "gatehouse_search"

# The product columns a document's text is derived from, besides the searchable attributes; the
# status is kept beside the text, for the status filter.
TEXT_FIELDS = frozenset({"name", "description", "sku"})

# Accents folded, by the same function for documents and queries (migration 0018).
FOLD = "gatehouse_fold"


def _text(expr: str, weight: str) -> str:
    """One weighted part of a document: separators to spaces, accents folded, then the lexemes."""
    return (
        f"setweight(to_tsvector('{CONFIG}', {FOLD}(translate({expr}, '-./:,;+#', '        '))), '{weight}')"
    )


# One product's document; ``p`` is the product row.
DOCUMENT = " || ".join(
    (
        _text("p.name", "A"),
        _text("p.sku", "A"),
        _text(
            """coalesce((
         SELECT string_agg(v.value #>> '{}', ' ' ORDER BY v.key)
         FROM jsonb_each(p.attributes) AS v JOIN attributes AS a ON a.code = v.key
         WHERE a.searchable AND jsonb_typeof(v.value) IN ('string', 'number')), '')""",
            "B",
        ),
        _text("p.description", "C"),
    )
)

_UPSERT = "ON CONFLICT (product_id) DO UPDATE SET document = EXCLUDED.document, status = EXCLUDED.status"

# Edits: the changed products' documents into the live index and, while a re-index is live, into
# the shadow too, in one statement. The edit has already written (and so locked) its products when
# this runs, so a re-index batch either built them before — then its operation was committed before
# this statement and is seen live here — or waits for this commit (FOR SHARE) and reads the edit.
REFRESH = text(
    f"""
    WITH docs AS (
      SELECT p.id AS product_id, {DOCUMENT} AS document, p.status FROM products AS p WHERE p.id = ANY(:ids)
    ), live AS (
      INSERT INTO search_documents (product_id, document, status) SELECT * FROM docs {_UPSERT}
    )
    INSERT INTO search_documents_build (product_id, document, status)
    SELECT * FROM docs
    WHERE EXISTS (
      SELECT 1 FROM catalog_bulk_operations
      WHERE type = 'search_reindex' AND status IN ('pending', 'running')
    )
    {_UPSERT}
    """
)

# A patch of the status alone, as two CTEs of the statement that patches the products (``{ids}``:
# a query of the ids it changed, ``{status}``: their new status): the text stays as it is, only
# the status beside it moves (no to_tsvector), in the live index and, while a re-index is live, in
# the shadow rows already built (a row built later reads the committed status). As for REFRESH,
# that statement must start after its products are locked (in an earlier statement), so that a
# re-index batch that built them first has committed and is seen.
STATUS_CTES = """
  live_status AS (
    UPDATE search_documents SET status = {status}
    WHERE product_id = ANY(ARRAY({ids})) AND status <> {status}
  ), shadow_status AS (
    UPDATE search_documents_build SET status = {status}
    WHERE product_id = ANY(ARRAY({ids})) AND status <> {status}
      AND EXISTS (
        SELECT 1 FROM catalog_bulk_operations
        WHERE type = 'search_reindex' AND status IN ('pending', 'running')
      )
  )"""

# A re-index batch: these products' documents into the shadow only. FOR SHARE waits for an edit of
# one of them still in flight and then reads its committed row, so the shadow never keeps an older
# document than the edit wrote (the edit's own write into the shadow happens before it commits).
BUILD = text(
    f"""
    WITH locked AS (
      SELECT id FROM products WHERE id = ANY(:ids) ORDER BY id FOR SHARE
    )
    INSERT INTO search_documents_build (product_id, document, status)
    SELECT p.id, {DOCUMENT}, p.status FROM products AS p JOIN locked USING (id)
    {_UPSERT}
    RETURNING product_id
    """
)

# The swap, one transaction: writers of either table wait (SHARE ROW EXCLUSIVE), readers do not —
# a search sees the old index until the commit, then the new one, never a mix.
SWAP = (
    text("LOCK TABLE search_documents, search_documents_build IN SHARE ROW EXCLUSIVE MODE"),
    # A product committed after the re-index listed its products and missing from the shadow.
    text(
        f"""
        INSERT INTO search_documents_build (product_id, document, status)
        SELECT p.id, {DOCUMENT}, p.status FROM products AS p
        WHERE NOT EXISTS (SELECT 1 FROM search_documents_build AS b WHERE b.product_id = p.id)
        """
    ),
    text(
        f"""
        INSERT INTO search_documents (product_id, document, status)
        SELECT product_id, document, status FROM search_documents_build {_UPSERT}
        WHERE search_documents.document IS DISTINCT FROM EXCLUDED.document
           OR search_documents.status IS DISTINCT FROM EXCLUDED.status
        """
    ),
    text(
        """
        DELETE FROM search_documents AS d
        WHERE NOT EXISTS (SELECT 1 FROM search_documents_build AS b WHERE b.product_id = d.product_id)
        """
    ),
)


def patch_refresh(
    conn: Connection, *, fields: Collection[str], attribute_codes: Collection[str]
) -> str | None:
    """What a patch of these product fields and attributes changes in the documents of its products.

    ``"document"``, a text field or a searchable attribute: the whole documents (``refresh`` after
    the patch); ``"status"``, the status alone: only the status beside them (``STATUS_CTES`` in the
    patch's statement); None, a price or a non-searchable attribute: nothing. An attribute made
    searchable later is picked up by the re-index its flip starts.
    """
    if set(fields) & TEXT_FIELDS or (
        attribute_codes
        and conn.execute(
            text("SELECT EXISTS (SELECT 1 FROM attributes WHERE searchable AND code = ANY(:codes))"),
            {"codes": list(attribute_codes)},
        ).scalar()
    ):
        return "document"
    return "status" if "status" in fields else None


def refresh(conn: Connection, product_ids: Sequence[uuid.UUID | str]) -> None:
    """Keep the documents of these (just changed) products current, in the caller's transaction."""
    if product_ids:
        conn.execute(REFRESH, {"ids": [uuid.UUID(str(i)) for i in product_ids]})


def build(conn: Connection, product_ids: Sequence[uuid.UUID]) -> set[uuid.UUID]:
    """Rebuild these products' documents in the shadow; returns the ids that exist."""
    return set(conn.execute(BUILD, {"ids": list(product_ids)}).scalars())


def swap(conn: Connection) -> None:
    for statement in SWAP:
        conn.execute(statement)
