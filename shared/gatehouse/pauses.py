"""Operator holds: a queue no worker consumes, an account whose WB jobs wait (``operator_pauses``).

A queue is held when an operator paused it (POST /v1/admin/queues/{queue}/pause) or when its
module is off (gatehouse.modules): both are one answer, ``Holds.paused_queues``, which every
worker process polls to pause and resume its consumers (gatehouse_worker.holds) and which
the job pipeline asks before it claims a prefetched message. An account is held when an
operator paused it: the pipeline's admit step parks its gated jobs (phase ``paused``) and
skips its scheduled ones (``account-paused``).

``Holds`` reads the table at most every REFRESH_S per process (one small SELECT: a few rows),
as ``ModuleStates`` does; it alone writes the table, each change with its audit row.
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Literal

from sqlalchemy import Engine, text

from gatehouse import audit
from gatehouse.errors import NotFound
from gatehouse.job_types import REGISTRY
from gatehouse.modules import MODULES, REFRESH_S, ModuleStates
from gatehouse.schedules import FANOUT_QUEUE

if TYPE_CHECKING:
    from gatehouse.uow import Tx

Kind = Literal["queue", "account"]


def job_queues() -> list[str]:
    """Every queue of a declared job type: the modules', the core's, ``maintenance``, ``schedules``."""
    return sorted({t.queue for t in REGISTRY.values()} | {FANOUT_QUEUE})


@dataclass(frozen=True)
class Pause:
    kind: str
    target: str  # the queue's name, the account's id
    paused_by: str  # an actor (gatehouse.audit); for a module that is off, who switched it
    paused_at: datetime
    module: str | None = None  # set when it is a module's queue held because the module is off


COLUMNS = "kind, target, paused_by, paused_at"
SQL_ALL = text(f"SELECT {COLUMNS} FROM operator_pauses")
SQL_PAUSE = text(
    "INSERT INTO operator_pauses (kind, target, paused_by) VALUES (:kind, :target, :by) "
    f"ON CONFLICT (kind, target) DO NOTHING RETURNING {COLUMNS}"
)
SQL_RESUME = text(f"DELETE FROM operator_pauses WHERE kind = :kind AND target = :target RETURNING {COLUMNS}")
SQL_ONE = text(f"SELECT {COLUMNS} FROM operator_pauses WHERE kind = :kind AND target = :target")


class Holds:
    """What is held now: queues (an operator's pause, a module that is off) and accounts."""

    def __init__(self, engine: Engine, modules: ModuleStates) -> None:
        self.engine, self.modules = engine, modules
        self._lock = threading.Lock()
        self._pauses: dict[tuple[str, str], Pause] = {}
        self._read_at = 0.0

    def _all(self, *, fresh: bool = False) -> dict[tuple[str, str], Pause]:
        with self._lock:
            if fresh or time.monotonic() - self._read_at > REFRESH_S:
                with self.engine.connect() as conn:
                    self._pauses = {(r.kind, r.target): Pause(*r) for r in conn.execute(SQL_ALL)}
                self._read_at = time.monotonic()
            return self._pauses

    def paused_queues(self, *, fresh: bool = False) -> dict[str, Pause]:
        """Queue -> why it is held: an operator's pause first, else its module being off."""
        held: dict[str, Pause] = {}
        states = self.modules.all(fresh=fresh)
        for module in MODULES.values():
            state = states.get(module.name)
            if state is None or not state.on:
                at = state.updated_at if state else datetime.min
                by = state.updated_by if state else "nobody"
                held.update({q: Pause("queue", q, by, at, module.name) for q in module.queues})
        held.update({target: p for (kind, target), p in self._all(fresh=fresh).items() if kind == "queue"})
        return held

    def queue_paused(self, queue: str) -> bool:
        return queue in self.paused_queues()

    def paused_accounts(self) -> dict[str, Pause]:
        """Account id -> its pause."""
        return {target: p for (kind, target), p in self._all().items() if kind == "account"}

    def account_pause(self, account_id: uuid.UUID) -> Pause | None:
        return self._all().get(("account", str(account_id)))

    def expire(self) -> None:
        """The next read goes to the table (after a change commits, so this process sees it at once)."""
        with self._lock:
            self._read_at = 0.0

    # -- the one writer of operator_pauses -------------------------------------------------

    def pause(self, tx: Tx, kind: Kind, target: str, *, by: str) -> Pause:
        """Hold ``target`` (already held: the pause as it is, nothing written), audited."""
        row = tx.conn.execute(SQL_PAUSE, {"kind": kind, "target": target, "by": by}).one_or_none()
        if row is None:
            return Pause(*tx.conn.execute(SQL_ONE, {"kind": kind, "target": target}).one())
        _audit(tx, by, kind, target, "pause", {"paused": False}, {"paused": True})
        return Pause(*row)

    def resume(self, tx: Tx, kind: Kind, target: str, *, by: str) -> None:
        """Let ``target`` go (not held: nothing written), audited."""
        row = tx.conn.execute(SQL_RESUME, {"kind": kind, "target": target}).one_or_none()
        if row is not None:
            _audit(
                tx, by, kind, target, "resume", {"paused": True, "pausedBy": row.paused_by}, {"paused": False}
            )


def _audit(tx: Tx, by: str, kind: str, target: str, verb: str, before: dict, after: dict) -> None:
    audit.record(
        tx.conn, actor=by, action=f"{kind}.{verb}", entity=kind, entity_id=target, before=before, after=after
    )


def require_queue(queue: str) -> None:
    if queue not in job_queues():
        raise NotFound(f"no queue {queue!r} (queues: {', '.join(job_queues())})", code="QUEUE_NOT_FOUND")
