"""Staff users of the B2B platform and their API keys.

A user key (``ghu_<id>_<secret>``, shown once, stored as SHA-256 of the
secret like an account key) authenticates as its user: a request made with it
knows its *requester*. The ``ADMIN_TOKEN`` stays the bootstrap credential that
creates users, issues and revokes their keys (expiry, last use: gatehouse.keys) and
removes users: a removed user's keys are deleted, their row stays (``removed_at``)
for the audit rows, bulk operations and notifications that name them.
"""

from __future__ import annotations

import hmac
import re
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from sqlalchemy import CheckConstraint, Column, DateTime, Engine, Index, text
from sqlmodel import Field, SQLModel

from gatehouse import audit
from gatehouse.db import one_or_404
from gatehouse.errors import Conflict, NotFound, ValidationFailed
from gatehouse.keys import LIVE, STALE, KeyRecord, KeyTable, sha256, split

if TYPE_CHECKING:
    from gatehouse.uow import Tx

USER_KEY_PREFIX = "ghu_"
ROLES = ("admin",)
# Something@something.tld, no spaces or NUL; stored lower-cased, so uniqueness ignores case.
EMAIL_PATTERN = r"^[^@\s\u0000]+@[^@\s\u0000]+\.[^@\s\u0000]+$"
EMAIL_MAX = 254
NAME_MAX = 200


class User(SQLModel, table=True):
    """A staff user (role ``admin``): the requester of what their key starts."""

    __tablename__ = "users"
    __table_args__ = (
        # A removed user's e-mail is free for a new user.
        Index("users_email_key", "email", unique=True, postgresql_where=text("removed_at IS NULL")),
        CheckConstraint(f"role IN ('{ROLES[0]}')", name="users_role_valid"),
    )

    id: uuid.UUID = Field(default_factory=uuid.uuid4, primary_key=True)
    email: str
    name: str
    role: str = Field(default="admin", sa_column_kwargs={"server_default": "admin"})
    created_at: datetime = Field(
        sa_column=Column(DateTime(timezone=True), nullable=False, server_default=text("now()"))
    )
    # Removed (DELETE /v1/admin/users/{id}): its keys are gone, the row stays for the audit rows.
    removed_at: datetime | None = Field(
        default=None, sa_column=Column(DateTime(timezone=True), nullable=True)
    )


class UserKey(SQLModel, table=True):
    """A user's API key: ``ghu_<id>_<secret>``, stored as SHA-256 of the secret."""

    __tablename__ = "user_api_keys"

    id: str = Field(primary_key=True)
    user_id: uuid.UUID = Field(foreign_key="users.id", ondelete="CASCADE", index=True)
    secret_sha256: str
    created_at: datetime = Field(
        sa_column=Column(DateTime(timezone=True), nullable=False, server_default=text("now()"))
    )
    expires_at: datetime | None = Field(
        default=None, sa_column=Column(DateTime(timezone=True), nullable=True)
    )
    last_used_at: datetime | None = Field(
        default=None, sa_column=Column(DateTime(timezone=True), nullable=True)
    )


@dataclass(frozen=True)
class UserRecord:
    id: uuid.UUID
    email: str
    name: str
    role: str
    created_at: datetime


def normalize_email(email: str) -> str:
    email = email.strip().lower()
    if len(email) > EMAIL_MAX or not re.fullmatch(EMAIL_PATTERN, email):
        raise ValidationFailed("email must look like name@example.com", field="email")
    return email


COLUMNS = "id, email, name, role, created_at"
_U_COLUMNS = ", ".join(f"u.{c}" for c in COLUMNS.split(", "))
KEYS = KeyTable(
    "user_api_keys",
    entity="user_key",
    what="user",
    owner_column="user_id",
    owner="users",
    owner_live="o.removed_at IS NULL",
    prefix=USER_KEY_PREFIX,
)


class Users:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def create(self, tx: Tx, email: str, name: str, role: str = "admin") -> UserRecord:
        if role not in ROLES:
            raise ValidationFailed(f"role must be one of {', '.join(ROLES)}", field="role")
        email = normalize_email(email)
        if "\x00" in name or not name.strip() or len(name) > NAME_MAX:
            raise ValidationFailed(f"name must be 1 to {NAME_MAX} visible characters", field="name")
        row = tx.conn.execute(
            text(
                "INSERT INTO users (id, email, name, role) VALUES (:id, :email, :name, :role) "
                f"ON CONFLICT (email) WHERE removed_at IS NULL DO NOTHING RETURNING {COLUMNS}"
            ),
            {"id": uuid.uuid4(), "email": email, "name": name, "role": role},
        ).one_or_none()
        if row is None:
            raise Conflict(f"a user with email {email} already exists", field="email")
        return UserRecord(*row)

    def get(self, user_id: uuid.UUID) -> UserRecord:
        """A user not removed, or NotFound."""
        with self.engine.connect() as conn:
            return UserRecord(
                *one_or_404(
                    conn,
                    text(f"SELECT {COLUMNS} FROM users WHERE id = :id AND removed_at IS NULL"),
                    {"id": user_id},
                    f"user {user_id}",
                )
            )

    def page(self) -> list[UserRecord]:
        """Every user not removed, by e-mail (staff users are a handful)."""
        with self.engine.connect() as conn:
            rows = conn.execute(text(f"SELECT {COLUMNS} FROM users WHERE removed_at IS NULL ORDER BY email"))
            return [UserRecord(*row) for row in rows]

    def issue_key(self, tx: Tx, user_id: uuid.UUID, *, expires_at: datetime | None = None, actor: str) -> str:
        """A new key of this user (NotFound for an unknown or removed user)."""
        return KEYS.issue(tx, user_id, expires_at=expires_at, actor=actor)

    def keys(self, user_id: uuid.UUID) -> list[KeyRecord]:
        return KEYS.listed(self.engine, user_id)

    def revoke_key(self, tx: Tx, user_id: uuid.UUID, key_id: str, *, actor: str) -> None:
        KEYS.revoke(tx, user_id, key_id, actor=actor)

    def remove(self, tx: Tx, user_id: uuid.UUID, *, actor: str) -> None:
        """Mark the user removed and revoke every key of theirs; their audit rows stay, naming them."""
        row = tx.conn.execute(
            text(
                "UPDATE users SET removed_at = now() WHERE id = :id AND removed_at IS NULL "
                "RETURNING email, name"
            ),
            {"id": user_id},
        ).one_or_none()
        if row is None:
            raise NotFound(f"user {user_id} not found")
        revoked = KEYS.revoke_all(tx, user_id, actor=actor)
        audit.record(
            tx.conn,
            actor=actor,
            action="user.remove",
            entity="user",
            entity_id=str(user_id),
            before={"email": row.email, "name": row.name},
            after={"removed": True, "revokedKeys": [k.id for k in revoked]},
        )

    def authenticate(self, token: str) -> UserRecord | None:
        """The user a live ``ghu_`` key belongs to, or None when it is not one."""
        parts = split(token, USER_KEY_PREFIX)
        if parts is None:
            return None
        key_id, secret = parts
        with self.engine.connect() as conn:
            row = conn.execute(
                text(
                    f"SELECT k.secret_sha256, {STALE}, {_U_COLUMNS} FROM user_api_keys k "
                    f"JOIN users u ON u.id = k.user_id WHERE k.id = :id AND {LIVE} AND u.removed_at IS NULL"
                ),
                {"id": key_id},
            ).one_or_none()
            if row is None or not hmac.compare_digest(row[0], sha256(secret)):
                return None
            if row[1]:
                KEYS.touch(conn, key_id)
                conn.commit()
        return UserRecord(*row[2:])

    def key_owner(self, key_id: str) -> UserRecord | None:
        """The user of key ``key_id`` while the key is live (a console session ends with its key)."""
        with self.engine.connect() as conn:
            row = conn.execute(
                text(
                    f"SELECT {_U_COLUMNS} FROM user_api_keys k JOIN users u ON u.id = k.user_id "
                    f"WHERE k.id = :id AND {LIVE} AND u.removed_at IS NULL"
                ),
                {"id": key_id},
            ).one_or_none()
        return None if row is None else UserRecord(*row)

    @staticmethod
    def key_id(token: str) -> str | None:
        """The id part of a ``ghu_<id>_<secret>`` key."""
        parts = split(token, USER_KEY_PREFIX)
        return None if parts is None else parts[0]
