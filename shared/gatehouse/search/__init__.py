"""Catalog search: PostgreSQL full-text documents of products, kept current by every edit, re-indexed in bulk.

- ``tables``: ``search_documents`` (the live index, searched) and
  ``search_documents_build`` (the shadow a re-index builds, then swaps in).
- ``store``: ``SearchStore.search`` (ranked, prefix on the last word).

The catalog owns what a document holds and keeps the documents current
(``gatehouse.catalog.documents``, written by every product change); search only
reads them, so it imports the catalog and never the other way round. The
re-index is a bulk operation of type ``search_reindex`` (``gatehouse.catalog.bulk``):
it runs on the ``catalog.bulk-operation`` job.
"""

from gatehouse.search.store import LIMIT_MAX, Hit, SearchStore, tsquery_of

__all__ = ["LIMIT_MAX", "Hit", "SearchStore", "tsquery_of"]
