"""The job store: every state change of a job row is one conditional UPDATE here.

The conditions are the concurrency story:

- create: INSERT … ON CONFLICT on the unique partial index of live jobs, so
  concurrent identical requests produce one row (alreadyRunning for the rest);
- claim: waiting|delayed → active only for the message's ``delivery``, or an
  active row whose lease ran out (its worker died); it bumps ``claims``;
- every later write of a run is fenced by ``claims`` and ``state = 'active'``,
  so a worker that lost its row to a redelivery cannot overwrite it.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Engine, and_, func, or_, select, text, tuple_, update
from sqlalchemy.dialects.postgresql import insert as pg_insert

from gatehouse.models import ACTIVE, COMPLETED, DELAYED, FAILED, LIVE_STATES, WAITING, Job

T = Job.__table__
C = T.c


def utcnow() -> datetime:
    return datetime.now(UTC)


def ms_to_datetime(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, UTC)


@dataclass(frozen=True)
class Delivery:
    """What a message needs to (re)deliver a job: the row id and its delivery number."""

    job_id: uuid.UUID
    queue: str
    actor: str
    delivery: int
    eta_ms: int | None = None


@dataclass(frozen=True)
class Claim:
    """A claimed run: the row as claimed and the fencing token for later writes."""

    job: Job
    claims: int

    @property
    def job_id(self) -> uuid.UUID:
        return self.job.id

    @property
    def key(self) -> tuple[uuid.UUID, int]:
        """Identifies this run of the job (a redelivery after a lost lease is another run)."""
        return (self.job.id, self.claims)


def _delivery(row: Any, eta_ms: int | None = None) -> Delivery:
    return Delivery(row.id, row.queue, row.type, row.delivery, eta_ms)


class JobStore:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        # Every operation here is one statement: run it in autocommit, one round trip
        # instead of three (BEGIN, statement, COMMIT).
        self._autocommit = engine.execution_options(isolation_level="AUTOCOMMIT")

    # -- producer side -------------------------------------------------------------

    def create(
        self,
        *,
        type: str,
        queue: str,
        tier: str,
        account_id: uuid.UUID | None,
        max_attempts: int,
        payload: dict[str, Any] | None = None,
    ) -> tuple[Job, bool]:
        """Insert a waiting job, or return the live job of (account, type).

        Returns ``(job, created)``; ``created`` is False when another live job
        of the same account and type already exists (alreadyRunning).
        """
        insert = (
            pg_insert(T)
            .values(
                id=uuid.uuid4(),
                type=type,
                queue=queue,
                tier=tier,
                account_id=account_id,
                max_attempts=max_attempts,
                payload=payload or {},
                state=WAITING,
            )
            .on_conflict_do_nothing(
                index_elements=["account_id", "type"],
                # A literal predicate: PostgreSQL matches it to the partial index's own.
                index_where=text(f"state IN {LIVE_STATES}"),
            )
            .returning(T)
        )
        live = select(T).where(C.account_id == account_id, C.type == type, C.state.in_(LIVE_STATES))
        # The live job can finish between the conflicting insert and the read;
        # then the next insert succeeds.
        for _ in range(5):
            with self._autocommit.connect() as conn:
                row = conn.execute(insert).first()
                if row is not None:
                    return Job.model_validate(row._mapping), True
                row = conn.execute(live).first()
                if row is not None:
                    return Job.model_validate(row._mapping), False
        raise RuntimeError(f"could not create or find a live {type} job for account {account_id}")

    def get(self, job_id: uuid.UUID) -> Job | None:
        with self._autocommit.connect() as conn:
            row = conn.execute(select(T).where(C.id == job_id)).first()
        return Job.model_validate(row._mapping) if row else None

    def list_for_account(
        self,
        account_id: uuid.UUID,
        *,
        state: str | None = None,
        type: str | None = None,
        limit: int = 50,
        before: tuple[datetime, uuid.UUID] | None = None,
    ) -> list[Job]:
        """Newest first; ``before`` is the (created_at, id) of the last job of the previous page."""
        stmt = select(T).where(C.account_id == account_id)
        if state:
            stmt = stmt.where(C.state == state)
        if type:
            stmt = stmt.where(C.type == type)
        if before:
            stmt = stmt.where(tuple_(C.created_at, C.id) < tuple_(*before))
        stmt = stmt.order_by(C.created_at.desc(), C.id.desc()).limit(limit)
        with self._autocommit.connect() as conn:
            return [Job.model_validate(r._mapping) for r in conn.execute(stmt)]

    def delivery_of(self, job: Job) -> Delivery:
        return _delivery(job)

    # -- consumer side -------------------------------------------------------------

    def claim(self, job_id: uuid.UUID, delivery: int, lease_ms: int) -> Claim | None:
        """Take the row for this delivery, or None when the message is stale."""
        stmt = (
            update(T)
            .where(
                C.id == job_id,
                C.delivery == delivery,
                or_(
                    C.state.in_((WAITING, DELAYED)),
                    and_(C.state == ACTIVE, C.lease_until < func.now()),
                ),
            )
            .values(
                state=ACTIVE,
                claims=C.claims + 1,
                lease_until=func.now() + timedelta(milliseconds=lease_ms),
                updated_at=func.now(),
            )
            .returning(T)
        )
        with self._autocommit.connect() as conn:
            row = conn.execute(stmt).first()
        if row is None:
            return None
        return Claim(Job.model_validate(row._mapping), row.claims)

    def _fenced(self, claim: Claim, **values: Any) -> Any:
        stmt = (
            update(T)
            .where(C.id == claim.job_id, C.claims == claim.claims, C.state == ACTIVE)
            .values(updated_at=func.now(), **values)
            .returning(T)
        )
        with self._autocommit.connect() as conn:
            return conn.execute(stmt).first()

    def start(self, claim: Claim, progress: dict[str, Any]) -> bool:
        """The body is about to run: record the phase and the first start."""
        row = self._fenced(claim, progress=progress, started_at=func.coalesce(C.started_at, func.now()))
        return row is not None

    def save_checkpoint(self, claim: Claim, checkpoint: dict[str, Any]) -> bool:
        """Record how far the run got; False if another worker owns the row now."""
        return self._fenced(claim, checkpoint=checkpoint) is not None

    def complete(self, claim: Claim, result: dict[str, Any] | None, progress: dict[str, Any]) -> bool:
        row = self._fenced(
            claim,
            state=COMPLETED,
            result=result,
            progress=progress,
            resume_at=None,
            lease_until=None,
            finished_at=func.now(),
        )
        return row is not None

    def fail(self, claim: Claim, error: dict[str, Any], progress: dict[str, Any]) -> bool:
        row = self._fenced(
            claim,
            state=FAILED,
            error=error,
            progress=progress,
            resume_at=None,
            lease_until=None,
            finished_at=func.now(),
        )
        return row is not None

    def reschedule(
        self,
        claim: Claim,
        *,
        eta_ms: int,
        progress: dict[str, Any],
        consume_attempt: bool,
        error: dict[str, Any] | None = None,
    ) -> Delivery | None:
        """Active → delayed until ``eta_ms`` under a new delivery number.

        A retry consumes an attempt; waiting for the gate or a WB pause does not.
        """
        values: dict[str, Any] = dict(
            state=DELAYED,
            delivery=C.delivery + 1,
            resume_at=ms_to_datetime(eta_ms),
            progress=progress,
            lease_until=None,
        )
        if consume_attempt:
            values["attempt"] = C.attempt + 1
        if error is not None:
            values["error"] = error
        row = self._fenced(claim, **values)
        return _delivery(row, eta_ms) if row else None

    def heartbeat(self, claims: list[Claim], lease_ms: int) -> set[tuple[uuid.UUID, int]]:
        """Extend the leases of running jobs; returns the (id, claims) of runs that lost theirs."""
        if not claims:
            return set()
        held = or_(*(and_(C.id == c.job_id, C.claims == c.claims) for c in claims))
        stmt = (
            update(T)
            .where(held, C.state == ACTIVE)
            .values(lease_until=func.now() + timedelta(milliseconds=lease_ms))
            .returning(C.id, C.claims)
        )
        with self._autocommit.connect() as conn:
            kept = {(r.id, r.claims) for r in conn.execute(stmt)}
        return {c.key for c in claims} - kept

    def wake(self, job_id: uuid.UUID, *, phase: str) -> Delivery | None:
        """Make a job delayed in ``phase`` due now under a new delivery (its old copy goes stale)."""
        now = utcnow()
        stmt = (
            update(T)
            .where(C.id == job_id, C.state == DELAYED, C.progress["phase"].astext == phase)
            .values(
                delivery=C.delivery + 1,
                resume_at=now,
                progress=func.jsonb_set(C.progress, text("'{resumeAt}'"), func.to_jsonb(now.isoformat())),
                updated_at=func.now(),
            )
            .returning(T)
        )
        with self._autocommit.connect() as conn:
            row = conn.execute(stmt).first()
        return _delivery(row) if row else None

    # -- reconciliation ------------------------------------------------------------

    def stranded_candidates(self, grace_ms: int) -> list[Delivery]:
        """Live rows that may have lost their message, with the eta they need.

        waiting/delayed rows untouched for the grace period (their producer is
        past its enqueue) and active rows whose lease ran out (their worker
        died). The caller keeps only those without a message in the broker.
        """
        grace = timedelta(milliseconds=grace_ms)
        settled = and_(C.state.in_((WAITING, DELAYED)), C.updated_at < func.now() - grace)
        orphaned = and_(C.state == ACTIVE, C.lease_until < func.now())
        stmt = (
            select(C.id, C.queue, C.type, C.delivery, C.resume_at)
            .where(or_(settled, orphaned))
            .order_by(C.created_at)
        )
        with self._autocommit.connect() as conn:
            return [
                _delivery(r, int(r.resume_at.timestamp() * 1000) if r.resume_at else None)
                for r in conn.execute(stmt)
            ]
