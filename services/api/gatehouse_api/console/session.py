"""Console sessions: who signed in, as a signed expiring cookie, and the CSRF token of that session.

The cookie holds no secret: ``{"sid", "who"}`` signed with itsdangerous
(HMAC-SHA1 over the payload and its timestamp). ``who`` is ``admin`` (the
ADMIN_TOKEN, fingerprinted so a new token ends old sessions) or ``key:<id>``
(a staff user's key, checked again on every request, so deleting the key ends
the session). The CSRF token is an HMAC of the session id: every form of that
session carries it, a cross-site page cannot read it.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass

from itsdangerous import BadSignature, URLSafeTimedSerializer

from gatehouse.accounts import Accounts, Principal
from gatehouse.errors import ConfigurationError
from gatehouse.users import Users

COOKIE = "gatehouse_console"
CSRF_FIELD = "csrf"


@dataclass(frozen=True)
class ConsoleSession:
    sid: str
    principal: Principal
    csrf: str


def _fingerprint(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()[:16]


class Sessions:
    def __init__(
        self,
        accounts: Accounts,
        users: Users,
        *,
        admin_token: str | None,
        console_secret: str | None,
        session_ms: int,
    ) -> None:
        self.accounts, self.users = accounts, users
        admin = admin_token
        if console_secret is not None:
            secret = console_secret
        elif admin is not None:
            # Derived, not the token itself: the cookie's key never equals a bearer credential.
            secret = hmac.new(admin.encode(), b"gatehouse-console-session", hashlib.sha256).hexdigest()
        else:
            secret = None
        self._secret = secret
        self._admin = _fingerprint(admin) if admin else None
        self.max_age_s = session_ms / 1000
        self._signer = URLSafeTimedSerializer(secret, salt="gatehouse-console") if secret else None

    def _require(self) -> URLSafeTimedSerializer:
        if self._signer is None:
            raise ConfigurationError("the console needs ADMIN_TOKEN or CONSOLE_SECRET to sign its sessions")
        return self._signer

    def csrf_of(self, sid: str) -> str:
        return hmac.new(self._secret.encode(), f"csrf:{sid}".encode(), hashlib.sha256).hexdigest()

    def open(self, token: str) -> tuple[str, Principal] | None:
        """A signed cookie value for a valid admin token or staff key; None for anything else."""
        signer = self._require()
        principal = self.accounts.authenticate(token)
        if principal is None or not principal.admin:
            return None
        who = f"key:{Users.key_id(token)}" if principal.user_id else f"admin:{self._admin}"
        return signer.dumps({"sid": secrets.token_urlsafe(16), "who": who}), principal

    def load(self, cookie: str | None) -> ConsoleSession | None:
        """The session of a cookie that is signed, unexpired and whose credential still stands."""
        if not cookie or self._signer is None:
            return None
        try:
            data = self._signer.loads(cookie, max_age=self.max_age_s)
        except BadSignature:  # also SignatureExpired
            return None
        kind, _, ref = str(data.get("who", "")).partition(":")
        if kind == "admin" and self._admin is not None and hmac.compare_digest(ref, self._admin):
            principal = Principal(admin=True)
        elif kind == "key" and (user := self.users.key_owner(ref)) is not None and user.role == "admin":
            principal = Principal(admin=True, user_id=user.id)
        else:
            return None
        sid = str(data["sid"])
        return ConsoleSession(sid=sid, principal=principal, csrf=self.csrf_of(sid))

    def csrf_valid(self, session: ConsoleSession, token: str | None) -> bool:
        return bool(token) and hmac.compare_digest(session.csrf, str(token))
