"""Console sessions: kept in Redis, named by an opaque random id in the cookie, with the CSRF token of each.

The cookie holds only the session id (32 random bytes); nothing in it derives from
a credential. The session lives at ``<prefix>:console:session:<HMAC(CONSOLE_SECRET, id)>``
(so a copy of Redis holds no usable cookie) as ``{"who", "at"}``: ``who`` is
``admin:<HMAC(CONSOLE_SECRET, ADMIN_TOKEN)>`` (a new token ends every admin session) or
``key:<id>`` (a staff user's key, checked again on every request, so revoking it, its
expiry or its user's removal ends the session); ``at`` is when it began. Each request
renews its idle timeout (CONSOLE_IDLE_TIMEOUT_MS, the key's TTL); past CONSOLE_SESSION_MS
after ``at`` it ends however busy. Logout deletes it. Every API process reads the same
Redis, so a session ended in one is ended in all.

The CSRF token is an HMAC of the session id: every form of that session carries it,
a cross-site page cannot read it, and it dies with its session.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import time
from dataclasses import dataclass

from redis import Redis

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


def session_key(prefix: str, secret: str, sid: str) -> str:
    return f"{prefix}:console:session:{_mac(secret, 'session', sid)}"


def _mac(secret: str, purpose: str, value: str) -> str:
    return hmac.new(secret.encode(), f"{purpose}:{value}".encode(), hashlib.sha256).hexdigest()


class Sessions:
    def __init__(
        self,
        accounts: Accounts,
        users: Users,
        redis: Redis,
        *,
        prefix: str,
        admin_token: str | None,
        console_secret: str | None,
        idle_ms: int,
        session_ms: int,
    ) -> None:
        if not console_secret:
            raise ConfigurationError("the console needs CONSOLE_SECRET to keep its sessions")
        self.accounts, self.users, self.redis = accounts, users, redis
        self._prefix, self._secret = prefix, console_secret
        self._admin = _mac(console_secret, "admin", admin_token) if admin_token else None
        self.idle_ms, self.session_ms = idle_ms, session_ms

    def _key(self, sid: str) -> str:
        return session_key(self._prefix, self._secret, sid)

    def csrf_of(self, sid: str) -> str:
        return _mac(self._secret, "csrf", sid)

    def open(self, token: str) -> tuple[str, Principal] | None:
        """A new session (its id, the cookie's value) for a valid admin token or staff key; None otherwise."""
        principal = self.accounts.authenticate(token)
        if principal is None or not principal.admin:
            return None
        who = f"key:{Users.key_id(token)}" if principal.user_id else f"admin:{self._admin}"
        sid = secrets.token_urlsafe(32)
        record = json.dumps({"who": who, "at": int(time.time() * 1000)})
        self.redis.set(self._key(sid), record, px=min(self.idle_ms, self.session_ms))
        return sid, principal

    def load(self, sid: str | None) -> ConsoleSession | None:
        """The session of a cookie, if it is live and its credential still stands (each load renews it)."""
        if not sid:
            return None
        key = self._key(sid)
        raw = self.redis.getex(key, px=self.idle_ms)
        if raw is None:
            return None
        data = json.loads(raw)
        principal = self._principal(str(data["who"]))
        if principal is None or time.time() * 1000 - data["at"] > self.session_ms:
            self.redis.delete(key)
            return None
        return ConsoleSession(sid=sid, principal=principal, csrf=self.csrf_of(sid))

    def _principal(self, who: str) -> Principal | None:
        kind, _, ref = who.partition(":")
        if kind == "admin" and self._admin is not None and hmac.compare_digest(ref, self._admin):
            return Principal(admin=True)
        if kind == "key" and (user := self.users.key_owner(ref)) is not None and user.role == "admin":
            return Principal(admin=True, user_id=user.id)
        return None

    def close(self, sid: str) -> None:
        """Logout: the session ends in every API process at once."""
        self.redis.delete(self._key(sid))

    def csrf_valid(self, session: ConsoleSession, token: str | None) -> bool:
        return bool(token) and hmac.compare_digest(session.csrf, str(token))
