"""Standard Webhooks v1 signatures (the ``standardwebhooks`` package), for senders and receivers.

Headers ``webhook-id`` (the delivery's ``msg_…``, the same on every attempt),
``webhook-timestamp`` (Unix seconds of this attempt) and ``webhook-signature``:
``v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">``, one per live secret,
space-separated — during a rotation's grace period both the new and the old
secret sign, so a receiver holding either verifies.

A receiver checks a request with ``verify(headers, body, secret)``: constant-time
comparison, a timestamp within 5 minutes, and it returns the parsed event.
"""

from __future__ import annotations

import base64
import json
import secrets as _secrets
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError

SECRET_PREFIX = "whsec_"
SECRET_BYTES = 32  # the spec allows 24 to 64


class SignatureInvalid(Exception):
    """The request is not signed by the secret (or is too old, too new, or malformed)."""


def new_secret() -> str:
    return SECRET_PREFIX + base64.b64encode(_secrets.token_bytes(SECRET_BYTES)).decode()


def body_of(payload: Mapping[str, Any]) -> str:
    """The exact body that is signed and sent: the stored payload, compact JSON."""
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False)


class Signer:
    """Signs attempts with every secret given (newest first), each decoded once for a whole batch."""

    def __init__(self, secrets: Sequence[str]) -> None:
        self._webhooks = [Webhook(secret) for secret in secrets]

    def sign(self, message_id: str, at: datetime, body: str) -> dict[str, str]:
        """The three headers of one attempt."""
        return {
            "webhook-id": message_id,
            "webhook-timestamp": str(int(at.timestamp())),
            "webhook-signature": " ".join(w.sign(message_id, at, body) for w in self._webhooks),
        }


def sign(message_id: str, at: datetime, body: str, secrets: Sequence[str]) -> dict[str, str]:
    """The three headers of one attempt, signed with every secret given (newest first)."""
    return Signer(secrets).sign(message_id, at, body)


def verify(headers: Mapping[str, str], body: bytes | str, secret: str) -> Any:
    """Check a received webhook against ``secret``; returns the parsed event or raises SignatureInvalid."""
    try:
        return Webhook(secret).verify(body, dict(headers))
    except (WebhookVerificationError, ValueError, UnicodeDecodeError) as exc:
        raise SignatureInvalid(str(exc) or "bad signature") from None
