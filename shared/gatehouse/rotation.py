"""Key rotation: every stored secret encrypted again with the first key of TOKEN_ENCRYPTION_KEY.

``KeyRotation.rotate`` (``gatehouse-rotate-keys``) walks each table with encrypted columns in id
order — the accounts' WB tokens, the webhook endpoints' secrets (current and previous) — and
re-encrypts, in batches, the rows whose key id is not the first key's (gatehouse.crypto). Each
batch is one short transaction through the table's own store, locking only its rows: a run
that is stopped leaves committed batches behind, and the next run takes up only what is still
under an old key. Two runs at once write each row once (the second finds it current).
``old_key_rows`` counts what is left, per table, without decrypting anything (the console
shows it; an old key may be removed from TOKEN_ENCRYPTION_KEY once it is 0).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from gatehouse.accounts import Accounts
from gatehouse.crypto import Reencrypted
from gatehouse.uow import UnitOfWork
from gatehouse.webhooks.store import WebhookStore

TABLES = ("accounts", "webhook_endpoints")


@dataclass
class RotationRun:
    """Rows re-encrypted and rows no key decrypts, per table; the batches it took; what is left."""

    rotated: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TABLES, 0))
    unreadable: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TABLES, 0))
    batches: int = 0
    left: dict[str, int] = field(default_factory=dict)


class KeyRotation:
    def __init__(self, uow: UnitOfWork, accounts: Accounts, webhooks: WebhookStore) -> None:
        self.uow, self.accounts, self.webhooks = uow, accounts, webhooks

    def old_key_rows(self) -> dict[str, int]:
        """Per table, the rows with a secret not under the first key (or under no recorded key)."""
        return {
            "accounts": self.accounts.old_key_tokens(),
            "webhook_endpoints": self.webhooks.old_key_secrets(),
        }

    def rotate(self, *, batch_size: int, max_batches: int | None = None) -> RotationRun:
        """Re-encrypt with the first key, ``batch_size`` rows a transaction, stopping after
        ``max_batches`` (None: when nothing is left); ``left`` counts what still is not."""
        run = RotationRun()
        steps: dict[str, Callable[..., Reencrypted]] = {
            "accounts": self.accounts.reencrypt_tokens,
            "webhook_endpoints": self.webhooks.reencrypt_secrets,
        }
        for table, step in steps.items():
            after = uuid.UUID(int=0)
            while max_batches is None or run.batches < max_batches:
                with self.uow.begin() as tx:
                    batch = step(tx, after=after, limit=batch_size)
                if batch.last is None:
                    break
                run.rotated[table] += batch.rotated
                run.unreadable[table] += batch.unreadable
                run.batches += 1
                after = batch.last
        run.left = self.old_key_rows()
        return run
