"""Encryption of secrets at rest (the sellers' WB tokens, the webhook secrets): Fernet, with key rotation.

TOKEN_ENCRYPTION_KEY is a comma-separated list of Fernet keys: the first encrypts, all
decrypt. A Fernet token does not say which key made it, so each encrypted column has a
companion ``…_key_id`` column holding the ``key_id`` of the key that encrypted it (the first
16 hex digits of the key's SHA-256: it names a key without weakening it). Rows under an old
key are then counted from that column, with no decryption (an index range scan for the
accounts), and
``gatehouse-rotate-keys`` (gatehouse.rotation) re-encrypts exactly those, in batches. A row
written before the column existed has no key id: it counts as old until a rotation stamps it.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass
from typing import Any

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from sqlalchemy import Connection, text

from gatehouse.errors import ConfigurationError
from gatehouse.settings import Settings


def key_id(key: str) -> str:
    """What a ``…_key_id`` column stores for the rows ``key`` encrypted."""
    return hashlib.sha256(key.encode()).hexdigest()[:16]


class Undecryptable(ConfigurationError):
    """A stored secret that no key of TOKEN_ENCRYPTION_KEY decrypts (its key was removed too early)."""


class TokenCipher:
    def __init__(self, settings: Settings) -> None:
        keys = [k.strip() for k in settings.require("token_encryption_key").split(",") if k.strip()]
        try:
            self._fernet = MultiFernet([Fernet(k) for k in keys])
        except ValueError:
            raise ConfigurationError(
                "TOKEN_ENCRYPTION_KEY must be Fernet keys (32 url-safe base64-encoded bytes each); "
                'generate one with: python -c "from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())"'
            ) from None
        self.key_id = key_id(keys[0])  # of the key that encrypts

    def encrypt(self, secret: str) -> str:
        return self._fernet.encrypt(secret.encode()).decode()

    def decrypt(self, ciphertext: str) -> str:
        try:
            return self._fernet.decrypt(ciphertext.encode()).decode()
        except InvalidToken:
            raise Undecryptable(
                "a stored secret (a WB token or a webhook secret) cannot be decrypted with TOKEN_ENCRYPTION_KEY"
            ) from None

    def rotate(self, ciphertext: str) -> str:
        """``ciphertext`` encrypted again with the first key (decrypted with whichever key made it)."""
        try:
            return self._fernet.rotate(ciphertext.encode()).decode()
        except InvalidToken:
            raise Undecryptable(
                "a stored secret cannot be decrypted with any key of TOKEN_ENCRYPTION_KEY"
            ) from None


def generate_key() -> str:
    return Fernet.generate_key().decode()


# -- the encrypted columns of a table, for its store ------------------------------------------------


@dataclass(frozen=True)
class Encrypted:
    """A table's encrypted columns, each with its key id column: what its store hands ``reencrypt``."""

    table: str
    columns: tuple[tuple[str, str], ...]  # (ciphertext column, key id column)

    def _stale(self) -> str:
        # "Not the key" as ranges below and above it, and none: an index on the key id column answers
        # each with a range scan that finds nothing once every row is current (IS DISTINCT FROM scans all).
        return " OR ".join(
            f"({c} IS NOT NULL AND ({k} < :key OR {k} > :key OR {k} IS NULL))" for c, k in self.columns
        )

    def old_key_rows(self, conn: Connection, cipher: TokenCipher) -> int:
        """Rows with a secret not under the first key (or under no recorded key): one scan, no decryption."""
        return conn.execute(
            text(f"SELECT count(*) FROM {self.table} WHERE {self._stale()}"), {"key": cipher.key_id}
        ).scalar_one()


@dataclass(frozen=True)
class Reencrypted:
    """A batch: rows written, rows left as they were (undecryptable), and the last id it looked at
    (None: nothing was left after ``after``)."""

    rotated: int
    unreadable: int
    last: Any


def reencrypt(
    conn: Connection, spec: Encrypted, cipher: TokenCipher, *, after: uuid.UUID, limit: int
) -> Reencrypted:
    """Up to ``limit`` rows of ``spec.table`` after id ``after`` (in id order) that hold a secret under
    another key, encrypted again with the first key, in the caller's transaction (its store's write);
    a row no key decrypts is left as it was (and still counts as under an old key)."""
    names = [name for pair in spec.columns for name in pair]
    rows = conn.execute(
        text(
            f"SELECT id, {', '.join(names)} FROM {spec.table} WHERE id > :after AND ({spec._stale()}) "
            "ORDER BY id LIMIT :limit FOR UPDATE"
        ),
        {"after": after, "key": cipher.key_id, "limit": limit},
    ).all()
    if not rows:
        return Reencrypted(0, 0, None)
    written: list[list[Any]] = []
    for row in rows:
        try:
            written.append(
                [
                    row[0],
                    *(_current(cipher, row[1 + 2 * i], row[2 + 2 * i]) for i in range(len(spec.columns))),
                ]
            )
        except Undecryptable:
            continue
    if written:
        sets = ", ".join(f"{c} = v.{c}, {k} = v.{k}" for c, k in spec.columns)
        arrays = ", ".join(f"CAST(:{name} AS text[])" for name in names)
        flat = [[r[0], *(x for pair in r[1:] for x in pair)] for r in written]
        conn.execute(
            text(
                f"UPDATE {spec.table} AS t SET {sets} "
                f"FROM unnest(CAST(:id AS uuid[]), {arrays}) AS v(id, {', '.join(names)}) WHERE t.id = v.id"
            ),
            {name: [r[i] for r in flat] for i, name in enumerate(["id", *names])},
        )
    return Reencrypted(len(written), len(rows) - len(written), rows[-1][0])


def _current(cipher: TokenCipher, value: str | None, key: str | None) -> tuple[str | None, str | None]:
    """(ciphertext, key id) of one column under the first key: re-encrypted unless it already is, or empty."""
    if value is None or key == cipher.key_id:
        return value, key
    return cipher.rotate(value), cipher.key_id
