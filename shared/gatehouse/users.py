"""Staff users of the B2B platform and their API keys.

A user key (``ghu_<id>_<secret>``, shown once, stored as SHA-256 of the
secret like an account key) authenticates as its user: a request made with it
knows its *requester*. The ``ADMIN_TOKEN`` stays the bootstrap credential that
creates users and issues their keys.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from sqlalchemy import CheckConstraint, Column, DateTime, Engine, UniqueConstraint, text
from sqlmodel import Field, SQLModel

from gatehouse.db import one_or_404
from gatehouse.errors import Conflict, NotFound, ValidationFailed

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
        UniqueConstraint("email", name="users_email_key"),
        CheckConstraint(f"role IN ('{ROLES[0]}')", name="users_role_valid"),
    )

    id: uuid.UUID = Field(default_factory=uuid.uuid4, primary_key=True)
    email: str
    name: str
    role: str = Field(default="admin", sa_column_kwargs={"server_default": "admin"})
    created_at: datetime = Field(
        sa_column=Column(DateTime(timezone=True), nullable=False, server_default=text("now()"))
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


@dataclass(frozen=True)
class UserRecord:
    id: uuid.UUID
    email: str
    name: str
    role: str
    created_at: datetime


def _sha256(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def normalize_email(email: str) -> str:
    email = email.strip().lower()
    if len(email) > EMAIL_MAX or not re.fullmatch(EMAIL_PATTERN, email):
        raise ValidationFailed("email must look like name@example.com", field="email")
    return email


COLUMNS = "id, email, name, role, created_at"


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
                f"ON CONFLICT (email) DO NOTHING RETURNING {COLUMNS}"
            ),
            {"id": uuid.uuid4(), "email": email, "name": name, "role": role},
        ).one_or_none()
        if row is None:
            raise Conflict(f"a user with email {email} already exists", field="email")
        return UserRecord(*row)

    def get(self, user_id: uuid.UUID) -> UserRecord:
        with self.engine.connect() as conn:
            return UserRecord(
                *one_or_404(
                    conn,
                    text(f"SELECT {COLUMNS} FROM users WHERE id = :id"),
                    {"id": user_id},
                    f"user {user_id}",
                )
            )

    def issue_key(self, tx: Tx, user_id: uuid.UUID) -> str:
        """A new key of this user; only its hash is kept, so this is the one time it is seen."""
        key_id, secret = secrets.token_hex(8), secrets.token_urlsafe(32)
        inserted = tx.conn.execute(
            text(
                "INSERT INTO user_api_keys (id, user_id, secret_sha256) "
                "SELECT :id, u.id, :sha FROM users u WHERE u.id = :user_id"
            ),
            {"id": key_id, "user_id": user_id, "sha": _sha256(secret)},
        ).rowcount
        if not inserted:
            raise NotFound(f"user {user_id} not found")
        return f"{USER_KEY_PREFIX}{key_id}_{secret}"

    def authenticate(self, token: str) -> UserRecord | None:
        """The user a ``ghu_`` key belongs to, or None when it is not a valid key."""
        if not token.startswith(USER_KEY_PREFIX):
            return None
        key_id, _, secret = token[len(USER_KEY_PREFIX) :].partition("_")
        with self.engine.connect() as conn:
            row = conn.execute(
                text(
                    "SELECT k.secret_sha256, u.id, u.email, u.name, u.role, u.created_at "
                    "FROM user_api_keys k JOIN users u ON u.id = k.user_id WHERE k.id = :id"
                ),
                {"id": key_id},
            ).one_or_none()
        if row is None or not hmac.compare_digest(row[0], _sha256(secret)):
            return None
        return UserRecord(*row[1:])

    def key_owner(self, key_id: str) -> UserRecord | None:
        """The user of key ``key_id`` while the key exists (a console session ends with its key)."""
        with self.engine.connect() as conn:
            row = conn.execute(
                text(
                    f"SELECT {', '.join('u.' + c for c in COLUMNS.split(', '))} FROM user_api_keys k "
                    "JOIN users u ON u.id = k.user_id WHERE k.id = :id"
                ),
                {"id": key_id},
            ).one_or_none()
        return None if row is None else UserRecord(*row)

    @staticmethod
    def key_id(token: str) -> str | None:
        """The id part of a ``ghu_<id>_<secret>`` key."""
        return token[len(USER_KEY_PREFIX) :].partition("_")[0] if token.startswith(USER_KEY_PREFIX) else None
