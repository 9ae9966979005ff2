"""The webhooks' SQL: endpoints, the outbox of domain events, one attempt's bookkeeping, replays.

The outbox (``WebhookStore.outbox``) is an event-bus subscriber: in the
unit of work of the change that raised the events it writes one delivery per
(event, enabled endpoint subscribed to its type) in one statement, and one
``webhook.deliver`` job per endpoint's batch of them (at most
WEBHOOK_BATCH_SIZE) through the job store, whose messages the unit of work
sends after the commit. A delivery belongs to the job of its current series
(``job_id``); a replay moves it to a new job.

A run of a job (gatehouse.webhooks.handlers, for the job body): ``begin_run``
locks the job's undelivered deliveries, numbers an attempt of each and writes
their rows before any byte is sent; ``end_run`` records what came back and
each delivery's new status — two transactions per batch, not per delivery.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, Engine, text

from gatehouse import progress as P
from gatehouse.crypto import Encrypted, Reencrypted, TokenCipher, reencrypt
from gatehouse.db import one_or_404
from gatehouse.errors import Conflict, NotFound, ValidationFailed
from gatehouse.events import Event
from gatehouse.job_types import WEBHOOK_DELIVER, WEBHOOK_REPLAY
from gatehouse.jobs import Accepted, JobStore
from gatehouse.paging import newest_first
from gatehouse.webhooks import signing
from gatehouse.webhooks.safety import Guard
from gatehouse.webhooks.tables import (
    ATTEMPT_COLUMNS,
    DELIVERY_SELECT,
    ENDPOINT_COLUMNS,
    REPLAYABLE,
    STATUSES,
    AttemptRecord,
    DeliveryRecord,
    EndpointRecord,
)

if TYPE_CHECKING:
    from gatehouse.uow import Tx

# The event types an endpoint may subscribe to (gatehouse.events publishers).
EVENT_TYPES = (
    "carts.cart.abandoned",
    "catalog.bulk_operation.completed",
    "catalog.bulk_operation.failed",
    "catalog.product.updated",
    "catalog.search_reindex.completed",
    "catalog.search_reindex.failed",
    "price_lists.price_list.activated",
    "price_lists.price_list.expired",
    "rfq.rfq.expired",
    "wb.account.token_expiring",
    "wb.account.token_invalid",
    "wb.job.completed",
    "wb.job.failed",
    "wb.job.progress",
    "webhook.endpoint.disabled",
    "webhook.test",
)
# The events of one seller account (their data's accountId): all an account's own endpoint may receive
# (webhook.endpoint.disabled: of another endpoint of its account).
ACCOUNT_EVENT_TYPES = (
    "wb.account.token_expiring",
    "wb.account.token_invalid",
    "wb.job.completed",
    "wb.job.failed",
    "wb.job.progress",
    "webhook.endpoint.disabled",
)
# Why a delivery is dead (dead_reason's "reason").
EXHAUSTED, ENDPOINT_GONE, ENDPOINT_DISABLED, ENDPOINT_FAILING = (
    "exhausted",
    "endpoint-gone",
    "endpoint-disabled",
    "endpoint-failing",
)
FAILING = "failing"  # the disabled_reason of an endpoint disabled after WEBHOOK_DISABLE_AFTER_MS of failures
DESCRIPTION_MAX = 500
RESPONSE_EXCERPT_MAX = 2_000
REPLAY_BATCH = 500
SECRETS = Encrypted(
    "webhook_endpoints", (("secret", "secret_key_id"), ("previous_secret", "previous_secret_key_id"))
)


def dead_reason(reason: str, **details: Any) -> dict[str, Any]:
    """What a dead delivery records of why it died: the reason and the details given (None left out)."""
    return {"reason": reason, **{k: v for k, v in details.items() if v is not None}}


@dataclass(frozen=True)
class Stats:
    """An endpoint's finished attempts since a time (one query on webhook_attempts)."""

    attempts: int
    succeeded: int
    p50_ms: float | None
    p95_ms: float | None
    last_failure: tuple[datetime, int | None, str | None] | None  # at, status code, error


@dataclass(frozen=True)
class Created:
    endpoint: EndpointRecord
    secret: str  # shown once


@dataclass(frozen=True)
class Attempt:
    """One delivery's attempt in a run: which message, as which body."""

    delivery_id: uuid.UUID
    number: int  # over the delivery's life
    message_id: str
    body: str
    was: str  # the delivery's status before the run (it goes back to it if the run never sends it)


@dataclass(frozen=True)
class Run:
    """What one run of a ``webhook.deliver`` job sends: where, signed with which secrets, which attempts."""

    job_id: uuid.UUID
    endpoint_id: uuid.UUID
    url: str
    secrets: tuple[str, ...]  # newest first
    attempts: tuple[Attempt, ...]
    rate_limit_per_second: int | None


@dataclass(frozen=True)
class Answer:
    """What an attempt got: a status code (and an excerpt of the body) or an error."""

    status_code: int | None
    duration_ms: int
    error: str | None = None
    excerpt: str | None = None
    retry_after_ms: int | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.status_code is not None and 200 <= self.status_code < 300


# One statement: the deliveries of the events (a JSON array of {id, type, payload, account}) to every
# subscribed enabled endpoint — an admin endpoint any event, an account's own endpoint only the events
# of that account (``account``: the accountId of an ACCOUNT_EVENT_TYPES event) — (or to one endpoint:
# a test event), numbered per endpoint into
# batches of :batch_size, each batch with the id of its job; returns the batches, the endpoints
# taking turns (first batches first), so the workers that take the first messages spread over
# the endpoints instead of queueing for one endpoint's slots.
# In the caller's transaction: a psycopg statement (prepared by the server after its first uses).
OUTBOX = """
WITH events AS (
  SELECT ev->>'id' AS message_id, ev->>'type' AS type, ev->'payload' AS payload,
    CAST(ev->>'account' AS uuid) AS account_id, n
  FROM jsonb_array_elements(CAST(%(events)s AS jsonb)) WITH ORDINALITY AS listed(ev, n)
), targets AS MATERIALIZED (
  SELECT e.id AS endpoint_id, ev.message_id, ev.type, ev.payload, gen_random_uuid() AS delivery_id,
    (row_number() OVER (PARTITION BY e.id ORDER BY ev.n) - 1) / %(batch_size)s AS batch
  FROM events AS ev JOIN webhook_endpoints AS e ON e.enabled AND CASE WHEN CAST(%(endpoint_id)s AS uuid) IS NULL
    THEN (e.event_types IS NULL OR ev.type = ANY(e.event_types))
      AND (e.account_id IS NULL OR e.account_id = ev.account_id)
    ELSE e.id = CAST(%(endpoint_id)s AS uuid) END
), batches AS MATERIALIZED (
  SELECT endpoint_id, batch, count(*) AS size, gen_random_uuid() AS job_id FROM targets GROUP BY 1, 2
), deliveries AS (
  INSERT INTO webhook_deliveries (id, endpoint_id, message_id, event_type, payload, job_id)
  SELECT t.delivery_id, t.endpoint_id, t.message_id, t.type, t.payload, b.job_id
  FROM targets AS t JOIN batches AS b USING (endpoint_id, batch)
)
SELECT job_id, endpoint_id, size FROM batches ORDER BY batch, endpoint_id"""


@dataclass(frozen=True)
class _Batch:
    """A batch of new deliveries to one endpoint: its webhook.deliver job."""

    job_id: uuid.UUID
    endpoint_id: uuid.UUID
    size: int


# The endpoints an owner sees: an account its own; the admin (account_id NULL) every one.
OWNED = "(CAST(:account_id AS uuid) IS NULL OR account_id = CAST(:account_id AS uuid))"
# A new series of attempts for replayable deliveries, in batches per endpoint like the outbox's
# (locked, so two replays make one series: the second waits for the first, then finds the
# delivery pending). A batch replay skips rows in use.
REPLAY = f"""
WITH chosen AS MATERIALIZED (
  SELECT d.id AS delivery_id, d.endpoint_id, d.created_at FROM webhook_deliveries AS d
  JOIN webhook_endpoints AS e ON e.id = d.endpoint_id AND e.enabled
  WHERE {{where}} AND d.status IN {REPLAYABLE}
  ORDER BY d.created_at LIMIT :limit FOR UPDATE OF d {{skip}}
), numbered AS MATERIALIZED (
  SELECT delivery_id, endpoint_id,
    (row_number() OVER (PARTITION BY endpoint_id ORDER BY created_at, delivery_id) - 1) / :batch_size AS batch
  FROM chosen
), batches AS MATERIALIZED (
  SELECT endpoint_id, batch, count(*) AS size, gen_random_uuid() AS job_id FROM numbered GROUP BY 1, 2
), moved AS (
  UPDATE webhook_deliveries AS d SET status = 'pending', job_id = b.job_id, delivered_at = NULL,
    dead_reason = NULL, updated_at = now()
  FROM numbered AS n JOIN batches AS b USING (endpoint_id, batch) WHERE d.id = n.delivery_id
)
SELECT job_id, endpoint_id, size FROM batches ORDER BY batch, endpoint_id"""
# A run's answers: each attempt's row, and its delivery's status unless a later attempt began
# since (a run that lost its lease to another records what it sent, and moves nothing). A delivery
# that dies says why in ``dead_reason`` (``dead_reason()``): its last attempt failed (``exhausted``)
# or answered 410 (``endpoint-gone``), with the attempt's number, status code and error; the
# deliveries its endpoint's 410 stopped say ``endpoint-gone`` with ``byDelivery`` (end_run), those
# of a disabled endpoint ``endpoint-disabled``, those of a failing one ``endpoint-failing``.
END_ATTEMPTS = text(
    """
WITH answers AS (
  SELECT * FROM unnest(CAST(:ids AS uuid[]), CAST(:numbers AS int[]), CAST(:statuses AS text[]),
    CAST(:codes AS int[]), CAST(:errors AS text[]), CAST(:ms AS int[]), CAST(:excerpts AS text[]),
    CAST(:dead_reasons AS jsonb[])) AS v(id, n, status, code, error, ms, excerpt, dead_reason)
), recorded AS (
  UPDATE webhook_attempts AS a SET status_code = v.code, error = v.error, duration_ms = v.ms,
    response_excerpt = v.excerpt
  FROM answers AS v WHERE a.delivery_id = v.id AND a.attempt = v.n
)
UPDATE webhook_deliveries AS d SET status = v.status, updated_at = now(),
  delivered_at = CASE WHEN v.status = 'delivered' THEN now() END,
  dead_reason = v.dead_reason || jsonb_build_object('at', now())
FROM answers AS v WHERE d.id = v.id AND d.attempts = v.n
"""
)
# The attempts a run numbered but never sent (it stopped early): unnumbered, their rows gone.
UNSEND = text(
    """
WITH back AS (
  UPDATE webhook_deliveries AS d SET attempts = v.n - 1, status = v.was, updated_at = now()
  FROM unnest(CAST(:ids AS uuid[]), CAST(:numbers AS int[]), CAST(:was AS text[])) AS v(id, n, was)
  WHERE d.id = v.id AND d.attempts = v.n
  RETURNING d.id, v.n
)
DELETE FROM webhook_attempts AS a USING back WHERE a.delivery_id = back.id AND a.attempt = back.n
"""
)
BEGIN_RUN = text(
    "SELECT d.id, d.status, d.attempts, d.message_id, d.payload, e.id, e.url, e.enabled, "
    "e.secret, e.previous_secret, e.previous_secret_until > now(), e.rate_limit_per_second "
    "FROM webhook_deliveries AS d JOIN webhook_endpoints AS e ON e.id = d.endpoint_id "
    "WHERE d.job_id = :job ORDER BY d.created_at, d.id FOR UPDATE OF d"
)

# An endpoint's finished attempts (answered or errored: not one in flight) since a time, in one
# statement: count, successes (a 2xx), latency percentiles, and the newest failure.
_FINISHED_ATTEMPTS = """
  FROM webhook_attempts AS a JOIN webhook_deliveries AS d ON d.id = a.delivery_id
  WHERE d.endpoint_id = :id AND a.at >= :since AND (a.status_code IS NOT NULL OR a.error IS NOT NULL)"""
_OK = "a.error IS NULL AND a.status_code BETWEEN 200 AND 299"
STATS = text(f"""
WITH last_failure AS (
  SELECT a.at, a.status_code, a.error {_FINISHED_ATTEMPTS} AND NOT ({_OK}) ORDER BY a.at DESC LIMIT 1
)
SELECT count(*), count(*) FILTER (WHERE {_OK}),
  percentile_cont(0.5) WITHIN GROUP (ORDER BY a.duration_ms),
  percentile_cont(0.95) WITHIN GROUP (ORDER BY a.duration_ms),
  (SELECT at FROM last_failure), (SELECT status_code FROM last_failure), (SELECT error FROM last_failure)
{_FINISHED_ATTEMPTS}""")

# Retention (gatehouse.retention): delivered or dead deliveries last changed longer ago than their
# retention (index webhook_deliveries_finished), with their attempts, in one statement; each by its
# key (``= ANY(ARRAY(…))``: ``IN (…)`` may be planned as a scan of the whole table). A replay moves
# a delivery back to pending, so a replayed dead letter is never pruned mid-series.
_PRUNABLE_DELIVERY = "status = :status AND updated_at < now() - :age_ms * interval '1 millisecond'"
PRUNE_DELIVERIES = text(f"""
WITH doomed AS (
  SELECT id FROM webhook_deliveries WHERE {_PRUNABLE_DELIVERY}
  ORDER BY updated_at LIMIT :limit FOR UPDATE SKIP LOCKED
), attempts AS (
  DELETE FROM webhook_attempts WHERE delivery_id = ANY(ARRAY(SELECT id FROM doomed)) RETURNING 1
), deliveries AS (DELETE FROM webhook_deliveries WHERE id = ANY(ARRAY(SELECT id FROM doomed)) RETURNING 1)
SELECT (SELECT count(*) FROM deliveries), (SELECT count(*) FROM attempts)""")
PRUNABLE_DELIVERIES = text(f"""
SELECT count(*), coalesce(sum(d.attempts), 0) FROM (
  SELECT (SELECT count(*) FROM webhook_attempts WHERE delivery_id = w.id) AS attempts
  FROM webhook_deliveries AS w WHERE {_PRUNABLE_DELIVERY}) AS d""")


class WebhookStore:
    def __init__(
        self,
        engine: Engine,
        jobs: JobStore,
        *,
        cipher: Callable[[], TokenCipher],
        guard: Guard,
        batch_size: int,
        first_delay_ms: int,
        rotation_grace_ms: int,
        disable_after_ms: int,
    ) -> None:
        self.engine = engine
        self.jobs = jobs
        self._cipher = cipher
        self.guard = guard
        self.batch_size = batch_size
        # WEBHOOK_RETRY_SCHEDULE_MS[0] (scaled): the wait before a series' first attempt.
        self.first_delay_ms = first_delay_ms
        self.rotation_grace_ms = rotation_grace_ms
        # WEBHOOK_DISABLE_AFTER_MS: an endpoint whose every attempt failed this long is disabled.
        self.disable_after_ms = disable_after_ms

    # -- safety --------------------------------------------------------------------

    def check_url(self, url: str) -> None:
        """Refuse a target the SSRF rules forbid (checked at creation and before each attempt)."""
        self.guard.check_url(url)

    # -- the outbox -----------------------------------------------------------------

    def outbox(self, tx: Tx, events: Sequence[Event], endpoint_id: uuid.UUID | None = None) -> None:
        """Subscriber of the event bus: the events' deliveries and their jobs, in the caller's transaction."""
        listed = [
            {
                "id": e.id,
                "type": e.type,
                "payload": e.payload(),
                "account": e.data.get("accountId") if e.type in ACCOUNT_EVENT_TYPES else None,
            }
            for e in events
        ]
        batches = tx.all(
            OUTBOX,
            {"endpoint_id": endpoint_id, "events": json.dumps(listed), "batch_size": self.batch_size},
            _Batch,
        )
        self._queue(tx, batches)

    def _queue(self, tx: Tx, batches: Sequence[Any]) -> None:
        """A ``webhook.deliver`` job per batch (job_id, endpoint_id, size), due after the first delay."""
        self.jobs.create_many(
            tx,
            WEBHOOK_DELIVER,
            [(b.job_id, {"endpointId": str(b.endpoint_id), "deliveries": b.size}) for b in batches],
            delay_ms=self.first_delay_ms,
        )

    # -- endpoints -----------------------------------------------------------------

    @staticmethod
    def _event_types(event_types: Sequence[str] | None, account_id: uuid.UUID | None) -> list[str] | None:
        """The types as stored; an account's endpoint may name only its account's (null: all of those)."""
        if event_types is None:
            return None
        allowed = ACCOUNT_EVENT_TYPES if account_id else EVENT_TYPES
        unknown = sorted(set(event_types) - set(allowed))
        if unknown or not event_types:
            raise ValidationFailed(
                f"eventTypes must be a non-empty list of {', '.join(allowed)} (or absent: every type); "
                f"unknown: {', '.join(unknown) or 'none'}",
                field="eventTypes",
            )
        return sorted(set(event_types))

    @staticmethod
    def _description(description: str) -> str:
        if len(description) > DESCRIPTION_MAX or "\x00" in description:
            raise ValidationFailed(
                f"description is at most {DESCRIPTION_MAX} characters", field="description"
            )
        return description

    def create_endpoint(
        self,
        tx: Tx,
        url: str,
        *,
        event_types: Sequence[str] | None = None,
        description: str = "",
        account_id: uuid.UUID | None = None,
        rate_limit_per_second: int | None = None,
    ) -> Created:
        """An endpoint of ``account_id`` (its account's events only) or, with None, an admin endpoint."""
        self.check_url(url)
        types = self._event_types(event_types, account_id)
        secret, cipher = signing.new_secret(), self._cipher()
        row = tx.conn.execute(
            text(
                "INSERT INTO webhook_endpoints (id, account_id, url, description, event_types, "
                "rate_limit_per_second, secret, secret_key_id) VALUES (:id, :account_id, :url, :description, "
                f":event_types, :rate, :secret, :key_id) RETURNING {ENDPOINT_COLUMNS}"
            ),
            {
                "id": uuid.uuid4(),
                "account_id": account_id,
                "url": url,
                "description": self._description(description),
                "event_types": types,
                "rate": rate_limit_per_second,
                "secret": cipher.encrypt(secret),
                "key_id": cipher.key_id,
            },
        ).one()
        return Created(EndpointRecord(*row), secret)

    def list_endpoints(self, account_id: uuid.UUID | None = None) -> list[EndpointRecord]:
        """Every endpoint (admin endpoints and the accounts'), or only ``account_id``'s."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                text(
                    f"SELECT {ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE {OWNED} "
                    "ORDER BY created_at DESC, id DESC"
                ),
                {"account_id": account_id},
            )
            return [EndpointRecord(*row) for row in rows]

    def get_endpoint(
        self, endpoint_id: uuid.UUID, conn: Connection | None = None, *, account_id: uuid.UUID | None = None
    ) -> EndpointRecord:
        """The endpoint; with ``account_id``, only if that account owns it (else 404, as if absent)."""
        sql = text(f"SELECT {ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE id = :id AND {OWNED}")
        if conn is None:
            with self.engine.connect() as own:
                return self.get_endpoint(endpoint_id, own, account_id=account_id)
        params = {"id": endpoint_id, "account_id": account_id}
        return EndpointRecord(*one_or_404(conn, sql, params, f"webhook endpoint {endpoint_id}"))

    def update_endpoint(
        self,
        tx: Tx,
        endpoint_id: uuid.UUID,
        *,
        url: str | None = None,
        event_types: Sequence[str] | None = None,
        all_event_types: bool = False,
        enabled: bool | None = None,
        description: str | None = None,
        rate_limit_per_second: int | None = None,
        no_rate_limit: bool = False,
    ) -> EndpointRecord:
        """Edit; ``all_event_types`` subscribes to every type, ``no_rate_limit`` lifts the rate limit.
        Enabling clears the disabled reason and its time, and starts its failing anew."""
        # An unknown endpoint is 404 before its new URL is looked up.
        endpoint = self.get_endpoint(endpoint_id, tx.conn)
        sets, params = [], {"id": endpoint_id}
        if url is not None:
            self.check_url(url)
            sets.append("url = :url")
            params["url"] = url
        if all_event_types or event_types is not None:
            sets.append("event_types = :event_types")
            params["event_types"] = (
                None if all_event_types else self._event_types(event_types, endpoint.account_id)
            )
        if no_rate_limit or rate_limit_per_second is not None:
            sets.append("rate_limit_per_second = :rate")
            params["rate"] = rate_limit_per_second
        if description is not None:
            sets.append("description = :description")
            params["description"] = self._description(description)
        if enabled is not None:
            sets.append(
                "enabled = :enabled, disabled_reason = :reason, failing_since = NULL, "
                "disabled_at = CASE WHEN :enabled THEN NULL ELSE coalesce(disabled_at, now()) END"
            )
            params.update(enabled=enabled, reason=None if enabled else "disabled by an admin")
        row = tx.conn.execute(
            text(
                f"UPDATE webhook_endpoints SET {', '.join([*sets, 'updated_at = now()'])} "
                f"WHERE id = :id RETURNING {ENDPOINT_COLUMNS}"
            ),
            params,
        ).one_or_none()
        if row is None:
            raise NotFound(f"webhook endpoint {endpoint_id} not found")
        return EndpointRecord(*row)

    def delete_endpoint(self, tx: Tx, endpoint_id: uuid.UUID) -> None:
        """Gone with its deliveries; their queued jobs find nothing and end."""
        deleted = tx.conn.execute(
            text("DELETE FROM webhook_endpoints WHERE id = :id RETURNING id"), {"id": endpoint_id}
        ).first()
        if deleted is None:
            raise NotFound(f"webhook endpoint {endpoint_id} not found")

    def rotate_secret(self, tx: Tx, endpoint_id: uuid.UUID) -> str:
        """A new secret; the old one keeps signing for WEBHOOK_ROTATION_GRACE_MS. Returns the new one."""
        secret, cipher = signing.new_secret(), self._cipher()
        rotated = tx.conn.execute(
            text(
                "UPDATE webhook_endpoints SET previous_secret = secret, previous_secret_key_id = secret_key_id, "
                "secret = :secret, secret_key_id = :key_id, "
                "previous_secret_until = now() + :grace_ms * interval '1 millisecond', updated_at = now() "
                "WHERE id = :id RETURNING id"
            ),
            {
                "id": endpoint_id,
                "secret": cipher.encrypt(secret),
                "key_id": cipher.key_id,
                "grace_ms": self.rotation_grace_ms,
            },
        ).first()
        if rotated is None:
            raise NotFound(f"webhook endpoint {endpoint_id} not found")
        return secret

    def send_test(self, tx: Tx, endpoint_id: uuid.UUID) -> uuid.UUID:
        """A ``webhook.test`` event to this endpoint only, in ``tx``: its delivery id."""
        endpoint = self.get_endpoint(endpoint_id, tx.conn)
        disabled = Conflict(
            f"webhook endpoint {endpoint_id} is disabled", field="enabled", code="ENDPOINT_DISABLED"
        )
        if not endpoint.enabled:
            raise disabled
        event = Event("webhook.test", {"endpointId": str(endpoint_id), "message": "Gatehouse test event"})
        self.outbox(tx, [event], endpoint_id)
        delivery_id = tx.conn.execute(
            text("SELECT id FROM webhook_deliveries WHERE message_id = :m"), {"m": event.id}
        ).scalar()
        if delivery_id is None:  # disabled (or deleted) since the check above
            raise disabled
        return delivery_id

    # -- deliveries ------------------------------------------------------------------

    def get_delivery(self, delivery_id: uuid.UUID) -> tuple[DeliveryRecord, list[AttemptRecord]]:
        with self.engine.connect() as conn:
            sql = text(f"{DELIVERY_SELECT} WHERE d.id = :id")
            row = one_or_404(conn, sql, {"id": delivery_id}, f"webhook delivery {delivery_id}")
            attempts = conn.execute(
                text(
                    f"SELECT {ATTEMPT_COLUMNS} FROM webhook_attempts WHERE delivery_id = :id ORDER BY attempt"
                ),
                {"id": delivery_id},
            )
            return DeliveryRecord(*row), [AttemptRecord(*a) for a in attempts]

    def list_deliveries(
        self,
        *,
        endpoint_id: uuid.UUID | None = None,
        status: str | None = None,
        event_type: str | None = None,
        since: datetime | None = None,
        limit: int = 50,
        before: tuple[datetime, uuid.UUID] | None = None,
    ) -> list[DeliveryRecord]:
        """Newest first."""
        inner, params = DELIVERY_SELECT, {}
        if since is not None:
            inner += " WHERE d.created_at >= :since"
            params["since"] = since
        sql, page = newest_first(
            f"SELECT * FROM ({inner}) AS deliveries",
            {"endpoint_id": endpoint_id, "status": status, "event_type": event_type},
            limit=limit,
            before=before,
            param=lambda name: f":{name}",
        )
        with self.engine.connect() as conn:
            return [DeliveryRecord(*row) for row in conn.execute(text(sql), {**params, **page})]

    def delivery_counts(self) -> dict[uuid.UUID, dict[str, int]]:
        """Each endpoint's deliveries by status (every status, zeros too), in one grouped query."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                text(
                    "SELECT e.id, d.status, count(d.id) FROM webhook_endpoints AS e "
                    "LEFT JOIN webhook_deliveries AS d ON d.endpoint_id = e.id GROUP BY e.id, d.status"
                )
            ).all()
        counts: dict[uuid.UUID, dict[str, int]] = {}
        for endpoint_id, status, n in rows:
            by_status = counts.setdefault(endpoint_id, dict.fromkeys(STATUSES, 0))
            if status is not None:
                by_status[status] = n
        return counts

    def replay(self, tx: Tx, delivery_id: uuid.UUID) -> DeliveryRecord:
        """A dead or delivered message again: same ``webhook-id``, a new series of attempts.

        Returns the delivery as the replay left it (pending), read before the commit sends its
        job: a worker may deliver it before anyone reads it again.
        """
        batches = tx.conn.execute(
            text(REPLAY.format(where="d.id = :id", skip="")),
            {"id": delivery_id, "limit": 1, "batch_size": self.batch_size},
        ).all()
        if batches:
            self._queue(tx, batches)
            return DeliveryRecord(
                *tx.conn.execute(text(f"{DELIVERY_SELECT} WHERE d.id = :id"), {"id": delivery_id}).one()
            )
        found = tx.conn.execute(
            text(
                "SELECT d.status, e.enabled FROM webhook_deliveries AS d "
                "JOIN webhook_endpoints AS e ON e.id = d.endpoint_id WHERE d.id = :id"
            ),
            {"id": delivery_id},
        ).one_or_none()
        if found is None:
            raise NotFound(f"webhook delivery {delivery_id} not found")
        status, enabled = found
        if not enabled:
            raise Conflict("its endpoint is disabled: enable it first", code="ENDPOINT_DISABLED")
        raise Conflict(
            f"a {status} delivery cannot be replayed (only {' or '.join(REPLAYABLE)})",
            field="status",
            code="NOT_REPLAYABLE",
        )

    def start_replay_since(self, tx: Tx, endpoint_id: uuid.UUID, since: datetime | None) -> Accepted:
        """Queue the job that replays the endpoint's dead deliveries since ``since`` (all when None)."""
        job, _ = self.jobs.create(
            tx,
            WEBHOOK_REPLAY,
            payload={"endpointId": str(endpoint_id), "since": since.isoformat() if since else None},
        )
        return job

    def replay_dead_batch(self, tx: Tx, endpoint_id: uuid.UUID, since: datetime | None) -> int:
        """The next REPLAY_BATCH dead deliveries of an endpoint, each as a new series; 0 when none is left."""
        where = "d.endpoint_id = :endpoint_id AND d.status = 'dead'" + (
            " AND d.created_at >= :since" if since else ""
        )
        batches = tx.conn.execute(
            text(REPLAY.format(where=where, skip="SKIP LOCKED")),
            {
                "endpoint_id": endpoint_id,
                "since": since,
                "limit": REPLAY_BATCH,
                "batch_size": self.batch_size,
            },
        ).all()
        self._queue(tx, batches)
        return sum(b.size for b in batches)

    # -- one run of a job (the job body) ------------------------------------------------

    def begin_run(self, tx: Tx, job_id: uuid.UUID) -> Run | str:
        """Number an attempt of each undelivered delivery of the job and write its row; or why nothing is sent.

        Nothing is sent when the job has no delivery left (a replay took them over, or its
        endpoint was deleted), when all of them are delivered or dead, or when the endpoint
        is disabled (they go dead).
        """
        conn = tx.conn
        rows = conn.execute(BEGIN_RUN, {"job": job_id}).all()
        if not rows:
            return "replaced-or-gone"
        live = [r for r in rows if r[1] not in REPLAYABLE]
        if not live:
            return "already-" + "-or-".join(sorted({r[1] for r in rows}))
        endpoint_id, url, enabled, secret, previous, previous_live, rate = rows[0][5:]
        ids = [r[0] for r in live]
        if not enabled:
            conn.execute(
                text(
                    "UPDATE webhook_deliveries SET status = 'dead', updated_at = now(), "
                    "dead_reason = CAST(:why AS jsonb) || (SELECT jsonb_strip_nulls(jsonb_build_object("
                    "'endpointDisabledReason', disabled_reason, 'endpointDisabledAt', disabled_at, 'at', now())) "
                    "FROM webhook_endpoints WHERE id = :endpoint) "
                    "WHERE id = ANY(:ids)"
                ),
                {"ids": ids, "endpoint": endpoint_id, "why": json.dumps(dead_reason(ENDPOINT_DISABLED))},
            )
            return ENDPOINT_DISABLED
        conn.execute(
            text(
                "WITH numbered AS (UPDATE webhook_deliveries SET status = 'delivering', "
                "attempts = attempts + 1, updated_at = now() WHERE id = ANY(:ids) RETURNING id, attempts) "
                "INSERT INTO webhook_attempts (delivery_id, attempt) SELECT id, attempts FROM numbered"
            ),
            {"ids": ids},
        )
        cipher = self._cipher()
        secrets = (cipher.decrypt(secret),) + (
            (cipher.decrypt(previous),) if previous and previous_live else ()
        )
        attempts = tuple(
            Attempt(
                d, n + 1, message_id, signing.body_of(payload), "pending" if was == "pending" else "failed"
            )
            for d, was, n, message_id, payload, *_ in live
        )
        return Run(job_id, endpoint_id, url, secrets, attempts, rate)

    def end_run(
        self,
        tx: Tx,
        run: Run,
        answered: Sequence[tuple[Attempt, Answer, str]],
        *,
        unsent: Sequence[Attempt] = (),
        gone: str | None = None,
    ) -> int:
        """Record what the run's attempts got, each moving its delivery to a status (delivered, failed, dead).

        ``unsent``: attempts the run numbered but stopped before sending; they go back to how
        they were. ``gone`` (a 410 Gone, with the reason): in the same transaction the endpoint
        is disabled and its waiting deliveries stopped (dead, their jobs failed), so no crash
        can leave the endpoint still taking deliveries. Returns how many were stopped.
        """
        conn = tx.conn
        if answered:
            conn.execute(
                END_ATTEMPTS,
                {
                    "ids": [a.delivery_id for a, _, _ in answered],
                    "numbers": [a.number for a, _, _ in answered],
                    "statuses": [status for _, _, status in answered],
                    "codes": [answer.status_code for _, answer, _ in answered],
                    "errors": [answer.error for _, answer, _ in answered],
                    "ms": [answer.duration_ms for _, answer, _ in answered],
                    "excerpts": [
                        (answer.excerpt or "")[:RESPONSE_EXCERPT_MAX] or None for _, answer, _ in answered
                    ],
                    "dead_reasons": [
                        json.dumps(
                            dead_reason(
                                ENDPOINT_GONE if answer.status_code == 410 else EXHAUSTED,
                                attempt=a.number,
                                statusCode=answer.status_code,
                                error=answer.error,
                            )
                        )
                        if status == "dead"
                        else None
                        for a, answer, status in answered
                    ],
                },
            )
        if unsent:
            conn.execute(
                UNSEND,
                {
                    "ids": [a.delivery_id for a in unsent],
                    "numbers": [a.number for a in unsent],
                    "was": [a.was for a in unsent],
                },
            )
        if gone is None:
            return 0
        conn.execute(
            text(
                "UPDATE webhook_endpoints SET enabled = false, disabled_reason = :reason, disabled_at = now(), "
                "updated_at = now() WHERE id = :id"
            ),
            {"id": run.endpoint_id, "reason": gone},
        )
        # The delivery whose 410 disabled the endpoint, named on each one it stopped.
        by = next(a.delivery_id for a, answer, _ in answered if answer.status_code == 410)
        return self._stop(tx, run.endpoint_id, ENDPOINT_GONE, gone, byDelivery=str(by))

    def _stop(self, tx: Tx, endpoint_id: uuid.UUID, reason: str, message: str, **details: Any) -> int:
        """A just disabled endpoint's waiting deliveries: dead for ``reason``, their jobs failed; how many."""
        stopped = tx.conn.execute(
            text(
                "UPDATE webhook_deliveries SET status = 'dead', updated_at = now(), "
                "dead_reason = CAST(:why AS jsonb) || jsonb_build_object('endpointDisabledAt', now(), 'at', now()) "
                "WHERE endpoint_id = :id AND status IN ('pending', 'failed') RETURNING job_id"
            ),
            {"id": endpoint_id, "why": json.dumps(dead_reason(reason, **details))},
        ).all()
        self.jobs.cancel_many(
            tx,
            list({job_id for (job_id,) in stopped if job_id}),
            error={"code": reason, "message": message},
            progress=P.stored(P.FAILED, reason=reason),
        )
        return len(stopped)

    def note_health(self, tx: Tx, endpoint_id: uuid.UUID, *, ok: bool) -> EndpointRecord | None:
        """A run's outcome for its endpoint's health; the endpoint if this disabled it as failing.

        A success clears ``failing_since``; a run whose every attempt failed sets it (if unset) and,
        once it is WEBHOOK_DISABLE_AFTER_MS old, disables the endpoint (reason ``failing``) and
        stops its waiting deliveries (dead, ``endpoint-failing``). Writes nothing while the state holds.
        """
        params = {"id": endpoint_id, "ok": ok, "after_ms": self.disable_after_ms}
        tx.conn.execute(
            text(
                "UPDATE webhook_endpoints SET failing_since = CASE WHEN :ok THEN NULL ELSE now() END "
                "WHERE id = :id AND (failing_since IS NULL) = NOT :ok"
            ),
            params,
        )
        if ok:
            return None
        row = tx.conn.execute(
            text(
                "UPDATE webhook_endpoints SET enabled = false, disabled_reason = :reason, disabled_at = now(), "
                "updated_at = now() WHERE id = :id AND enabled "
                "AND failing_since <= now() - :after_ms * interval '1 millisecond' "
                f"RETURNING {ENDPOINT_COLUMNS}"
            ),
            {**params, "reason": FAILING},
        ).one_or_none()
        if row is None:
            return None
        disabled = EndpointRecord(*row)
        self._stop(tx, endpoint_id, ENDPOINT_FAILING, f"every attempt failed since {disabled.failing_since}")
        return disabled

    def stats(self, endpoint_id: uuid.UUID, since: datetime) -> Stats:
        """Its finished attempts since ``since``: how many, how many succeeded, p50/p95 latency, the last failure."""
        with self.engine.connect() as conn:
            row = conn.execute(STATS, {"id": endpoint_id, "since": since}).one()
        attempts, succeeded, p50, p95, failed_at, code, error = row
        return Stats(attempts, succeeded, p50, p95, (failed_at, code, error) if failed_at else None)

    # -- secrets at rest ---------------------------------------------------------------

    def clear_expired_previous_secrets(self, tx: Tx) -> int:
        """Forget the previous secrets whose grace period has ended (they sign nothing any more)."""
        return tx.conn.execute(
            text(
                "UPDATE webhook_endpoints SET previous_secret = NULL, previous_secret_key_id = NULL, "
                "previous_secret_until = NULL WHERE previous_secret IS NOT NULL AND previous_secret_until <= now()"
            )
        ).rowcount

    def reencrypt_secrets(self, tx: Tx, *, after: uuid.UUID, limit: int) -> Reencrypted:
        """The next ``limit`` endpoints after ``after`` with a secret (current or previous) not under the
        first key, encrypted with it."""
        return reencrypt(tx.conn, SECRETS, self._cipher(), after=after, limit=limit)

    def old_key_secrets(self) -> int:
        """Endpoints with a secret (current or previous) not under the first key of TOKEN_ENCRYPTION_KEY."""
        with self.engine.connect() as conn:
            return SECRETS.old_key_rows(conn, self._cipher())

    # -- retention -------------------------------------------------------------------

    def prune_deliveries(self, tx: Tx, status: str, *, age_ms: int, limit: int) -> tuple[int, int]:
        """Delete up to ``limit`` deliveries ``status`` (delivered, dead) unchanged for ``age_ms``, and
        their attempts; returns (deliveries, attempts) deleted."""
        params = {"status": status, "age_ms": age_ms, "limit": limit}
        deliveries, attempts = tx.conn.execute(PRUNE_DELIVERIES, params).one()
        return deliveries, attempts

    def prunable_deliveries(self, status: str, *, age_ms: int) -> tuple[int, int]:
        """(deliveries, attempts) that ``prune_deliveries`` would delete now, in all its batches."""
        with self.engine.connect() as conn:
            deliveries, attempts = conn.execute(
                PRUNABLE_DELIVERIES, {"status": status, "age_ms": age_ms}
            ).one()
        return deliveries, int(attempts)
