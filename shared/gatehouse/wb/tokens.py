"""What an account's WB token says of itself, and what WB answered of it (its categories).

WB tokens are JWTs WB signs: we read their ``exp`` and never check the signature (we are not
their audience; WB is). An opaque token (no JWT: the sandbox's ``seller-1``) has no known expiry.
A token's categories are learnt from WB: ``/ping`` on each host (account-verify) and any job's
401 ``token scope not allowed``.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime

from gatehouse.errors import Conflict, ValidationFailed
from gatehouse.progress import scope_message
from gatehouse.wb.hosts import CATEGORIES

GRANTED, DENIED, UNKNOWN = "granted", "denied", "unknown"


def expires_at(token: str) -> datetime | None:
    """The JWT's ``exp`` as an aware datetime; None for an opaque token or one without ``exp``."""
    parts = token.strip().removeprefix("Bearer ").split(".")
    if len(parts) != 3:
        return None
    try:
        claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except (binascii.Error, ValueError):
        return None
    exp = claims.get("exp") if isinstance(claims, dict) else None
    if isinstance(exp, bool) or not isinstance(exp, int | float):
        return None
    return datetime.fromtimestamp(exp, UTC)


def require_unexpired(token: str, *, now: datetime) -> datetime | None:
    """The token's expiry; an expired token is refused (422 on ``wbToken``)."""
    expiry = expires_at(token)
    if expiry is not None and expiry <= now:
        raise ValidationFailed(
            f"Срок действия токена Wildberries истёк {expiry:%d.%m.%Y %H:%M} UTC — выпустите новый токен "
            "в личном кабинете продавца",
            field="wbToken",
        )
    return expiry


def access_view(stored: Mapping[str, str] | None) -> dict[str, str]:
    """Every category: granted, denied or unknown (what WB has not answered yet)."""
    stored = stored or {}
    return {category: stored.get(category, UNKNOWN) for category in CATEGORIES}


class TokenScopeMissing(Conflict):
    """409: WB said the account's token lacks ``category``, which the job needs."""

    code = "TOKEN_SCOPE_MISSING"

    def __init__(self, account_id: object, category: str) -> None:
        super().__init__(
            f"{scope_message(category)} (account {account_id}: WB refused its token the category "
            f"{category!r})",
            field="wbToken",
        )
        self.details = {"category": category}


def require_scopes(account_id: object, stored: Mapping[str, str] | None, needs: Iterable[str]) -> None:
    """409 TOKEN_SCOPE_MISSING naming the first category a job needs that WB said the token lacks."""
    for category in needs:
        if (stored or {}).get(category) == DENIED:
            raise TokenScopeMissing(account_id, category)
