"""Catalog search: PostgreSQL full-text documents of products, kept current by every edit, re-indexed in bulk.

- ``tables``: ``search_documents`` (the live index, searched) and
  ``search_documents_build`` (the shadow a re-index builds, then swaps in).
- ``documents``: the set-based SQL that derives documents from products.
- ``store``: ``SearchStore.search`` (ranked, prefix on the last word).

The re-index itself is a bulk operation of type ``search_reindex``
(``gatehouse.catalog.bulk``): it runs on the ``catalog.bulk-operation`` job.
"""

from gatehouse.search.store import LIMIT_MAX, Hit, SearchStore, tsquery_of

__all__ = ["LIMIT_MAX", "Hit", "SearchStore", "tsquery_of"]
