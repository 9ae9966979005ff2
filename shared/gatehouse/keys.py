"""API keys, account-scoped (``api_keys``) and staff users' (``user_api_keys``): one set of rules.

A key is ``<prefix><id>_<secret>``; only SHA-256 of the secret is stored, so it is
seen once, when issued. A key may expire (``expires_at``); revoking it deletes its
row, and its audit row says who did it and when. Every request reads the key's row
(nothing is cached), so a revoked or expired key fails on the next request in every
process. ``last_used_at`` moves at most once per ``TOUCH_EVERY`` of a key: a request
on a key touched less than that ago costs no write.

Each table's store (gatehouse.accounts, gatehouse.users) owns its ``KeyTable`` and is
the table's one writer; this module holds the SQL they share.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from sqlalchemy import Connection, Engine, text

from gatehouse import audit
from gatehouse.errors import NotFound, ValidationFailed

if TYPE_CHECKING:
    from gatehouse.uow import Tx

TOUCH_EVERY = "1 minute"
# A key that authenticates: not expired. Its row gone is revoked.
LIVE = "(expires_at IS NULL OR expires_at > now())"
# Its last use was written longer ago than TOUCH_EVERY (or never): this use is written.
STALE = f"(last_used_at IS NULL OR last_used_at < now() - interval '{TOUCH_EVERY}')"
COLUMNS = "id, created_at, last_used_at, expires_at"
KEY_ID = re.compile(r"[0-9a-f]{16}")  # secrets.token_hex(8)


@dataclass(frozen=True)
class KeyRecord:
    """What may be shown of a key: never its secret or hash."""

    id: str
    created_at: datetime
    last_used_at: datetime | None
    expires_at: datetime | None

    def audited(self) -> dict[str, str | None]:
        """Its dates, as an audit row holds them (the row's entity_id is the key's id)."""
        return {
            k: v.isoformat() if isinstance(v, datetime) else v for k, v in asdict(self).items() if k != "id"
        }


@dataclass(frozen=True)
class Touched:
    """The row of ``KeyTable.touch_sql`` (a prepared statement needs a row type)."""

    id: str


def sha256(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def split(token: str, prefix: str) -> tuple[str, str] | None:
    """``(id, secret)`` of a ``<prefix><id>_<secret>`` token; None for any other token."""
    if not token.startswith(prefix):
        return None
    key_id, _, secret = token[len(prefix) :].partition("_")
    return key_id, secret


class KeyTable:
    """The SQL of one key table whose keys belong to rows of ``owner`` (``owner_live`` selects them;
    ``what`` names one in a 404)."""

    def __init__(
        self,
        table: str,
        *,
        entity: str,
        what: str,
        owner_column: str,
        owner: str,
        owner_live: str,
        prefix: str,
    ) -> None:
        self.table, self.entity, self.owner_column, self.prefix = table, entity, owner_column, prefix
        self._what, self._owner, self._owner_live = what, owner, owner_live
        self._touch = f"UPDATE {table} SET last_used_at = now() WHERE id = {{id}} AND {STALE}"
        # The same write as ``touch``, as a prepared statement (gatehouse.db.Statements).
        self.touch_sql = self._touch.format(id="%(id)s") + " RETURNING id"

    def touch(self, conn: Connection, key_id: str) -> None:
        """Record a use of the key, unless one was recorded less than TOUCH_EVERY ago."""
        conn.execute(text(self._touch.format(id=":id")), {"id": key_id})

    def issue(self, tx: Tx, owner_id: object, *, expires_at: datetime | None, actor: str) -> str:
        """A new key of a live owner (else NotFound): its token, seen this once; only its hash is kept."""
        key_id, secret = secrets.token_hex(8), secrets.token_urlsafe(32)
        row = tx.conn.execute(
            text(
                f"INSERT INTO {self.table} (id, {self.owner_column}, secret_sha256, expires_at) "
                f"SELECT :id, o.id, :sha, :expires FROM {self._owner} o "
                f"WHERE o.id = :owner AND {self._owner_live} RETURNING {COLUMNS}, expires_at <= now()"
            ),
            {"id": key_id, "owner": owner_id, "sha": sha256(secret), "expires": expires_at},
        ).one_or_none()
        if row is None:
            raise NotFound(f"{self._what} {owner_id} not found")
        if row[-1]:  # compared with the database's clock, which every check uses
            raise ValidationFailed("expiresAt must be in the future", field="expiresAt")
        key = KeyRecord(*row[:-1])
        self._audit(tx.conn, "key.issue", owner_id, key, actor=actor, before=None, after=key.audited())
        return f"{self.prefix}{key_id}_{secret}"

    def listed(self, engine: Engine, owner_id: object) -> list[KeyRecord]:
        """A live owner's keys (else NotFound), newest first, the expired ones too (until revoked)."""
        with engine.connect() as conn:
            owner = conn.execute(
                text(f"SELECT 1 FROM {self._owner} o WHERE o.id = :owner AND {self._owner_live}"),
                {"owner": owner_id},
            ).one_or_none()
            if owner is None:
                raise NotFound(f"{self._what} {owner_id} not found")
            rows = conn.execute(
                text(
                    f"SELECT {COLUMNS} FROM {self.table} WHERE {self.owner_column} = :owner "
                    "ORDER BY created_at DESC, id"
                ),
                {"owner": owner_id},
            )
            return [KeyRecord(*row) for row in rows]

    def revoke(self, tx: Tx, owner_id: object, key_id: str, *, actor: str) -> None:
        """Delete one key of the owner (else NotFound): it fails from the next request on."""
        # Anything but a key id (a NUL byte, which PostgreSQL text refuses) is no key of theirs.
        if not KEY_ID.fullmatch(key_id) or not self.revoke_all(tx, owner_id, actor=actor, key_id=key_id):
            raise NotFound(f"key {key_id} of {self._what} {owner_id} not found")

    def revoke_all(
        self, tx: Tx, owner_id: object, *, actor: str, key_id: str | None = None
    ) -> list[KeyRecord]:
        """Delete every key of the owner (or only ``key_id``); returns those deleted."""
        rows = tx.conn.execute(
            text(
                f"DELETE FROM {self.table} WHERE {self.owner_column} = :owner "
                f"AND (CAST(:id AS text) IS NULL OR id = :id) RETURNING {COLUMNS}"
            ),
            {"owner": owner_id, "id": key_id},
        )
        revoked = [KeyRecord(*row) for row in rows]
        for key in revoked:
            self._audit(tx.conn, "key.revoke", owner_id, key, actor=actor, before=key.audited(), after=None)
        return revoked

    def _audit(
        self,
        conn: Connection,
        action: str,
        owner_id: object,
        key: KeyRecord,
        *,
        actor: str,
        before: dict | None,
        after: dict | None,
    ) -> None:
        owner = {self.owner_column: str(owner_id)}
        audit.record(
            conn,
            actor=actor,
            action=action,
            entity=self.entity,
            entity_id=key.id,
            before=None if before is None else {**owner, **before},
            after=None if after is None else {**owner, **after},
        )
