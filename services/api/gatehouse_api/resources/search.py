"""Catalog search (the live full-text index) and its re-index (a search_reindex bulk operation)."""

from __future__ import annotations

import falcon

from gatehouse import search
from gatehouse.catalog.handlers import CatalogHandlers
from gatehouse.catalog.rules import STATUSES
from gatehouse.errors import ValidationFailed
from gatehouse.search.store import Q_MAX
from gatehouse_api.auth import principal, require_admin
from gatehouse_api.openapi import contract, query
from gatehouse_api.schemas import ReindexStarted, SearchHit, SearchPage


def _search_limit(raw: str | None) -> int:
    if raw is None:
        return 20
    if not (raw.isascii() and raw.isdigit() and len(raw) <= 10) or not 1 <= int(raw) <= search.LIMIT_MAX:
        raise ValidationFailed(f"limit must be an integer from 1 to {search.LIMIT_MAX}", field="limit")
    return int(raw)


class Search:
    """Full-text search of the catalog (the live index): ranked, the last word as a prefix."""

    def __init__(self, search: search.SearchStore) -> None:
        self.search = search

    @contract(
        "Search the catalog (PostgreSQL full text; the last word is a prefix)",
        (200, SearchPage, "the best matches, ranked"),
        (401, 403, 422),
        params=[
            query("q", required=True, minLength=1, maxLength=Q_MAX),
            query("status", enum=list(STATUSES)),
            query("limit", type="integer", minimum=1, maximum=search.LIMIT_MAX),
        ],
    )
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        require_admin(req)
        q = req.get_param("q")
        if q is None:
            raise ValidationFailed("q is required", field="q")
        status = req.get_param("status")
        if status is not None and status not in STATUSES:
            raise ValidationFailed(f"status must be one of {', '.join(STATUSES)}", field="status")
        hits = self.search.search(q, status=status, limit=_search_limit(req.get_param("limit")))
        resp.media = SearchPage(
            items=[
                SearchHit(productId=h.product_id, sku=h.sku, name=h.name, status=h.status, rank=h.rank)
                for h in hits
            ]
        ).model_dump(mode="json")


class SearchReindex:
    """Queue a re-index of every product's document (or answer with the live one)."""

    def __init__(self, handlers: CatalogHandlers) -> None:
        self.handlers = handlers

    @contract(
        "Rebuild the search index (one live re-index at a time)",
        (202, ReindexStarted, "queued, or the live one (`alreadyRunning`)"),
        (401, 403),
    )
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        require_admin(req)
        reindex = self.handlers.start_reindex(requester=principal(req).user_id)
        resp.status = 202
        resp.location = f"/v1/admin/catalog/bulk-operations/{reindex.operation.id}"
        resp.media = ReindexStarted(
            operationId=reindex.operation.id, alreadyRunning=reindex.already_running
        ).model_dump(mode="json")
