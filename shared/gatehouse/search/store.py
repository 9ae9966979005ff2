"""Searching the live index: ranked with ts_rank, every word required, the last one as a prefix.

The query is folded as the documents are (``gatehouse_fold`` in SQL, see ``gatehouse.catalog.documents``):
"krzeslo", "KRZESŁO" and "krzesło" find the same products.
"""

from __future__ import annotations

import re
import unicodedata
import uuid
from dataclasses import dataclass

from sqlalchemy import Engine, text

from gatehouse.catalog.documents import CONFIG, FOLD
from gatehouse.catalog.rules import STATUSES
from gatehouse.errors import ValidationFailed

Q_MAX = 200
LIMIT_MAX = 1_000
WORDS_MAX = 20

_WORD = re.compile(r"\w+", re.UNICODE)


@dataclass(frozen=True)
class Hit:
    product_id: uuid.UUID
    sku: str
    name: str
    status: str
    rank: float


def tsquery_of(q: str) -> str:
    """``krzesło czerw`` → ``'krzesło' & 'czerw':*`` (to_tsquery input: quoted words, no operators)."""
    if len(q) > Q_MAX:
        raise ValidationFailed(f"q may be at most {Q_MAX} characters", field="q")
    # Composed (NFC) first: a decomposed "z\u0307" is one word character, not "z" and a mark.
    words = _WORD.findall(unicodedata.normalize("NFC", q.replace("\x00", "")))
    if not words:
        raise ValidationFailed("q must hold at least one word (letters or digits)", field="q")
    if len(words) > WORDS_MAX:
        raise ValidationFailed(f"q may hold at most {WORDS_MAX} words", field="q")
    quoted = [f"'{w}'" for w in words]  # \w+ holds no quote, backslash or operator
    quoted[-1] += ":*"
    return " & ".join(quoted)


class SearchStore:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def search(self, q: str, *, status: str | None = None, limit: int = 20) -> list[Hit]:
        if status is not None and status not in STATUSES:
            raise ValidationFailed(f"status must be one of {', '.join(STATUSES)}", field="status")
        if not 1 <= limit <= LIMIT_MAX:
            raise ValidationFailed(f"limit must be an integer from 1 to {LIMIT_MAX}", field="limit")
        where = "d.document @@ query" + (" AND d.status = :status" if status else "")
        sql = text(
            f"""
            SELECT p.id, p.sku, p.name, d.status, ts_rank(d.document, query) AS rank
            FROM search_documents AS d JOIN products AS p ON p.id = d.product_id,
                 to_tsquery('{CONFIG}', {FOLD}(:query)) AS query
            WHERE {where}
            ORDER BY rank DESC, p.sku
            LIMIT :limit
            """
        )
        params = {"query": tsquery_of(q), "limit": limit, "status": status}
        with self.engine.connect() as conn:
            return [Hit(r[0], r[1], r[2], r[3], float(r[4])) for r in conn.execute(sql, params)]
