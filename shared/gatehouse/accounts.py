"""Seller accounts, their encrypted WB tokens, and who may act on them."""

from __future__ import annotations

import hmac
import json
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine, text

from gatehouse import audit
from gatehouse.audit import ADMIN_ACTOR
from gatehouse.crypto import Encrypted, Reencrypted, TokenCipher, reencrypt
from gatehouse.db import Statements
from gatehouse.errors import ConfigurationError, Conflict, NotFound
from gatehouse.events import Event
from gatehouse.keys import LIVE, STALE, KeyRecord, KeyTable, Touched, sha256, split
from gatehouse.models import Account
from gatehouse.paging import contains, newest_first
from gatehouse.users import USER_KEY_PREFIX, Users
from gatehouse.wb import tokens

if TYPE_CHECKING:
    from gatehouse.uow import Tx

KEY_PREFIX = "ghk_"
TOKENS = Encrypted("accounts", (("wb_token_encrypted", "wb_token_key_id"),))


@dataclass(frozen=True)
class Principal:
    """Who is calling: the admin token, a staff user (``user_id``; role admin), or one account's key."""

    admin: bool = False
    account_id: uuid.UUID | None = None
    # The staff user of a user key: the requester of what the request starts.
    user_id: uuid.UUID | None = None
    # An account key's account is switched on, and its token's categories as WB answered them (read
    # with the key: its creates need no other read).
    account_active: bool = True
    account_access: dict[str, str] | None = None

    @property
    def bootstrap(self) -> bool:
        """The ADMIN_TOKEN itself (no user behind it)."""
        return self.admin and self.user_id is None

    @property
    def actor(self) -> str:
        """Who audit rows name: the user's id, or "admin" for the bootstrap token."""
        return str(self.user_id) if self.user_id else ADMIN_ACTOR

    def may_see(self, account_id: uuid.UUID | None) -> bool:
        return self.admin or (account_id is not None and account_id == self.account_id)


ADMIN = Principal(admin=True)


ACCOUNT_COLUMNS = ", ".join(Account.__table__.columns.keys())
SQL_ACCOUNT = f"SELECT {ACCOUNT_COLUMNS} FROM accounts WHERE id = %(id)s"
SQL_KEY = (
    f"SELECT account_id, secret_sha256, {STALE} AS stale, "
    "accounts.active AS account_active, accounts.token_access AS account_access "
    f"FROM api_keys JOIN accounts ON accounts.id = api_keys.account_id WHERE api_keys.id = %(id)s AND {LIVE}"
)
# The event raised when WB rejects an account's token (webhooks; docs/api/webhooks.md).
TOKEN_INVALID_EVENT = "wb.account.token_invalid"
# ...and when its token's expiry comes within WB_TOKEN_EXPIRY_WARNING_MS (once per token).
TOKEN_EXPIRING_EVENT = "wb.account.token_expiring"
KEYS = KeyTable(
    "api_keys",
    entity="account_key",
    what="account",
    owner_column="account_id",
    owner="accounts",
    owner_live="true",
    prefix=KEY_PREFIX,
)


@dataclass(frozen=True)
class _Key:
    account_id: uuid.UUID
    secret_sha256: str
    stale: bool
    account_active: bool
    account_access: dict[str, str] | None


@dataclass(frozen=True)
class AccountListing:
    """An account as a list shows it (no token): a plain record, a fraction of an ``Account``'s
    cost to build — a hot-only walk of the console reads a thousand of them."""

    id: uuid.UUID
    name: str
    active: bool
    created_at: datetime


@dataclass(frozen=True)
class ActiveAccount:
    """An active account as a fan-out walks them: whether WB rejected its token, what it denied."""

    id: uuid.UUID
    token_invalid: bool
    denied: frozenset[str]


@dataclass(frozen=True)
class AccountChange:
    """What a PATCH of an account changes; None leaves a field as it is."""

    name: str | None = None
    wb_token: str | None = None
    active: bool | None = None


def require_active(account_id: uuid.UUID, active: bool) -> None:
    """A switched-off account takes no new work (its live jobs finish): 409 ACCOUNT_INACTIVE."""
    if not active:
        raise Conflict(f"account {account_id} is switched off: it takes no new jobs", code="ACCOUNT_INACTIVE")


class Accounts:
    def __init__(
        self,
        engine: Engine,
        statements: Statements,
        cipher: TokenCipher | None,
        admin_token: str | None,
        users: Users | None = None,
    ) -> None:
        self.engine = engine
        self._statements = statements
        self._cipher = cipher
        self._admin_token = admin_token
        self._users = users or Users(engine)

    @property
    def cipher(self) -> TokenCipher:
        if self._cipher is None:
            raise ConfigurationError("TOKEN_ENCRYPTION_KEY is not set: WB tokens cannot be stored or read")
        return self._cipher

    def create(self, tx: Tx, name: str, wb_token: str, *, now: datetime) -> Account:
        """A new account; its token's categories and seller are unknown until account-verify ends.
        An expired token is refused (422 on ``wbToken``)."""
        params = {
            "id": uuid.uuid4(),
            "name": name,
            "token": self.cipher.encrypt(wb_token),
            "key_id": self.cipher.key_id,
            "expires": tokens.require_unexpired(wb_token, now=now),
        }
        row = tx.conn.execute(
            text(
                "INSERT INTO accounts (id, name, wb_token_encrypted, wb_token_key_id, token_expires_at) "
                f"VALUES (:id, :name, :token, :key_id, :expires) RETURNING {ACCOUNT_COLUMNS}"
            ),
            params,
        ).one()
        return Account(**row._mapping)

    def update(
        self, tx: Tx, account_id: uuid.UUID, change: AccountChange, *, actor: str, now: datetime
    ) -> Account:
        """Rename, set a new WB token (encrypted; it clears ``token_invalid`` and resets what WB said
        of the old one: categories, seller, expiry; an expired one is refused), switch on or off.
        Audited with what changed (of the token: that it did, never its value)."""
        was = tx.conn.execute(
            text(f"SELECT {ACCOUNT_COLUMNS} FROM accounts WHERE id = :id FOR UPDATE"), {"id": account_id}
        ).one_or_none()
        if was is None:
            raise NotFound(f"account {account_id} not found")
        sets, params = [], {"id": account_id, "name": change.name, "active": change.active}
        if change.name is not None:
            sets.append("name = :name")
        if change.active is not None:
            sets.append("active = :active")
        if change.wb_token is not None:
            expires = tokens.require_unexpired(change.wb_token, now=now)
            sets += [
                "wb_token_encrypted = :token",
                "wb_token_key_id = :key_id",
                "token_invalid = NULL",
                "token_access = NULL",
                "seller = NULL",
                "token_expires_at = :expires",
                "token_expiry_warned_at = NULL",
            ]
            params |= {
                "token": self.cipher.encrypt(change.wb_token),
                "key_id": self.cipher.key_id,
                "expires": expires,
            }
        row = tx.conn.execute(
            text(f"UPDATE accounts SET {', '.join(sets)} WHERE id = :id RETURNING {ACCOUNT_COLUMNS}"), params
        ).one()
        before, after = {}, {}
        for field, old, new in (("name", was.name, row.name), ("active", was.active, row.active)):
            if old != new:
                before[field], after[field] = old, new
        if change.wb_token is not None:
            after["wbToken"] = "replaced"
            if was.token_invalid is not None:
                before["tokenInvalid"], after["tokenInvalid"] = was.token_invalid, None
        audit.record(
            tx.conn,
            actor=actor,
            action="account.update",
            entity="account",
            entity_id=str(account_id),
            before=before,
            after=after,
        )
        return Account(**row._mapping)

    def _still_current(self, tx: Tx, account_id: uuid.UUID, wb_token: str) -> Any:
        """The account's row (locked) while ``wb_token`` is still its token; None once replaced."""
        was = tx.conn.execute(
            text("SELECT wb_token_encrypted, token_invalid FROM accounts WHERE id = :id FOR UPDATE"),
            {"id": account_id},
        ).one_or_none()
        if was is None or not was.wb_token_encrypted:
            return None
        if not hmac.compare_digest(self.cipher.decrypt(was.wb_token_encrypted).encode(), wb_token.encode()):
            return None
        return was

    def token_rejected(
        self, tx: Tx, account_id: uuid.UUID, wb_token: str, *, job_id: uuid.UUID, status: int
    ) -> Event | None:
        """WB rejected ``wb_token`` (``status``, 401) on job ``job_id``: if it is still the account's
        token, the account is marked, and its scheduled fan-outs skip it until a new token is set.
        Returns the event to raise, or None when it was marked already (the first rejection is the one
        kept and announced) or the token was replaced since the job read it."""
        was = self._still_current(tx, account_id, wb_token)
        if was is None or was.token_invalid is not None:
            return None
        row = tx.conn.execute(
            text(
                "UPDATE accounts SET token_invalid = jsonb_build_object("
                "'since', now(), 'jobId', CAST(:job_id AS text), 'status', CAST(:status AS int)) "
                "WHERE id = :id RETURNING token_invalid"
            ),
            {"id": account_id, "job_id": str(job_id), "status": status},
        ).one()
        return Event(TOKEN_INVALID_EVENT, {"accountId": str(account_id), **row.token_invalid})

    def scope_denied(self, tx: Tx, account_id: uuid.UUID, wb_token: str, category: str) -> None:
        """WB answered ``wb_token`` 401 ``token scope not allowed`` on ``category``'s host: while it is
        still the account's token, that category is denied (its jobs are refused, its fan-outs skip
        the account); the token stays valid for the others."""
        if self._still_current(tx, account_id, wb_token) is not None:
            tx.conn.execute(
                text(
                    "UPDATE accounts SET token_access = coalesce(token_access, '{}'::jsonb) "
                    "|| jsonb_build_object(CAST(:category AS text), 'denied') WHERE id = :id"
                ),
                {"id": account_id, "category": category},
            )

    def verified(
        self, tx: Tx, account_id: uuid.UUID, wb_token: str, access: dict[str, str], seller: dict | None
    ) -> bool:
        """What account-verify learnt of ``wb_token`` (its categories, WB's seller-info), kept while it
        is still the account's token; False when it was replaced meanwhile (nothing written)."""
        if self._still_current(tx, account_id, wb_token) is None:
            return False
        tx.conn.execute(
            text(
                "UPDATE accounts SET token_access = coalesce(token_access, '{}'::jsonb) "
                "|| CAST(:access AS jsonb), seller = coalesce(CAST(:seller AS jsonb), seller) WHERE id = :id"
            ),
            {
                "id": account_id,
                "access": json.dumps(access),
                "seller": json.dumps(seller) if seller else None,
            },
        )
        return True

    def warn_expiring(self, tx: Tx, *, within_ms: int, limit: int = 1_000) -> list[Event]:
        """The ``wb.account.token_expiring`` events of active accounts whose token expires within
        ``within_ms`` and was not announced yet: each announced once (a new token is announced anew)."""
        rows = tx.conn.execute(
            text(
                "UPDATE accounts SET token_expiry_warned_at = now() WHERE id IN ("
                " SELECT id FROM accounts WHERE active AND token_expiry_warned_at IS NULL"
                " AND token_expires_at < now() + make_interval(secs => :within / 1000.0)"
                " ORDER BY token_expires_at LIMIT :limit FOR UPDATE SKIP LOCKED"
                ") RETURNING id, token_expires_at"
            ),
            {"within": within_ms, "limit": limit},
        )
        return [
            Event(
                TOKEN_EXPIRING_EVENT,
                {"accountId": str(row.id), "tokenExpiresAt": row.token_expires_at.isoformat()},
            )
            for row in rows
        ]

    def get(self, account_id: uuid.UUID) -> Account:
        # One prepared statement on the hot path (a transaction would be three round trips).
        account = self._statements.one(SQL_ACCOUNT, {"id": account_id}, Account)
        if account is None:
            raise NotFound(f"account {account_id} not found")
        return account

    def wb_token(self, account_id: uuid.UUID) -> str:
        encrypted = self.get(account_id).wb_token_encrypted
        if not encrypted:
            raise NotFound(f"account {account_id} has no WB token")
        return self.cipher.decrypt(encrypted)

    def reencrypt_tokens(self, tx: Tx, *, after: uuid.UUID, limit: int) -> Reencrypted:
        """The next ``limit`` WB tokens after account ``after`` not under the first key, encrypted with it."""
        return reencrypt(tx.conn, TOKENS, self.cipher, after=after, limit=limit)

    def old_key_tokens(self) -> int:
        """Accounts whose WB token is not under the first key of TOKEN_ENCRYPTION_KEY."""
        with self.engine.connect() as conn:
            return TOKENS.old_key_rows(conn, self.cipher)

    def active_ids(self, *, after: uuid.UUID | None = None, limit: int) -> list[ActiveAccount]:
        """Up to ``limit`` active accounts in id order, those after ``after`` (a fan-out's chunks), each
        with whether WB rejected its token and the categories it refused it (a fan-out skips them)."""
        with self.engine.connect() as conn:
            return [
                ActiveAccount(row.id, row.token_invalid, frozenset(row.denied or ()))
                for row in conn.execute(
                    text(
                        "SELECT id, token_invalid IS NOT NULL AS token_invalid, ARRAY("
                        " SELECT key FROM jsonb_each_text(token_access) WHERE value = 'denied'"
                        ") AS denied FROM accounts WHERE active AND id > :after ORDER BY id LIMIT :limit"
                    ),
                    {"after": after or uuid.UUID(int=0), "limit": limit},
                )
            ]

    def page(
        self,
        *,
        name: str | None = None,
        ids: list[uuid.UUID] | None = None,
        limit: int = 50,
        before: tuple[datetime, uuid.UUID] | None = None,
    ) -> list[AccountListing]:
        """Accounts newest first, ``name`` a case-insensitive part of theirs, only those of ``ids`` if
        given; ``before`` is the (created_at, id) of the last account of the previous page."""
        like = None if name is None else contains(name)
        sql, params = newest_first(
            "SELECT id, name, active, created_at FROM accounts",
            {"name": like, "ids": ids},
            limit=limit,
            before=before,
            param=lambda p: f":{p}",
            compare={"name": "name ILIKE", "ids": "id = ANY({})"},
        )
        with self.engine.connect() as conn:
            return [AccountListing(*row) for row in conn.execute(text(sql), params)]

    def names(self, ids: set[uuid.UUID]) -> dict[uuid.UUID, str]:
        """The names of those of ``ids`` that exist, in one statement (a list shows them beside ids)."""
        return {a.id: a.name for a in self.page(ids=list(ids), limit=len(ids))} if ids else {}

    def named(self, name: str) -> list[uuid.UUID]:
        """The accounts called ``name`` (any case), two at most: one answers, two is ambiguous.

        A scan of the accounts (no index on their names): a filter form's one lookup."""
        with self.engine.connect() as conn:
            return list(
                conn.execute(
                    text("SELECT id FROM accounts WHERE lower(name) = lower(:name) LIMIT 2"), {"name": name}
                ).scalars()
            )

    def issue_key(
        self, tx: Tx, account_id: uuid.UUID, *, expires_at: datetime | None = None, actor: str
    ) -> str:
        """A new account-scoped key (NotFound for an unknown account)."""
        return KEYS.issue(tx, account_id, expires_at=expires_at, actor=actor)

    def keys(self, account_id: uuid.UUID) -> list[KeyRecord]:
        return KEYS.listed(self.engine, account_id)

    def revoke_key(self, tx: Tx, account_id: uuid.UUID, key_id: str, *, actor: str) -> None:
        KEYS.revoke(tx, account_id, key_id, actor=actor)

    def authenticate(self, token: str) -> Principal | None:
        if self._admin_token and hmac.compare_digest(token.encode(), self._admin_token.encode()):
            return ADMIN
        if token.startswith(USER_KEY_PREFIX):
            user = self._users.authenticate(token)
            return None if user is None else Principal(admin=user.role == "admin", user_id=user.id)
        parts = split(token, KEY_PREFIX)
        if parts is None:
            return None
        key_id, secret = parts
        # Every account-key request pays this: one prepared statement, no model layer; and, once
        # a minute per key, a second one that writes when it was last used.
        key = self._statements.one(SQL_KEY, {"id": key_id}, _Key)
        if key is None or not hmac.compare_digest(key.secret_sha256, sha256(secret)):
            return None
        if key.stale:
            self._statements.one(KEYS.touch_sql, {"id": key_id}, Touched)
        return Principal(
            account_id=key.account_id, account_active=key.account_active, account_access=key.account_access
        )
