"""WB's API hosts and the token categories that open them.

A WB token carries categories (WB's «категории токена»); a host answers a token that lacks its
category with 401 ``token scope not allowed``. common-api (the seller's info, ``/ping``) takes a
token of any category.
"""

from __future__ import annotations

from typing import Literal

Service = Literal["statistics", "finance", "advert", "analytics", "content", "common"]
Category = Literal["statistics", "finance", "promotion", "analytics", "content"]

# Our name of a host -> the first label of its name (WB_API_BASE_URL + "/" + label: the sandbox).
HOST_LABELS: dict[str, str] = {
    "statistics": "statistics-api",
    "finance": "finance-api",
    "advert": "advert-api",
    "analytics": "seller-analytics-api",
    "content": "content-api",
    "common": "common-api",
}
# The category a host needs (common-api needs none).
CATEGORY_OF: dict[str, Category] = {
    "statistics": "statistics",
    "finance": "finance",
    "advert": "promotion",
    "analytics": "analytics",
    "content": "content",
}
CATEGORIES: tuple[Category, ...] = tuple(CATEGORY_OF.values())
HOST_OF: dict[str, str] = {category: service for service, category in CATEGORY_OF.items()}
