"""WB API tokens: JWT-shaped tokens for tests, and who a request speaks for with which categories.

WB tokens are JWTs: ``sid`` is the seller account, ``acc`` the token type
(1 Base, 2 Test, 3 Personal, 4 Service), ``exp`` the expiry (epoch seconds) and
``s`` the categories as a bitmask (``1 << CATEGORY_BITS[name]``); a token
without ``s`` has every category, and so has an opaque (non-JWT) token, whose
seller is the token itself. The sandbox never checks signatures; it only reads
the claims, like a stand-in should.
"""

from __future__ import annotations

import base64
import binascii
import json
import time
from collections.abc import Iterable
from dataclasses import dataclass

EMPTY_HEADER = "empty Authorization header"
SCOPE_NOT_ALLOWED = "token scope not allowed"
# WB's bit positions in the ``s`` claim.
CATEGORY_BITS = {
    "content": 1,
    "analytics": 2,
    "prices": 3,
    "marketplace": 4,
    "statistics": 5,
    "promotion": 6,
    "feedbacks": 7,
    "chat": 9,
    "supplies": 10,
    "returns": 11,
    "documents": 12,
    "finance": 13,
}
CATEGORIES = frozenset(CATEGORY_BITS)
EXPIRED = "token expired"
MALFORMED = "token problem; token is malformed: "


class TokenError(Exception):
    """The request's token is missing or unusable; the message is the 401 detail."""

    def __init__(self, detail: str, seller: str | None = None) -> None:
        super().__init__(detail)
        self.seller = seller  # known for an expired token: the log still names its seller


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(segment: str) -> bytes:
    return base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4))


@dataclass(frozen=True)
class Identity:
    seller: str
    categories: frozenset[str]


def category_mask(categories: Iterable[str]) -> int:
    """The ``s`` claim for these categories (ValueError naming an unknown one)."""
    mask = 0
    for name in categories:
        if name not in CATEGORY_BITS:
            raise ValueError(f"unknown category {name!r} (known: {', '.join(CATEGORY_BITS)})")
        mask |= 1 << CATEGORY_BITS[name]
    return mask


def categories_of(mask: int) -> frozenset[str]:
    return frozenset(name for name, bit in CATEGORY_BITS.items() if mask & (1 << bit))


def make_token(
    sid: str, *, acc: int = 3, exp: int | None = None, categories: Iterable[str] | None = None
) -> str:
    """An unsigned JWT-shaped token for seller ``sid``.

    ``exp``: epoch seconds (None: no expiry); ``categories``: the category names
    it grants (None: every category). Deterministic, so a test or ``make run``
    can mint the same token twice.
    """
    header = {"alg": "ES256", "kid": "gatehouse-wb-sandbox", "typ": "JWT"}
    claims: dict[str, object] = {"sid": sid, "acc": acc}
    claims["s"] = category_mask(CATEGORY_BITS if categories is None else categories)
    if exp is not None:
        claims["exp"] = exp
    parts = (json.dumps(header).encode(), json.dumps(claims).encode(), b"unsigned")
    return ".".join(_b64(part) for part in parts)


def seller_of(authorization: str | None, *, now: float | None = None) -> str:
    """The seller id a request speaks for: the JWT's ``sid``, or a raw (non-JWT) token itself."""
    return identify(authorization, now=now).seller


def identify(authorization: str | None, *, now: float | None = None) -> Identity:
    """The seller a request speaks for and its token's categories (TokenError: a 401)."""
    scheme, _, rest = (authorization or "").strip().partition(" ")
    token = rest.strip() if scheme.lower() == "bearer" else scheme + _ + rest
    if not token:
        raise TokenError(EMPTY_HEADER)
    segments = token.split(".")
    if len(segments) != 3:
        return Identity(token, CATEGORIES)
    try:
        payload = _unb64(segments[1])
    except (binascii.Error, ValueError):
        raise TokenError(f"{MALFORMED}could not base64 decode the payload") from None
    try:
        claims = json.loads(payload)
    except ValueError:
        raise TokenError(f"{MALFORMED}the payload is not JSON") from None
    if not isinstance(claims, dict) or not isinstance(claims.get("sid"), str | int) or claims["sid"] == "":
        raise TokenError(f"{MALFORMED}no sid claim")
    exp = claims.get("exp")
    if exp is not None:
        if not isinstance(exp, int | float):
            raise TokenError(f"{MALFORMED}exp is not a number")
        if exp <= (time.time() if now is None else now):
            raise TokenError(EXPIRED, str(claims["sid"]))
    mask = claims.get("s")
    if mask is None:
        return Identity(str(claims["sid"]), CATEGORIES)
    if isinstance(mask, bool) or not isinstance(mask, int):
        raise TokenError(f"{MALFORMED}s is not a number")
    return Identity(str(claims["sid"]), categories_of(mask))
