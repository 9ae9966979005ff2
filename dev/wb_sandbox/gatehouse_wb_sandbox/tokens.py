"""WB API tokens: JWT-shaped tokens for tests and the seller a request speaks for.

WB tokens are JWTs whose ``sid`` claim is the seller account (``acc`` is the
token type: 1 Base, 2 Test, 3 Personal, 4 Service). The sandbox never checks
signatures; it only reads the claims, like a stand-in should.
"""

from __future__ import annotations

import base64
import binascii
import json
import time

EMPTY_HEADER = "empty Authorization header"
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


def make_token(sid: str, *, acc: int = 3, exp: int | None = None) -> str:
    """An unsigned JWT-shaped token for seller ``sid`` (``exp``: epoch seconds; None: no expiry).

    Deterministic, so a test or ``make run`` can mint the same token twice.
    """
    header = {"alg": "ES256", "kid": "gatehouse-wb-sandbox", "typ": "JWT"}
    claims: dict[str, object] = {"sid": sid, "acc": acc}
    if exp is not None:
        claims["exp"] = exp
    parts = (json.dumps(header).encode(), json.dumps(claims).encode(), b"unsigned")
    return ".".join(_b64(part) for part in parts)


def seller_of(authorization: str | None, *, now: float | None = None) -> str:
    """The seller id a request speaks for: the JWT's ``sid``, or a raw (non-JWT) token itself."""
    scheme, _, rest = (authorization or "").strip().partition(" ")
    token = rest.strip() if scheme.lower() == "bearer" else scheme + _ + rest
    if not token:
        raise TokenError(EMPTY_HEADER)
    segments = token.split(".")
    if len(segments) != 3:
        return token
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
    return str(claims["sid"])
