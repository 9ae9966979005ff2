"""Fan-outs: a schedule's tick, and the resumable job that writes one job per active account.

    tick ─▶ FanOutHandlers.tick ─▶ fan-out job (one live per schedule) ─▶ FanOutHandlers.run
                                                                            chunk by chunk:
                                                                            one INSERT, one MULTI

- The tick (``tick``) stays thin: a module that is off creates nothing (and is not
  the schedule's last run); a per-account schedule gets its fan-out job
  (``gatehouse.schedules.FAN_OUTS``, a system job: one live per schedule), which
  carries the tick's time; a single-job schedule (a sweep) gets its one job.
- The fan-out job (``run``) walks the active accounts in id order, ``chunk_size`` at
  a time, and skips those whose WB token was rejected (``token-invalid``) or lacks a category
  the job type ``needs`` (``token-scope``), both counted in ``gatehouse_fanout_skipped_total``,
  until a new token is set. Each chunk is one
  transaction: one ``INSERT … SELECT … ON CONFLICT DO NOTHING`` of its jobs (``JobStore.create_for_accounts``; an account with a live
  job of the type gets none) and the run's checkpoint, the last account id, fenced
  by its claim. The chunk's messages go after the commit in one Redis round
  trip (``Dispatcher.send_all``). A crash loses at most the chunk that did not
  commit, and the run that resumes from the checkpoint never writes a job twice;
  a run that lost its row commits nothing.
- **Spread**: each job is due ``offset_ms(account, window)`` after the tick, the
  window being the schedule's spread (``Schedule.spread``: half its cadence unless
  set). The offset is a hash of the account id, so an account lands at the same
  moment of every tick and its data ages evenly. The job is written ``delayed``
  until then and its message carries that eta; its payload says when it is due
  (``DUE_AT_FIELD``), where its gate wait begins (``GateSpec.waits_from``).
- **Fairness**: ``SkipStreaks`` counts each (account, type)'s consecutive
  ``account-busy`` skips (the pipeline counts them). A job created when its pair's
  count has reached ``starvation_limit`` waits for the gate with the user tier's
  priority for its run (``GATE_TIER_FIELD``); a run that was not skipped resets the
  count (the job carries it, ``SKIP_STREAK_FIELD``, so a pair without skips costs
  no Redis call at its end).
"""

from __future__ import annotations

import hashlib
import logging
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from redis import Redis, RedisError

from gatehouse import metrics, traces
from gatehouse.accounts import Accounts
from gatehouse.gate.vocabulary import DUE_AT_FIELD, GATE_TIER_FIELD
from gatehouse.jobs import JobStore, datetime_to_ms, utcnow
from gatehouse.modules import ModuleStates
from gatehouse.schedules import Schedule, ScheduleRuns
from gatehouse.uow import UnitOfWork

log = logging.getLogger(__name__)

# The fan-out job's payload: when its tick ran (epoch ms), the zero of every job's offset.
TICK_FIELD = "tickAtMs"
# Why a fan-out wrote no job for an active account (gatehouse_fanout_skipped_total's reason).
TOKEN_INVALID, TOKEN_SCOPE = "token-invalid", "token-scope"
# A job's payload: its pair's consecutive account-busy skips when it was created (absent: none).
SKIP_STREAK_FIELD = "skipStreak"


def offset_ms(account_id: uuid.UUID, window_ms: int) -> int:
    """Where in the window an account's job is due: a hash of its id, the same at every tick."""
    if window_ms <= 0:
        return 0
    digest = hashlib.blake2b(account_id.bytes, digest_size=8).digest()
    return int.from_bytes(digest, "big") % window_ms


def skips_key(prefix: str, job_type: str) -> str:
    """The hash of a job type's skip streaks: account id → consecutive account-busy skips."""
    return f"{prefix}:skips:{job_type}"


class SkipStreaks:
    """Consecutive ``account-busy`` skips per (account, job type), in Redis under ``prefix``.

    Redis, not a table: a count is written at every skip and read once a tick per
    chunk (one HMGET of a thousand accounts), and losing it (a Redis restart) only
    delays one promotion by a few ticks: it is soft state, like the gate it is about.
    One hash per job type, so a chunk's counts are one command.
    """

    def __init__(self, redis: Redis, *, prefix: str) -> None:
        self.redis = redis
        self.prefix = prefix

    def of(self, job_type: str, account_ids: Sequence[uuid.UUID]) -> list[int]:
        if not account_ids:
            return []
        counts = self.redis.hmget(skips_key(self.prefix, job_type), [str(a) for a in account_ids])
        return [int(c) if c is not None else 0 for c in counts]

    def skipped(self, job_type: str, account_id: uuid.UUID) -> int:
        return int(self.redis.hincrby(skips_key(self.prefix, job_type), str(account_id), 1))

    def reset(self, job_type: str, account_id: uuid.UUID) -> None:
        self.redis.hdel(skips_key(self.prefix, job_type), str(account_id))


class FanOutHandlers:
    """A schedule's tick, and its fan-out job's run (see the module's docstring)."""

    def __init__(
        self,
        uow: UnitOfWork,
        jobs: JobStore,
        accounts: Accounts,
        modules: ModuleStates,
        runs: ScheduleRuns,
        streaks: SkipStreaks,
        *,
        schedules: dict[str, Schedule],
        chunk_size: int,
        starvation_limit: int,
    ) -> None:
        self.uow, self.jobs, self.accounts, self.modules = uow, jobs, accounts, modules
        self.runs, self.streaks, self.schedules = runs, streaks, schedules
        self.chunk_size, self.starvation_limit = chunk_size, starvation_limit

    def tick(self, schedule: Schedule) -> tuple[int, int]:
        """The tick of ``schedule``: its fan-out job, or its single job; returns (created, already live)."""
        module = schedule.module
        if module is not None and not self.modules.state(module.name, fresh=True).on:
            # Not a run: its last run stays the last tick that created jobs.
            log.info("%s: module %s is off; nothing created", schedule.name, module.name)
            return 0, 0
        now = utcnow()
        fan_out = schedule.fan_out
        job_type, payload = (
            (fan_out, {TICK_FIELD: datetime_to_ms(now)})
            if fan_out
            else (schedule.job_type, schedule.payload())
        )
        with self.uow.autocommit() as tx:
            job, created = self.jobs.create(tx, job_type, account_id=None, payload=payload)
        self.runs.record_run(schedule.name, now)
        log.info(
            "%s: %s job %s %s", schedule.name, job_type.name, job.id, "created" if created else "still live"
        )
        return int(created), int(not created)

    def run(
        self,
        name: str,
        *,
        tick_ms: int,
        resume: dict[str, Any],
        save: Callable[..., None],
    ) -> dict[str, Any]:
        """Write the jobs of schedule ``name``'s tick at ``tick_ms``, a chunk a transaction, from ``resume``.

        ``save(checkpoint, tx=tx)`` records the checkpoint in the chunk's transaction, or raises when
        this run lost its row (the chunk then rolls back). Returns the counts of the whole tick.
        """
        schedule = self.schedules[name]
        job_type, window = schedule.job_type, schedule.spread
        done = {"after": None, "created": 0, "alreadyLive": 0, **resume}
        started = time.monotonic()
        while chunk := self.accounts.active_ids(
            after=uuid.UUID(done["after"]) if done["after"] else None, limit=self.chunk_size
        ):
            # WB rejected these accounts' tokens, or refused them a category the job needs: no job until
            # a new token is set (PATCH /v1/accounts/…).
            invalid = sum(1 for a in chunk if a.token_invalid)
            ids = [a.id for a in chunk if not a.token_invalid and not a.denied.intersection(job_type.needs)]
            streaks = self._streaks(job_type.name, ids) if job_type.gate else [0] * len(ids)
            jobs = []
            for account_id, streak in zip(ids, streaks, strict=True):
                due = tick_ms + offset_ms(account_id, window)
                jobs.append((account_id, self._payload(schedule, due, streak), due))
            # Each account's job starts a trace of its own, linked to this fan-out's (gatehouse.traces).
            with traces.linking(), self.uow.begin() as tx:
                created = self.jobs.create_for_accounts(tx, job_type, jobs)
                done = {
                    "after": str(chunk[-1].id),
                    "created": done["created"] + created,
                    "alreadyLive": done["alreadyLive"] + len(ids) - created,
                }
                save(done, tx=tx)
            metrics.FANOUT_SKIPPED.labels(reason=TOKEN_INVALID).inc(invalid)
            metrics.FANOUT_SKIPPED.labels(reason=TOKEN_SCOPE).inc(len(chunk) - invalid - len(ids))
        log.info(
            "%s: %d job(s) created, %d already live, spread over %d ms (this run: %.2f s%s)",
            name,
            done["created"],
            done["alreadyLive"],
            window,
            time.monotonic() - started,
            f", resumed after account {resume['after']}" if resume.get("after") else "",
        )
        return {"created": done["created"], "alreadyLive": done["alreadyLive"], "spreadMs": window}

    def _streaks(self, job_type: str, ids: list[uuid.UUID]) -> list[int]:
        # Redis down: the rows are still written (their messages wait for reconciliation), unpromoted.
        try:
            return self.streaks.of(job_type, ids)
        except RedisError as exc:
            log.warning("%s: skip streaks unreadable (%s); no job of this chunk is promoted", job_type, exc)
            return [0] * len(ids)

    def _payload(self, schedule: Schedule, due_ms: int, streak: int) -> dict[str, Any]:
        payload = {**schedule.payload(), DUE_AT_FIELD: due_ms}
        if streak:
            payload[SKIP_STREAK_FIELD] = streak
            if streak >= self.starvation_limit:
                payload[GATE_TIER_FIELD] = "user"
        return payload
