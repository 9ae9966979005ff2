"""The job store: every state change of a job row is one conditional statement here.

The conditions are the concurrency story:

- create: INSERT … ON CONFLICT on the unique partial index of live jobs, so
  concurrent identical requests produce one row (alreadyRunning for the rest);
  a fan-out's chunk is one INSERT … SELECT on the same index (create_for_accounts);
- claim: waiting|delayed → active only for the row's current message (``message_number``); it
  bumps ``claims`` and names the claiming worker process;
- every later write of a run is fenced by ``claims`` and ``state = 'active'``,
  so a worker that lost its row cannot overwrite it;
- requeue: an active row whose worker is dead or whose lease ran out goes
  back to ``waiting`` under a new message (the dead run's message is stale);
- an operator's retry: failed → waiting with fresh attempts under a new
  message (the live-job indexes refuse a second live job of its kind); an
  operator's cancel: waiting|delayed → failed, the row never claimed again.
  Each writes its audit row in the same statement.

This is the only writer of the ``jobs`` table. Every write takes the caller's unit
of work (``tx``, gatehouse.uow) and records there the message of each job it puts in
line (created, rescheduled, retried, woken, requeued), which the unit of work sends
after the commit. In an autocommit unit of work each statement is one round trip on
``gatehouse.db.Statements`` (plain psycopg, prepared by the server after its first
uses): the hot path of every job. Rows come back as ``JobRecord`` dataclasses without
a model layer. The table itself is declared once, in ``gatehouse.models`` (migrations
and the tests check they agree).
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

from psycopg.errors import UniqueViolation
from psycopg.types.json import Jsonb

from gatehouse import progress as P
from gatehouse.db import Statements
from gatehouse.errors import Conflict, NotFound
from gatehouse.job_types import JobType, Policies
from gatehouse.paging import contains, newest_first

if TYPE_CHECKING:
    from gatehouse.uow import Tx

T = TypeVar("T")


def utcnow() -> datetime:
    return datetime.now(UTC)


def ms_to_datetime(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, UTC)


def datetime_to_ms(at: datetime) -> int:
    return int(at.timestamp() * 1000)


@dataclass
class JobRecord:
    """One row of ``jobs`` (the columns of gatehouse.models.Job)."""

    id: uuid.UUID
    type: str
    queue: str
    account_id: uuid.UUID | None
    tier: str
    state: str
    message_number: int
    claims: int
    attempt: int
    max_attempts: int
    progress: dict[str, Any] | None
    payload: dict[str, Any]
    result: dict[str, Any] | None
    error: dict[str, Any] | None
    checkpoint: dict[str, Any] | None
    resume_at: datetime | None
    lease_until: datetime | None
    worker: str | None
    created_at: datetime
    updated_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    cancel_requested_at: datetime | None
    cancel_requested_by: str | None


COLUMNS = ", ".join(f.name for f in fields(JobRecord))


@dataclass
class RunRecord:
    """What a run needs of its row (the claim returns only these: it is every job's hot path)."""

    id: uuid.UUID
    type: str
    queue: str
    account_id: uuid.UUID | None
    tier: str
    claims: int
    attempt: int
    max_attempts: int
    progress: dict[str, Any] | None
    payload: dict[str, Any]
    checkpoint: dict[str, Any] | None
    created_at: datetime
    # An operator asked a running job to stop (POST /v1/jobs/{id}/cancel): the run ends at its next checkpoint.
    cancel_requested_at: datetime | None


RUN_COLUMNS = ", ".join(f.name for f in fields(RunRecord))


@dataclass(frozen=True)
class AttemptRecord:
    """One run of a job (a row of ``job_attempts``): ``outcome`` None while it runs, ``lost`` when its
    worker died (its end unknown)."""

    attempt: int
    worker: str | None
    started_at: datetime
    finished_at: datetime | None
    outcome: str | None
    error_code: str | None
    error_message: str | None


@dataclass(frozen=True)
class Accepted:
    """What the producer needs of a row it wrote or found: enough to enqueue it and to answer."""

    id: uuid.UUID
    queue: str
    type: str
    message_number: int
    state: str


ACCEPTED_COLUMNS = ", ".join(f.name for f in fields(Accepted))


@dataclass(frozen=True)
class JobMessage:
    """A job's message on its queue: the row id and the row's ``message_number`` (only the message
    that carries the row's current number can claim it), and when it is due."""

    job_id: uuid.UUID
    queue: str
    actor: str
    number: int
    eta_ms: int | None = None


@dataclass(frozen=True)
class Claim:
    """A claimed run: the row as claimed and the fencing token for later writes."""

    job: RunRecord
    claims: int

    @property
    def job_id(self) -> uuid.UUID:
        return self.job.id

    @property
    def key(self) -> tuple[uuid.UUID, int]:
        """Identifies this run of the job (a run after a requeue is another run)."""
        return (self.job.id, self.claims)


@dataclass(frozen=True)
class Outcome:
    """How a run ended, as its row records it (``JobStore.finish_many``)."""

    claim: Claim
    state: str  # completed | failed
    progress: dict[str, Any]
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    ended: str | None = None  # the attempt record's outcome where it is not ``state``: skipped


def _finish_params(outcomes: Sequence[Outcome]) -> dict[str, Any]:
    return dict(
        ids=[o.claim.job_id for o in outcomes],
        claims=[o.claim.claims for o in outcomes],
        states=[o.state for o in outcomes],
        results=[_json(o.result) for o in outcomes],
        errors=[_json(o.error) for o in outcomes],
        progresses=[Jsonb(o.progress) for o in outcomes],
        ends=[o.ended or o.state for o in outcomes],
    )


def message_of(row: Any, eta_ms: int | None = None) -> JobMessage:
    return JobMessage(row.id, row.queue, row.type, row.message_number, eta_ms)


@dataclass(frozen=True)
class _Moved:
    id: uuid.UUID
    queue: str
    type: str
    message_number: int
    resume_at: datetime | None


def _json(value: Any) -> Jsonb | None:
    return None if value is None else Jsonb(value)


# Literally the predicate of the partial index jobs_one_live_per_account_type (models.LIVE_STATES),
# so PostgreSQL matches ON CONFLICT to that index.
_LIVE = "state IN ('waiting', 'active', 'delayed')"
_FENCE = "id = %(id)s AND claims = %(claims)s AND state = 'active'"
_LEASE = "now() + %(lease_ms)s * interval '1 millisecond'"

SQL_CREATE = f"""
INSERT INTO jobs (id, type, queue, tier, account_id, max_attempts, payload)
VALUES (%(id)s, %(type)s, %(queue)s, %(tier)s, %(account_id)s, %(max_attempts)s, %(payload)s)
ON CONFLICT (account_id, type) WHERE {_LIVE} DO NOTHING
RETURNING {ACCEPTED_COLUMNS}"""
SQL_LIVE = (
    f"SELECT {ACCEPTED_COLUMNS} FROM jobs WHERE account_id = %(account_id)s AND type = %(type)s AND {_LIVE}"
)
# A system job (scheduled, no account: a sweep) is one live per type. NULL account ids never collide
# in the index above, so these have their own: literally jobs_one_live_system_job's predicate.
_SYSTEM = f"account_id IS NULL AND tier = 'scheduled' AND {_LIVE}"
SQL_CREATE_SYSTEM = f"""
INSERT INTO jobs (id, type, queue, tier, account_id, max_attempts, payload)
VALUES (%(id)s, %(type)s, %(queue)s, %(tier)s, %(account_id)s, %(max_attempts)s, %(payload)s)
ON CONFLICT (type) WHERE {_SYSTEM} DO NOTHING
RETURNING {ACCEPTED_COLUMNS}"""
SQL_LIVE_SYSTEM = f"SELECT {ACCEPTED_COLUMNS} FROM jobs WHERE type = %(type)s AND {_SYSTEM}"
SQL_GET = f"SELECT {COLUMNS} FROM jobs WHERE id = %(id)s"
SQL_ATTEMPTS = f"""
SELECT {", ".join(f.name for f in fields(AttemptRecord))} FROM job_attempts
WHERE job_id = %(id)s ORDER BY started_at, id"""
# The states a phase is stored with: the finish writes completed or failed (a cancel, failed); every
# other phase only ever sits on a live row. Said in the jobs list's SQL, a phase filter reads the
# live rows (jobs_live_by_state) or the failed ones (jobs_failed_newest), not the whole newest-first
# index: 3.7-7.9 s for a live phase that matched nothing at 100,000 accounts (bench_fleet_reads).
_PHASE_STATES = {P.COMPLETED: "state = 'completed'", P.FAILED: "state = 'failed'"}
# The attempt records (job_attempts), written in the statement of the job write they go with, so
# they cost no round trip: a row when a run's body starts (the claim of a type without a gate, the
# start of an admitted one; a run parked at the gate never started and has none), completed by the
# write of its outcome. A run has at most one open row (outcome NULL): the fence lets one run write
# at a time, and a requeue closes its dead predecessor's as ``lost`` (finished_at stays unknown).
_ATTEMPT_STARTS = """attempt_started AS (
  INSERT INTO job_attempts (job_id, attempt, worker, started_at)
  SELECT id, attempt, worker, now() FROM {runs}
)"""
_ATTEMPT_ENDS = """attempt_ended AS (
  UPDATE job_attempts AS a SET finished_at = now(), outcome = r.outcome,
    error_code = r.error->>'code', error_message = r.error->>'message'
  FROM {runs} AS r WHERE a.job_id = r.id AND a.outcome IS NULL
)"""
# The claim, of many messages in one statement (a worker process's threads claim together:
# gatehouse_worker.batches): each (id, number) takes its row only for that message number and
# only from waiting|delayed. A job type without admission (no gate) is claimed and started in the
# same statement (``start``, its running progress a constant); a gated one is started after the
# gate let it in (SQL_START). Two messages of one row in a batch match it at most once (the
# caller hands each (id, number) to one requester).
SQL_CLAIM = f"""
WITH claimed AS (
UPDATE jobs SET state = 'active', claims = claims + 1, worker = %(worker)s, lease_until = {_LEASE},
  progress = CASE WHEN m.start THEN '{json.dumps(P.stored(P.RUNNING))}'::jsonb ELSE jobs.progress END,
  started_at = CASE WHEN m.start THEN coalesce(jobs.started_at, now()) ELSE jobs.started_at END,
  updated_at = now()
FROM unnest(%(ids)s::uuid[], %(numbers)s::int[], %(starts)s::bool[]) AS m(id, number, start)
WHERE jobs.id = m.id AND jobs.message_number = m.number AND jobs.state IN ('waiting', 'delayed')
RETURNING m.number, m.start, jobs.worker, {", ".join(f"jobs.{f.name}" for f in fields(RunRecord))}
), {_ATTEMPT_STARTS.format(runs="claimed WHERE start")}
SELECT number, {RUN_COLUMNS} FROM claimed"""
SQL_START = f"""
WITH started AS (
UPDATE jobs SET progress = %(progress)s, started_at = coalesce(started_at, now()), updated_at = now()
WHERE {_FENCE} RETURNING id, attempt, worker
), {_ATTEMPT_STARTS.format(runs="started")}
SELECT id FROM started"""
# It also tells the run whether an operator asked it to stop (as the lease renewal does).
SQL_CHECKPOINT = f"""
UPDATE jobs SET checkpoint = %(checkpoint)s, updated_at = now() WHERE {_FENCE}
RETURNING id, cancel_requested_at IS NOT NULL AS cancel"""
# The outcomes of many runs in one statement (a worker process's threads finish together), each
# fenced by its claim: a run that lost its row writes nothing.
SQL_FINISH = f"""
WITH finished AS (
UPDATE jobs SET state = f.state, result = f.result, error = coalesce(f.error, jobs.error),
  progress = f.progress, resume_at = NULL, lease_until = NULL, worker = NULL,
  finished_at = now(), updated_at = now()
FROM unnest(%(ids)s::uuid[], %(claims)s::int[], %(states)s::text[], %(results)s::jsonb[],
  %(errors)s::jsonb[], %(progresses)s::jsonb[], %(ends)s::text[])
  AS f(id, claims, state, result, error, progress, ended)
WHERE jobs.id = f.id AND jobs.claims = f.claims AND jobs.state = 'active'
RETURNING jobs.id, jobs.claims, f.ended AS outcome, f.error
), {_ATTEMPT_ENDS.format(runs="finished")}
SELECT id, claims FROM finished"""
SQL_RESCHEDULE = f"""
WITH moved AS (
UPDATE jobs SET state = 'delayed', message_number = message_number + 1, attempt = attempt + %(attempts_used)s,
  resume_at = %(resume_at)s, progress = %(progress)s, error = coalesce(%(error)s, error),
  lease_until = NULL, worker = NULL, updated_at = now()
WHERE {_FENCE} RETURNING id, queue, type, message_number, resume_at,
  CASE WHEN %(attempts_used)s = 1 THEN 'retry' ELSE 'parked' END AS outcome, %(error)s::jsonb AS error
), {_ATTEMPT_ENDS.format(runs="moved")}
SELECT id, queue, type, message_number, resume_at FROM moved"""
# The renewal also tells each run whether an operator asked it to stop (cancel_requested_at): the
# flag is read where the lease already is, at no extra statement.
SQL_RENEW = f"""
UPDATE jobs SET lease_until = {_LEASE}
FROM unnest(%(ids)s::uuid[], %(claims)s::int[]) AS held(id, claims)
WHERE jobs.id = held.id AND jobs.claims = held.claims AND jobs.state = 'active'
RETURNING jobs.id, jobs.claims, jobs.cancel_requested_at IS NOT NULL AS cancel"""
SQL_WAKE = """
UPDATE jobs SET message_number = message_number + 1, resume_at = now(),
  progress = jsonb_set(progress, '{resumeAt}', to_jsonb(%(now)s::text)), updated_at = now()
WHERE id = %(id)s AND state = 'delayed' AND progress->>'phase' = %(phase)s
RETURNING id, queue, type, message_number, resume_at"""
# Stopped before it ran again: waiting|delayed → failed, for a webhook endpoint that answered
# 410 Gone (its jobs, in the endpoint's transaction) or on an operator's word (SQL_CANCEL_AUDITED).
# The rows are locked first, so ``was`` is the state each one had when it was stopped.
_JOB_COLUMNS = ", ".join(f"jobs.{f.name}" for f in fields(JobRecord))
SQL_CANCEL = f"""
UPDATE jobs SET state = 'failed', error = %(error)s, progress = %(progress)s, resume_at = NULL,
  finished_at = now(), updated_at = now()
FROM (SELECT id, state FROM jobs WHERE id = ANY(%(ids)s) AND state IN ('waiting', 'delayed') FOR UPDATE) AS was
WHERE jobs.id = was.id
RETURNING {_JOB_COLUMNS}, was.state AS was"""
# The change and its audit row (actor, before/after of what changed), in one statement.
_AUDITED = """
WITH moved AS ({change}), audited AS (
  INSERT INTO audit_log (actor, action, entity, entity_id, before, after)
  SELECT %(actor)s, '{action}', 'job', id::text, {before}, {after} FROM moved
)
SELECT {columns} FROM moved"""
SQL_CANCEL_AUDITED = _AUDITED.format(
    change=SQL_CANCEL,
    action="job.cancel",
    before="jsonb_build_object('state', was)",
    after="jsonb_build_object('state', state, 'error', error)",
    columns=COLUMNS,
)
# An operator's retry: failed → waiting, as if just created (attempt 1, no progress, outcome or
# eta) under a new message; the checkpoint stays, so a resumable job carries on. A second live
# job of its account and type (or a second live system job) breaks a live-job index: refused.
SQL_RETRY = _AUDITED.format(
    change=f"""
UPDATE jobs SET state = 'waiting', message_number = message_number + 1, attempt = 1,
  max_attempts = coalesce(%(max_attempts)s::int, jobs.max_attempts), progress = NULL, result = NULL,
  error = NULL, resume_at = NULL, lease_until = NULL, worker = NULL, finished_at = NULL, updated_at = now(),
  cancel_requested_at = NULL, cancel_requested_by = NULL
FROM (SELECT id, error FROM jobs WHERE id = %(id)s AND state = 'failed' FOR UPDATE) AS was
WHERE jobs.id = was.id
RETURNING {_JOB_COLUMNS}, was.error AS was""",
    action="job.retry",
    before="jsonb_build_object('state', 'failed', 'error', was)",
    after="jsonb_build_object('state', state, 'error', NULL)",
    columns=COLUMNS,
)
# An operator's cancel of a running job: the flag its run reads at its next lease renewal and stops on.
SQL_REQUEST_CANCEL = _AUDITED.format(
    change=f"""
UPDATE jobs SET cancel_requested_at = coalesce(jobs.cancel_requested_at, now()),
  cancel_requested_by = coalesce(jobs.cancel_requested_by, %(actor)s), updated_at = now()
WHERE id = %(id)s AND state = 'active'
RETURNING {_JOB_COLUMNS}""",
    action="job.cancel-request",
    before="jsonb_build_object('state', 'active')",
    after="jsonb_build_object('cancelRequestedAt', cancel_requested_at)",
    columns=COLUMNS,
)
LIVE_INDEXES = ("jobs_one_live_per_account_type", "jobs_one_live_system_job")
SQL_RUNNING_WORKERS = "SELECT DISTINCT worker FROM jobs WHERE state = 'active' AND worker IS NOT NULL"
# Back in line: the runs of dead workers, and runs whose lease ran out (whoever held them).
SQL_REQUEUE = """
WITH moved AS (
UPDATE jobs SET state = 'waiting', message_number = message_number + 1, lease_until = NULL, worker = NULL,
  updated_at = now()
WHERE state = 'active' AND (worker = ANY(%(dead)s) OR lease_until < now())
RETURNING id, queue, type, message_number, resume_at
), lost AS (
  UPDATE job_attempts SET outcome = 'lost'
  WHERE job_id = ANY(ARRAY(SELECT id FROM moved)) AND outcome IS NULL
)
SELECT id, queue, type, message_number, resume_at FROM moved"""
SQL_SETTLED = """
SELECT id, queue, type, message_number, resume_at FROM jobs
WHERE state IN ('waiting', 'delayed') AND updated_at < now() - %(grace_ms)s * interval '1 millisecond'
ORDER BY created_at"""
# Of those found without a message, the rows still waiting for that same message: a job that was
# claimed, finished or moved on while the broker was scanned has its message (or needs none).
SQL_STILL_UNSENT = """
SELECT jobs.id, jobs.queue, jobs.type, jobs.message_number, jobs.resume_at
FROM jobs JOIN unnest(%(ids)s::uuid[], %(numbers)s::int[]) AS m(id, number)
  ON jobs.id = m.id AND jobs.message_number = m.number
WHERE jobs.state IN ('waiting', 'delayed')
ORDER BY jobs.created_at"""


# Many jobs of one type in one statement (a webhook outbox's batches), in the order given; with a
# delay they start delayed until it has passed, so the status and reconciliation know them as any
# delayed job.
SQL_CREATE_MANY = """
INSERT INTO jobs (id, type, queue, tier, max_attempts, payload, state, resume_at)
SELECT j.id, %(type)s, %(queue)s, %(tier)s, %(max_attempts)s, j.payload,
  CASE WHEN %(delay_ms)s > 0 THEN 'delayed' ELSE 'waiting' END,
  CASE WHEN %(delay_ms)s > 0 THEN now() + %(delay_ms)s * interval '1 millisecond' END
FROM ROWS FROM (unnest(%(ids)s::uuid[]), jsonb_array_elements(%(payloads)s)) WITH ORDINALITY AS j(id, payload, n)
ORDER BY j.n
RETURNING id, queue, type, message_number, resume_at"""

# A fan-out's chunk (gatehouse.fanout): one job of a type per account, in one statement, each with
# its payload and its eta (delayed until then). A live job of the account and type (the same index
# as SQL_CREATE) means none for it: only the rows written come back, to be sent.
SQL_CREATE_FOR_ACCOUNTS = f"""
INSERT INTO jobs (id, type, queue, tier, account_id, max_attempts, payload, state, resume_at)
SELECT gen_random_uuid(), %(type)s, %(queue)s, %(tier)s, c.account_id, %(max_attempts)s, c.payload,
  CASE WHEN c.resume_at > now() THEN 'delayed' ELSE 'waiting' END,
  CASE WHEN c.resume_at > now() THEN c.resume_at END
FROM ROWS FROM (unnest(%(accounts)s::uuid[]), jsonb_array_elements(%(payloads)s),
  unnest(%(etas)s::timestamptz[])) AS c(account_id, payload, resume_at)
ON CONFLICT (account_id, type) WHERE {_LIVE} DO NOTHING
RETURNING id, queue, type, message_number, resume_at"""


# Retention (gatehouse.retention). A finished row of one type and state older than its retention,
# unless it is the latest finished row of its (account, type) pair: the status poll of that run
# and the console's "last run" keep answering. The oldest first, from where the last batch stopped
# (after_at, after_id), so a run walks past the kept rows once (index jobs_finished_by_type,
# literally its predicate). The later row of the pair is looked for among the rows created after
# this one (jobs_by_account: a few rows on), not by an index of its own, which every job's finish
# would pay for. With one live job per pair, a pair's runs finish in the order they were created;
# where one did not (an operator's retry, jobs without an account), the row is kept until a run
# created after it finishes: never the latest is pruned.
_FINISHED = "state IN ('completed', 'failed')"
_LATER = f"""SELECT 1 FROM jobs AS n WHERE n.account_id {{account}} AND n.created_at > j.created_at
             AND n.type = j.type AND n.{_FINISHED} AND n.finished_at > j.finished_at"""
_PRUNABLE = f"""
j.type = %(type)s AND j.state = %(state)s AND j.{_FINISHED}
AND j.finished_at < now() - %(age_ms)s * interval '1 millisecond'
AND (EXISTS ({_LATER.format(account="= j.account_id")})
  OR j.account_id IS NULL AND EXISTS ({_LATER.format(account="IS NULL")}))"""
# Locked SKIP LOCKED, so two prune runs never wait on each other and each row goes once; the
# lock re-checks the row, so one an operator just retried (failed → waiting) is left alone.
SQL_PRUNE = f"""
WITH doomed AS (
  SELECT j.id, j.finished_at FROM jobs AS j
  WHERE {_PRUNABLE}
    AND (j.finished_at, j.id) > (%(after_at)s, %(after_id)s)
  ORDER BY j.finished_at, j.id LIMIT %(limit)s
  FOR UPDATE SKIP LOCKED
), gone AS (DELETE FROM jobs WHERE id = ANY(ARRAY(SELECT id FROM doomed)) RETURNING id)
SELECT (SELECT count(*) FROM gone) AS deleted, finished_at AS after_at, id AS after_id
FROM doomed ORDER BY finished_at DESC, id DESC LIMIT 1"""
SQL_PRUNABLE = f"SELECT count(*) AS deleted FROM jobs AS j WHERE {_PRUNABLE}"
# The types that have finished rows: a skip scan of jobs_finished_by_type, one probe per type
# (also types no longer declared, whose rows the settings' retention then applies to).
_FINISHED_TYPES = f"""
WITH RECURSIVE t AS (
  (SELECT type FROM jobs WHERE {_FINISHED} ORDER BY type LIMIT 1)
  UNION ALL
  SELECT (SELECT type FROM jobs WHERE {_FINISHED} AND type > t.type ORDER BY type LIMIT 1)
  FROM t WHERE t.type IS NOT NULL
)"""
SQL_FINISHED_TYPES = f"{_FINISHED_TYPES} SELECT type FROM t WHERE type IS NOT NULL"
# Throughput: the rows that finished since a time, counted per type and time bucket (the console's
# charts), in one statement: per type (the skip scan above) a range of jobs_finished_by_type
# (type, state, finished_at), so it reads the window's rows, not the table (14 ms instead of a 21 ms
# sequential scan for a day of 100,000 rows, bench_console's). Coarse buckets, fine ones from
# ``fine_from`` on: a few dozen rows a type, however many finished.
SQL_FINISHED_COUNTS = f"""
{_FINISHED_TYPES}
SELECT t.type, c.at, c.completed, c.failed FROM t CROSS JOIN LATERAL (
  SELECT date_bin(CASE WHEN finished_at >= %(fine_from)s THEN %(fine_s)s ELSE %(coarse_s)s END
      * interval '1 second', finished_at, %(origin)s) AS at,
    count(*) FILTER (WHERE state = 'completed') AS completed, count(*) FILTER (WHERE state = 'failed') AS failed
  FROM jobs WHERE jobs.type = t.type AND jobs.{_FINISHED} AND jobs.finished_at >= %(origin)s
  GROUP BY 1
) AS c WHERE t.type IS NOT NULL"""
_BEFORE_ALL = (datetime(1, 1, 1, tzinfo=UTC), uuid.UUID(int=0))


_HEX = re.compile(r"[0-9a-f]{4,32}")
SEARCH_ACCOUNTS = 100  # a name that matches more accounts finds the jobs of the first this many


def search(q: str) -> tuple[str, dict[str, Any]]:
    """The jobs list's ``q``: a job id or a prefix of at least 4 hex digits (a range of the primary
    key), a part of its account's name (any case; the accounts are read first, at most
    SEARCH_ACCOUNTS), or its error code."""
    found = [
        "account_id = ANY(ARRAY(SELECT id FROM accounts WHERE name ILIKE %(q_like)s "
        f"ORDER BY id LIMIT {SEARCH_ACCOUNTS}))",
        "error->>'code' = %(q)s",
    ]
    params: dict[str, Any] = {"q": q, "q_like": contains(q)}
    digits = q.strip().lower().replace("-", "")
    if _HEX.fullmatch(digits):
        found.insert(0, "id BETWEEN %(q_low)s AND %(q_high)s")
        params.update(q_low=uuid.UUID(digits.ljust(32, "0")), q_high=uuid.UUID(digits.ljust(32, "f")))
    return "(" + " OR ".join(found) + ")", params


@dataclass(frozen=True)
class JobFilter:
    """Which jobs an operator's bulk retry or cancel takes (POST /v1/admin/jobs/retry|cancel): each
    field given narrows it; ``states`` are the states the action takes (``state`` one of them)."""

    states: tuple[str, ...]
    state: str | None = None
    type: str | None = None
    account_id: uuid.UUID | None = None
    error_code: str | None = None
    finished_after: datetime | None = None  # inclusive
    finished_before: datetime | None = None  # exclusive

    def where(self) -> tuple[str, dict[str, Any]]:
        conditions = [
            f"state IN ({', '.join(repr(s) for s in self.states)})"
        ]  # constants: the partial indexes
        given = {
            "state": ("state = %(state)s", self.state),
            "type": ("type = %(type)s", self.type),
            "account_id": ("account_id = %(account_id)s", self.account_id),
            "error_code": ("error->>'code' = %(error_code)s", self.error_code),
            "finished_after": ("finished_at >= %(finished_after)s", self.finished_after),
            "finished_before": ("finished_at < %(finished_before)s", self.finished_before),
        }
        params = {name: value for name, (_, value) in given.items() if value is not None}
        conditions += [condition for name, (condition, _) in given.items() if name in params]
        return " AND ".join(conditions), params


@dataclass(frozen=True)
class FinishedCount:
    """Jobs of a type that finished in one time bucket (from ``at``)."""

    type: str
    at: datetime
    completed: int
    failed: int


@dataclass(frozen=True)
class Pruned:
    """What one prune batch deleted, and where the next one starts (None: nothing was left)."""

    deleted: int
    after: tuple[datetime, uuid.UUID] | None


class JobStore:
    """The job rows: one statement each, in the caller's unit of work (gatehouse.uow)."""

    def __init__(self, statements: Statements, policies: Policies) -> None:
        self._sql = statements
        self._policies = policies

    # -- producer side -------------------------------------------------------------

    def create(
        self,
        tx: Tx,
        job_type: JobType,
        *,
        account_id: uuid.UUID | None = None,
        payload: dict[str, Any] | None = None,
        job_id: uuid.UUID | None = None,
    ) -> tuple[Accepted, bool]:
        """Insert a waiting job, or return the live job of (account, type).

        Returns ``(job, created)``; ``created`` is False when another live job
        of the same account and type already exists (alreadyRunning), and then
        nothing is sent. A scheduled job without an account is a system job (a
        sweep): there is one live job per type, whoever asks.
        """
        params = dict(
            id=job_id or uuid.uuid4(),
            type=job_type.name,
            queue=job_type.queue,
            tier=job_type.tier,
            account_id=account_id,
            max_attempts=self._policies.of(job_type).attempts,
            payload=Jsonb(payload or {}),
        )
        system = account_id is None and job_type.tier == "scheduled"
        create, live = (SQL_CREATE_SYSTEM, SQL_LIVE_SYSTEM) if system else (SQL_CREATE, SQL_LIVE)
        # The live job can finish between the conflicting insert and the read;
        # then the next insert succeeds.
        for _ in range(5):
            row = tx.one(create, params, Accepted)
            if row is not None:
                tx.record(message_of(row))
                return row, True
            row = tx.one(live, params, Accepted)
            if row is not None:
                return row, False
        raise RuntimeError(f"could not create or find a live {job_type.name} job for account {account_id}")

    def create_many(
        self,
        tx: Tx,
        job_type: JobType,
        jobs: Sequence[tuple[uuid.UUID, dict[str, Any]]],
        *,
        delay_ms: int = 0,
    ) -> None:
        """Jobs without an account, ``(id, payload)`` each, in one statement; due after ``delay_ms``."""
        if not jobs:
            return
        rows = tx.all(
            SQL_CREATE_MANY,
            {
                "type": job_type.name,
                "queue": job_type.queue,
                "tier": job_type.tier,
                "max_attempts": self._policies.of(job_type).attempts,
                "delay_ms": delay_ms,
                "ids": [job_id for job_id, _ in jobs],
                "payloads": Jsonb([payload for _, payload in jobs]),
            },
            _Moved,
        )
        eta_ms = datetime_to_ms(utcnow()) + delay_ms if delay_ms > 0 else None
        tx.record(*(message_of(row, eta_ms) for row in rows))

    def create_for_accounts(
        self, tx: Tx, job_type: JobType, jobs: Sequence[tuple[uuid.UUID, dict[str, Any], int]]
    ) -> int:
        """One job of ``job_type`` per ``(account_id, payload, eta_ms)`` in one statement, each
        delayed until its eta (a past one: waiting), except where the account has a live job of
        the type (as ``create``: nothing then, nothing sent). Returns how many were written."""
        if not jobs:
            return 0
        rows = tx.all(
            SQL_CREATE_FOR_ACCOUNTS,
            {
                "type": job_type.name,
                "queue": job_type.queue,
                "tier": job_type.tier,
                "max_attempts": self._policies.of(job_type).attempts,
                "accounts": [account_id for account_id, _, _ in jobs],
                "payloads": Jsonb([payload for _, payload, _ in jobs]),
                "etas": [ms_to_datetime(eta_ms) for _, _, eta_ms in jobs],
            },
            _Moved,
        )
        tx.record(*(message_of(row, row.resume_at and datetime_to_ms(row.resume_at)) for row in rows))
        return len(rows)

    def get(self, job_id: uuid.UUID) -> JobRecord | None:
        return self._sql.one(SQL_GET, {"id": job_id}, JobRecord)

    def attempts(self, job_id: uuid.UUID) -> list[AttemptRecord]:
        """The job's runs that started their body, oldest first (index job_attempts_by_job)."""
        return self._sql.all(SQL_ATTEMPTS, {"id": job_id}, AttemptRecord)

    def require(self, job_id: uuid.UUID) -> JobRecord:
        job = self.get(job_id)
        if job is None:
            raise NotFound(f"job {job_id} not found")
        return job

    def list_jobs(
        self,
        *,
        account_id: uuid.UUID | None = None,
        state: str | None = None,
        phase: str | None = None,
        type: str | None = None,
        tier: str | None = None,
        queue: str | None = None,
        created_after: datetime | None = None,
        created_before: datetime | None = None,
        finished_after: datetime | None = None,
        q: str | None = None,
        limit: int = 50,
        before: tuple[datetime, uuid.UUID] | None = None,
    ) -> list[JobRecord]:
        """Jobs newest first, narrowed by each filter given (``phase``: ``progress.phase``;
        ``created_after`` and ``finished_after`` inclusive, ``created_before`` exclusive); ``before`` is the
        (created_at, id) of the last job of the previous page.

        An account's jobs read ``jobs_by_account``; the others ``jobs_newest`` backwards
        (a rare filter value reads more of it, at most the table's one index: ~20 ms on 100,000 rows).
        A phase narrows the states too (``_PHASE_STATES``), so a live phase reads only the live rows.
        ``q`` finds a job by its id or an id prefix, its account's name (any part, any case) or its
        error code (``search``).
        """
        where = [_PHASE_STATES.get(phase, _LIVE)] if phase else []
        found, found_params = search(q) if q else ("", {})
        if found:
            where.append(found)
        sql, params = newest_first(
            f"SELECT {COLUMNS} FROM jobs",
            {
                "account_id": account_id,
                "state": state,
                "phase": phase,
                "type": type,
                "tier": tier,
                "queue": queue,
                "created_after": created_after,
                "created_before": created_before,
                "finished_after": finished_after,
            },
            limit=limit,
            before=before,
            param=lambda name: f"%({name})s",
            compare={
                "phase": "progress->>'phase' =",
                "created_after": "created_at >=",
                "created_before": "created_at <",
                "finished_after": "finished_at >=",
            },
            where=where,
        )
        params.update(found_params)
        return self._sql.all(sql, params, JobRecord)

    # -- consumer side -------------------------------------------------------------

    def claim(
        self,
        job_id: uuid.UUID,
        number: int,
        lease_ms: int,
        *,
        worker: str | None = None,
        start: bool = False,
    ) -> Claim | None:
        """Take the row for the message numbered ``number``, or None when the message is stale.

        With ``start`` the claim also records the start (phase running): a job
        without admission (no gate) is claimed and running in one statement.
        """
        return self.claim_many([(job_id, number, start)], lease_ms, worker=worker)[0]

    def claim_many(
        self, messages: Sequence[tuple[uuid.UUID, int, bool]], lease_ms: int, *, worker: str | None = None
    ) -> list[Claim | None]:
        """``claim`` for many messages ``(id, number, start)`` in one statement, each answer in its
        message's place; of two equal messages only the first claims (a duplicate stays a no-op)."""
        params = dict(
            ids=[m[0] for m in messages],
            numbers=[m[1] for m in messages],
            starts=[m[2] for m in messages],
            lease_ms=lease_ms,
            worker=worker,
        )
        rows = {(r.id, r.number): r for r in self._sql.all(SQL_CLAIM, params, _ClaimedRow)}
        claims: list[Claim | None] = []
        for job_id, number, _ in messages:
            row = rows.pop((job_id, number), None)
            claims.append(None if row is None else Claim(row, row.claims))
        return claims

    def _fenced(self, sql: str, claim: Claim, row: Callable[..., T], **params: Any) -> T | None:
        return self._sql.one(sql, {"id": claim.job_id, "claims": claim.claims, **params}, row)

    def start(self, claim: Claim, progress: dict[str, Any], *, tx: Tx | None = None) -> bool:
        """The job was admitted and its body is about to run: record the phase and the first start
        (with ``tx``, in that unit of work: with the event it raises)."""
        if tx is None:
            return self._fenced(SQL_START, claim, _Id, progress=Jsonb(progress)) is not None
        return (
            tx.one(SQL_START, {"id": claim.job_id, "claims": claim.claims, "progress": Jsonb(progress)}, _Id)
            is not None
        )

    def save_checkpoint(
        self, claim: Claim, checkpoint: dict[str, Any], *, tx: Tx | None = None
    ) -> Checkpointed | None:
        """Record how far the run got (and learn whether it was cancelled); None if another worker
        owns the row now.

        With ``tx``, in that unit of work: the checkpoint commits with what the step wrote.
        """
        if tx is None:
            return self._fenced(SQL_CHECKPOINT, claim, Checkpointed, checkpoint=Jsonb(checkpoint))
        params = {"id": claim.job_id, "claims": claim.claims, "checkpoint": Jsonb(checkpoint)}
        return tx.one(SQL_CHECKPOINT, params, Checkpointed)

    def finish(
        self,
        tx: Tx,
        claim: Claim,
        *,
        state: str,
        progress: dict[str, Any],
        result: dict[str, Any] | None = None,
        error: dict[str, Any] | None = None,
        ended: str | None = None,
    ) -> bool:
        """Active → completed or failed, and the run's attempt record ended (``ended``, else ``state``);
        False if the run had lost the row (then write nothing more in ``tx``)."""
        outcome = Outcome(claim, state, progress, result, error, ended)
        return bool(tx.all(SQL_FINISH, _finish_params([outcome]), _Held))

    def finish_many(self, outcomes: Sequence[Outcome]) -> list[bool]:
        """``finish`` of many runs in one autocommit statement; each answer in its outcome's place."""
        done = {(r.id, r.claims) for r in self._sql.all(SQL_FINISH, _finish_params(outcomes), _Held)}
        return [o.claim.key in done for o in outcomes]

    def reschedule(
        self,
        tx: Tx,
        claim: Claim,
        *,
        eta_ms: int,
        progress: dict[str, Any],
        consume_attempt: bool,
        error: dict[str, Any] | None = None,
    ) -> bool:
        """Active → delayed until ``eta_ms`` under a new message; False if the run had lost the row.

        A retry consumes an attempt; waiting for the gate or a WB pause does not.
        """
        row = tx.one(
            SQL_RESCHEDULE,
            {
                "id": claim.job_id,
                "claims": claim.claims,
                "attempts_used": int(consume_attempt),
                "resume_at": ms_to_datetime(eta_ms),
                "progress": Jsonb(progress),
                "error": _json(error),
            },
            _Moved,
        )
        if row is not None:
            tx.record(message_of(row, eta_ms))
        return row is not None

    def renew(self, claims: Iterable[Claim], lease_ms: int) -> Renewed:
        """Extend the leases of running jobs in one statement: the runs that lost theirs, and those an
        operator asked to stop."""
        claims = list(claims)
        if not claims:
            return Renewed(set(), set())
        params = dict(ids=[c.job_id for c in claims], claims=[c.claims for c in claims], lease_ms=lease_ms)
        rows = self._sql.all(SQL_RENEW, params, _Renewal)
        kept = {(r.id, r.claims) for r in rows}
        return Renewed({c.key for c in claims} - kept, {(r.id, r.claims) for r in rows if r.cancel})

    def wake(self, tx: Tx, job_id: uuid.UUID, *, phase: str) -> bool:
        """Make a job delayed in ``phase`` due now under a new message (its old copy goes stale);
        False if it is not (or no longer) delayed in that phase."""
        row = tx.one(SQL_WAKE, {"id": job_id, "phase": phase, "now": utcnow().isoformat()}, _Moved)
        if row is not None:
            tx.record(message_of(row))
        return row is not None

    # -- operator side ---------------------------------------------------------------

    def retry(self, tx: Tx, job_id: uuid.UUID, *, actor: str, job_type: JobType | None) -> JobRecord:
        """A failed job back in line with fresh attempts (its type's policy's, else as many as before).

        Returns the row as moved. Raises NotFound, or Conflict: JOB_NOT_FAILED, or JOB_ALREADY_LIVE
        naming the live job of its kind.
        """
        attempts = self._policies.of(job_type).attempts if job_type else None
        params = dict(id=job_id, actor=actor, max_attempts=attempts)
        # The live job can finish between the refused update and the read; then the next update succeeds.
        for _ in range(5):
            try:
                row = tx.one(SQL_RETRY, params, JobRecord)
            except UniqueViolation as exc:
                if exc.diag.constraint_name not in LIVE_INDEXES:
                    raise
                job = self.require(job_id)
                system = job.account_id is None and job.tier == "scheduled"
                live = self._sql.one(
                    SQL_LIVE_SYSTEM if system else SQL_LIVE,
                    {"account_id": job.account_id, "type": job.type},
                    Accepted,
                )
                if live is None:
                    continue
                of = "system job" if system else f"job of account {job.account_id}"
                raise Conflict(
                    f"job {live.id} is the live {job.type} {of} ({live.state}); "
                    f"job {job_id} can be retried once it has finished",
                    code="JOB_ALREADY_LIVE",
                ) from None
            if row is not None:
                tx.record(message_of(row))
                return row
            job = self.require(job_id)
            raise Conflict(
                f"job {job_id} is {job.state}; only a failed job is retried", code="JOB_NOT_FAILED"
            )
        raise RuntimeError(f"could not retry job {job_id} nor find the live job of its kind")

    def request_cancel(self, tx: Tx, job_id: uuid.UUID, *, actor: str) -> JobRecord | None:
        """Ask a running job to stop (its run ends failed, ``cancelled``, at its next checkpoint or WB
        call), audited; None when the row was not active as the statement ran."""
        return tx.one(SQL_REQUEST_CANCEL, {"id": job_id, "actor": actor}, JobRecord)

    def why_not_cancelled(self, job_id: uuid.UUID) -> None:
        """Raise why ``job_id`` could not be cancelled: NotFound, or Conflict JOB_FINISHED; return if it
        can be again (it moved between waiting and running meanwhile)."""
        job = self.require(job_id)
        if job.state in ("completed", "failed"):
            raise Conflict(f"job {job_id} has already {job.state}", code="JOB_FINISHED")

    def count_matching(self, match: JobFilter) -> int:
        where, params = match.where()
        return self._sql.one(f"SELECT count(*) AS n FROM jobs WHERE {where}", params, _Count).n

    def ids_matching(self, match: JobFilter, *, after: uuid.UUID | None, limit: int) -> list[uuid.UUID]:
        """The next ``limit`` matching job ids after ``after``, in id order (a bulk action's batch)."""
        where, params = match.where()
        sql = f"SELECT id FROM jobs WHERE {where} AND id > %(after)s ORDER BY id LIMIT %(limit)s"
        rows = self._sql.all(sql, {**params, "after": after or uuid.UUID(int=0), "limit": limit}, _Id)
        return [r.id for r in rows]

    def cancel(
        self,
        tx: Tx,
        job_ids: Sequence[uuid.UUID],
        *,
        actor: str,
        error: dict[str, Any],
        progress: dict[str, Any],
    ) -> list[JobRecord]:
        """An operator's cancel: those of ``job_ids`` still waiting or delayed as the statement runs end
        failed with ``error``, audited, and are returned; their messages, if any, are then stale."""
        params = dict(ids=list(job_ids), actor=actor, error=Jsonb(error), progress=Jsonb(progress))
        return tx.all(SQL_CANCEL_AUDITED, params, JobRecord)

    def cancel_many(
        self, tx: Tx, job_ids: Sequence[uuid.UUID], *, error: dict[str, Any], progress: dict[str, Any]
    ) -> None:
        """These jobs, where they wait, end failed (the system's word, not audited: a 410 Gone endpoint's)."""
        if job_ids:
            tx.all(
                SQL_CANCEL,
                {"ids": list(job_ids), "error": Jsonb(error), "progress": Jsonb(progress)},
                dict,
            )

    # -- recovery --------------------------------------------------------------------

    def running_workers(self) -> set[str]:
        """The worker processes that have running jobs, by the name each claim recorded."""
        return {r.worker for r in self._sql.all(SQL_RUNNING_WORKERS, {}, _Worker)}

    def requeue_orphans(self, tx: Tx, dead_workers: Iterable[str]) -> int:
        """Running jobs of dead workers, and of runs whose lease ran out, go back in line.

        Each gets a new message; its old run is fenced out. Returns how many.
        """
        rows = tx.all(SQL_REQUEUE, {"dead": list(dead_workers)}, _Moved)
        tx.record(*(message_of(r) for r in rows))
        return len(rows)

    def settled_candidates(self, grace_ms: int) -> list[JobMessage]:
        """waiting/delayed rows untouched for the grace period, as messages with the eta they need.

        Their producer is past its enqueue; the caller keeps only those without
        a message in the broker.
        """
        return [_resent(r) for r in self._sql.all(SQL_SETTLED, {"grace_ms": grace_ms}, _Moved)]

    def still_unsent(self, candidates: Sequence[JobMessage]) -> list[JobMessage]:
        """Those of ``candidates`` (found without a message in the broker) whose row still waits for
        that very message now: read after the broker scan, so a job consumed during it is not sent again."""
        if not candidates:
            return []
        params = {"ids": [c.job_id for c in candidates], "numbers": [c.number for c in candidates]}
        return [_resent(r) for r in self._sql.all(SQL_STILL_UNSENT, params, _Moved)]

    # -- retention -------------------------------------------------------------------

    def finished_counts(
        self, since: datetime, *, coarse_s: int, fine_from: datetime, fine_s: int
    ) -> list[FinishedCount]:
        """How many jobs of each type completed and failed in each bucket from ``since`` on (those
        that have any): ``coarse_s`` long, ``fine_s`` from ``fine_from`` (a multiple of ``fine_s``
        after ``since``; ``fine_s`` divides ``coarse_s``) on."""
        params = {"origin": since, "coarse_s": coarse_s, "fine_from": fine_from, "fine_s": fine_s}
        return self._sql.all(SQL_FINISHED_COUNTS, params, FinishedCount)

    def finished_types(self) -> list[str]:
        """The job types that have finished rows."""
        return [r.type for r in self._sql.all(SQL_FINISHED_TYPES, {}, _Type)]

    def prune(
        self,
        tx: Tx,
        job_type: str,
        state: str,
        *,
        age_ms: int,
        limit: int,
        after: tuple[datetime, uuid.UUID] | None = None,
    ) -> Pruned:
        """Delete up to ``limit`` rows of ``job_type`` that ended ``state`` more than ``age_ms`` ago,
        oldest first after ``after``, never a pair's latest finished row; one statement (an
        autocommit ``tx``: its own short transaction)."""
        after_at, after_id = after or _BEFORE_ALL
        params = dict(
            type=job_type, state=state, age_ms=age_ms, limit=limit, after_at=after_at, after_id=after_id
        )
        row = tx.one(SQL_PRUNE, params, _Pruned)
        return Pruned(row.deleted, (row.after_at, row.after_id)) if row else Pruned(0, None)

    def prunable(self, job_type: str, state: str, *, age_ms: int) -> int:
        """How many rows ``prune`` would delete now, in all its batches (a dry run)."""
        row = self._sql.one(SQL_PRUNABLE, dict(type=job_type, state=state, age_ms=age_ms), _Pruned)
        return row.deleted


def _resent(row: _Moved) -> JobMessage:
    return message_of(row, datetime_to_ms(row.resume_at) if row.resume_at else None)


@dataclass(frozen=True)
class _Id:
    id: uuid.UUID


@dataclass
class _ClaimedRow(RunRecord):
    """A claimed row and the message number that claimed it."""

    number: int = 0


@dataclass(frozen=True)
class _Held:
    id: uuid.UUID
    claims: int


@dataclass(frozen=True)
class Checkpointed:
    id: uuid.UUID
    cancel: bool  # an operator asked the run to stop


@dataclass(frozen=True)
class _Count:
    n: int


@dataclass(frozen=True)
class _Renewal:
    id: uuid.UUID
    claims: int
    cancel: bool


@dataclass(frozen=True)
class Renewed:
    """A renewal's news: the runs (``Claim.key``) that lost their row, those asked to stop."""

    lost: set[tuple[uuid.UUID, int]]
    cancel: set[tuple[uuid.UUID, int]]


@dataclass(frozen=True)
class _Worker:
    worker: str


@dataclass(frozen=True)
class _Type:
    type: str


@dataclass(frozen=True)
class _Pruned:
    deleted: int
    after_at: datetime | None = None
    after_id: uuid.UUID | None = None
