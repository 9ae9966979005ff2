"""The lease keeper: one thread per worker process that keeps its runs' claims alive.

Every WORKER_HEARTBEAT_MS it:

1. refreshes this process's liveness key (gatehouse.workers), which also says
   how many threads it runs and which queues it consumes (the overview shows them);
2. when due (JOB_HEARTBEAT_MS), renews the row leases of all running jobs in
   one UPDATE, and (GATE_HEARTBEAT_MS) their gate leases in one Redis
   pipeline; a run that lost either is told to stop before its next call, and so is a run an
   operator cancelled (the row renewal reads the flag);
3. requeues the running jobs of workers that died (their liveness key gone
   twice in a row) and of runs whose lease ran out;
4. stops runs past their time limit (gatehouse_worker.time_limits): their
   leases are no longer renewed, and a body still running after the grace is
   interrupted.

A store that does not answer costs one tick: the keeper logs and tries again.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from psycopg import Error as PgError
from psycopg_pool import PoolTimeout
from redis import RedisError

from gatehouse import metrics
from gatehouse.gate import RedisGate
from gatehouse.jobs import JobStore
from gatehouse.workers import DeadWorkers, Liveness, WorkerBeat
from gatehouse_worker.runtime import JobContext
from gatehouse_worker.time_limits import interrupt_if_overdue

log = logging.getLogger(__name__)
STORE_ERRORS = (PgError, PoolTimeout, RedisError)


@dataclass
class Held:
    """A running job as the keeper sees it; ``gate`` = (account, owner) while it holds the gate."""

    ctx: JobContext
    gate: tuple[str, str] | None = None


@dataclass(frozen=True)
class Beats:
    """How often the keeper beats, and how long the leases it renews last (the settings of the same names)."""

    worker_heartbeat_ms: int
    job_heartbeat_ms: int
    job_lease_ms: int
    gate_heartbeat_ms: int
    gate_lease_ms: int


class LeaseKeeper:
    def __init__(
        self,
        jobs: JobStore,
        gate: RedisGate,
        liveness: Liveness,
        requeue_orphans: Callable[[set[str]], int],
        beats: Beats,
        worker: str,
    ) -> None:
        self.jobs, self.gate, self.liveness, self.requeue_orphans = jobs, gate, liveness, requeue_orphans
        self.s = beats
        self.worker = worker
        self.dead = DeadWorkers(self.liveness, worker)
        self.info = WorkerBeat()
        self._held: dict[tuple[uuid.UUID, int], Held] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- what runs -----------------------------------------------------------------

    def add(self, ctx: JobContext) -> None:
        with self._lock:
            self._held[ctx.claim.key] = Held(ctx)

    def holds_gate(self, ctx: JobContext, account: str, owner: str) -> None:
        with self._lock:
            self._held[ctx.claim.key].gate = (account, owner)

    def drop_gate(self, ctx: JobContext) -> None:
        with self._lock:
            held = self._held.get(ctx.claim.key)
            if held is not None:
                held.gate = None

    def remove(self, ctx: JobContext) -> Held | None:
        with self._lock:
            return self._held.pop(ctx.claim.key, None)

    def held(self) -> list[Held]:
        with self._lock:
            return list(self._held.values())

    # -- the thread ----------------------------------------------------------------

    def start(self, *, threads: int | None = None, queues: Iterable[str] = ()) -> None:
        """Beat once before any message is taken, so no other worker takes this one for dead."""
        self.info = WorkerBeat(threads=threads, queues=tuple(sorted(queues)), started_at=datetime.now(UTC))
        try:
            self.liveness.beat(self.worker, self.info)
        except RedisError:
            log.warning("worker %s: Redis did not answer its first heartbeat; retrying", self.worker)
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="lease-keeper", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        try:
            self.liveness.leave(self.worker)
        except RedisError:
            log.info("worker %s left without removing its liveness key; it expires", self.worker)

    def _loop(self) -> None:
        now = time.monotonic()
        rows_due = gates_due = now
        # Wake for the most frequent of the three beats: a gate heartbeat shorter than the
        # liveness beat must not wait for it (its lease would run out between renewals).
        tick_ms = min(self.s.worker_heartbeat_ms, self.s.job_heartbeat_ms, self.s.gate_heartbeat_ms)
        liveness_due = now
        while not self._stop.wait(tick_ms / 1000):
            now = time.monotonic()
            if now >= liveness_due:
                liveness_due = now + self.s.worker_heartbeat_ms / 1000
                self._step("heartbeat", lambda: self.liveness.beat(self.worker, self.info))
                self._step("dead-worker recovery", self.recover)
            if now >= rows_due:
                rows_due = now + self.s.job_heartbeat_ms / 1000
                self._step("row lease renewal", self.renew_rows)
            if now >= gates_due:
                gates_due = now + self.s.gate_heartbeat_ms / 1000
                self._step("gate lease renewal", self.renew_gates)
            self.stop_overdue()

    def _step(self, what: str, step) -> None:
        try:
            step()
        except STORE_ERRORS as exc:
            log.warning("worker %s: %s failed (%s); next tick retries", self.worker, what, exc)

    # -- the steps (public for tests) -------------------------------------------------

    def renewable(self) -> list[Held]:
        """The runs whose leases are renewed: not those past their time limit (they stop, or lose them)."""
        now = time.monotonic()
        return [h for h in self.held() if not h.ctx.overdue(now)]

    def renew_rows(self) -> None:
        held = self.renewable()
        renewed = self.jobs.renew([h.ctx.claim for h in held], self.s.job_lease_ms)
        for h in held:
            if h.ctx.claim.key in renewed.lost and self._still_holds(h, h.gate):
                log.warning("job %s lost its row to another worker; it stops", h.ctx.claim.job_id)
                h.ctx.lost.set()
            elif h.ctx.claim.key in renewed.cancel and not h.ctx.cancelled.is_set():
                log.info(
                    "job %s: an operator cancelled it; it stops at its next checkpoint", h.ctx.claim.job_id
                )
                h.ctx.cancelled.set()

    def renew_gates(self) -> None:
        held = [(h, h.gate) for h in self.renewable() if h.gate is not None]
        lost = self.gate.heartbeat_many([gate for _, gate in held], lease_ms=self.s.gate_lease_ms)
        for h, gate in held:
            if gate in lost and self._still_holds(h, gate):
                log.warning("job %s lost the gate of account %s; it stops", h.ctx.claim.job_id, gate[0])
                h.ctx.lost.set()

    def _still_holds(self, held: Held, gate: tuple[str, str] | None) -> bool:
        """A run that finished (or gave its gate back) during the renewal did not lose it: it let go."""
        with self._lock:
            return self._held.get(held.ctx.claim.key) is held and held.gate == gate

    def stop_overdue(self) -> None:
        now = time.monotonic()
        for h in self.held():
            if interrupt_if_overdue(h.ctx, now):
                log.warning(
                    "job %s ran past its time limit without stopping; interrupted", h.ctx.claim.job_id
                )

    def recover(self) -> int:
        dead = self.dead.look(self.jobs.running_workers())
        sent = self.requeue_orphans(dead)
        if sent:
            log.info(
                "requeued %d job(s) of dead worker(s) %s or expired leases", sent, ", ".join(sorted(dead))
            )
            metrics.RECOVERED.inc(sent)
        return sent
