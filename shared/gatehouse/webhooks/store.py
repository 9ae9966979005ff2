"""The webhooks' SQL: endpoints, the outbox of domain events, one attempt's bookkeeping, replays.

The outbox (``WebhookStore.outbox``) is an event-bus subscriber: in the
transaction of the change that raised the event it writes one delivery per
enabled endpoint subscribed to the event's type, and the ``webhook.deliver``
job row of each, in one statement; the caller sends the jobs after commit.

An attempt is the job body's (gatehouse_worker.jobs.webhooks): ``begin_attempt``
locks the delivery, numbers the attempt and writes its row before any byte is
sent; ``end_attempt`` records what came back and the delivery's new status.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from psycopg.types.json import Jsonb
from sqlalchemy import Engine

from gatehouse import progress as P
from gatehouse.crypto import TokenCipher
from gatehouse.errors import Conflict, NotFound, ValidationFailed
from gatehouse.events import Event, Sql, on_connection
from gatehouse.job_types import WEBHOOK_DELIVER, WEBHOOK_REPLAY
from gatehouse.jobs import SQL_CANCEL, SQL_CREATE, Accepted, Delivery
from gatehouse.paging import newest_first
from gatehouse.webhooks import signing
from gatehouse.webhooks.safety import Allowlist, check_url
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
    "wb.job.completed",
    "wb.job.failed",
    "webhook.test",
)
DESCRIPTION_MAX = 500
RESPONSE_EXCERPT_MAX = 2_000
REPLAY_BATCH = 500


@dataclass(frozen=True)
class Created:
    endpoint: EndpointRecord
    secret: str  # shown once


@dataclass(frozen=True)
class Attempt:
    """What one attempt sends: where, which message, signed with which secrets."""

    delivery_id: uuid.UUID
    number: int  # over the delivery's life
    endpoint_id: uuid.UUID
    url: str
    message_id: str
    body: str
    secrets: tuple[str, ...]  # newest first


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


# The first attempt waits WEBHOOK_RETRY_SCHEDULE_MS[0] (scaled): on the row (state, resume_at), so
# the status and reconciliation know it as they know any delayed job.
FIRST_ATTEMPT = (
    "CASE WHEN %(first_delay_ms)s > 0 THEN 'delayed' ELSE 'waiting' END, "
    "CASE WHEN %(first_delay_ms)s > 0 THEN now() + %(first_delay_ms)s * interval '1 millisecond' END"
)
# One statement: the deliveries of an event to every subscribed enabled endpoint (or to one
# endpoint: a test event) and each one's job row; returns the jobs to send after commit.
OUTBOX = f"""
WITH targets AS MATERIALIZED (
  SELECT e.id AS endpoint_id, gen_random_uuid() AS delivery_id, gen_random_uuid() AS job_id
  FROM webhook_endpoints AS e
  WHERE e.enabled AND CASE WHEN %(endpoint_id)s::uuid IS NULL
    THEN e.event_types IS NULL OR %(type)s = ANY(e.event_types) ELSE e.id = %(endpoint_id)s::uuid END
), deliveries AS (
  INSERT INTO webhook_deliveries (id, endpoint_id, message_id, event_type, payload, job_id)
  SELECT delivery_id, endpoint_id, %(message_id)s, %(type)s, %(payload)s, job_id FROM targets
)
INSERT INTO jobs (id, type, queue, tier, max_attempts, payload, state, resume_at)
SELECT job_id, %(job_type)s, %(queue)s, 'user', %(max_attempts)s,
  jsonb_build_object('deliveryId', delivery_id, 'endpointId', endpoint_id), {FIRST_ATTEMPT}
FROM targets
RETURNING id, queue, type, delivery
"""
# A new series of attempts for replayable deliveries (locked, so two replays make one series: the
# second waits for the first, then finds the delivery pending). A batch replay skips rows in use.
REPLAY = f"""
WITH chosen AS MATERIALIZED (
  SELECT d.id AS delivery_id, d.endpoint_id, gen_random_uuid() AS job_id FROM webhook_deliveries AS d
  JOIN webhook_endpoints AS e ON e.id = d.endpoint_id AND e.enabled
  WHERE {{where}} AND d.status IN {REPLAYABLE}
  ORDER BY d.created_at LIMIT %(limit)s FOR UPDATE OF d {{skip}}
), moved AS (
  UPDATE webhook_deliveries AS d SET status = 'pending', job_id = c.job_id, delivered_at = NULL,
    updated_at = now()
  FROM chosen AS c WHERE d.id = c.delivery_id
)
INSERT INTO jobs (id, type, queue, tier, max_attempts, payload, state, resume_at)
SELECT job_id, %(job_type)s, %(queue)s, 'user', %(max_attempts)s,
  jsonb_build_object('deliveryId', delivery_id, 'endpointId', endpoint_id), {FIRST_ATTEMPT}
FROM chosen
RETURNING id, queue, type, delivery
"""


def _delivery(row: Any, first_delay_ms: int) -> Delivery:
    return Delivery(row.id, row.queue, row.type, row.delivery, eta_ms=_eta(first_delay_ms))


def _eta(delay_ms: int) -> int | None:
    return int(datetime.now(UTC).timestamp() * 1000) + delay_ms if delay_ms > 0 else None


class WebhookStore:
    def __init__(
        self,
        engine: Engine,
        *,
        settings: Any,
        cipher: Callable[[], TokenCipher],
        resolve: Callable[..., list[str]] | None = None,
    ) -> None:
        self.engine = engine
        self.settings = settings
        self._cipher = cipher
        self._resolve = resolve
        self.allowlist = Allowlist.parse(settings.webhook_allowed_hosts)

    # -- safety --------------------------------------------------------------------

    def check_url(self, url: str) -> None:
        """Refuse a target the SSRF rules forbid (checked at creation and before each attempt)."""
        kwargs = {"resolve": self._resolve} if self._resolve else {}
        check_url(url, self.allowlist, **kwargs)

    # -- the outbox -----------------------------------------------------------------

    def _job(self) -> dict[str, Any]:
        policy = WEBHOOK_DELIVER.policy(self.settings)
        return {
            "job_type": WEBHOOK_DELIVER.name,
            "queue": WEBHOOK_DELIVER.queue,
            "max_attempts": policy.attempts,
            "first_delay_ms": self._first_delay_ms(),
        }

    def _first_delay_ms(self) -> int:
        return round(self.settings.webhook_retry_schedule_ms[0] * self.settings.retry_delay_scale)

    def outbox(self, sql: Sql, event: Event, endpoint_id: uuid.UUID | None = None) -> list[Delivery]:
        """Subscriber of the event bus: the event's deliveries and their jobs, in the caller's transaction."""
        rows = sql(
            OUTBOX,
            {
                "endpoint_id": endpoint_id,
                "type": event.type,
                "message_id": event.id,
                "payload": Jsonb(event.payload()),
                **self._job(),
            },
        )
        return [_delivery(row, self._first_delay_ms()) for row in rows]

    # -- endpoints -----------------------------------------------------------------

    @staticmethod
    def _event_types(event_types: Sequence[str] | None) -> list[str] | None:
        if event_types is None:
            return None
        unknown = sorted(set(event_types) - set(EVENT_TYPES))
        if unknown or not event_types:
            raise ValidationFailed(
                f"eventTypes must be a non-empty list of {', '.join(EVENT_TYPES)} (or absent: every type); "
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
        self, url: str, *, event_types: Sequence[str] | None = None, description: str = ""
    ) -> Created:
        self.check_url(url)
        types = self._event_types(event_types)
        secret = signing.new_secret()
        with self.engine.begin() as conn:
            [row] = on_connection(conn)(
                "INSERT INTO webhook_endpoints (id, url, description, event_types, secret) "
                "VALUES (%(id)s, %(url)s, %(description)s, %(event_types)s, %(secret)s) "
                f"RETURNING {ENDPOINT_COLUMNS}",
                {
                    "id": uuid.uuid4(),
                    "url": url,
                    "description": self._description(description),
                    "event_types": types,
                    "secret": self._cipher().encrypt(secret),
                },
            )
        return Created(EndpointRecord(*row), secret)

    def list_endpoints(self) -> list[EndpointRecord]:
        with self.engine.connect() as conn:
            rows = on_connection(conn)(
                f"SELECT {ENDPOINT_COLUMNS} FROM webhook_endpoints ORDER BY created_at DESC, id DESC", {}
            )
        return [EndpointRecord(*row) for row in rows]

    def get_endpoint(self, endpoint_id: uuid.UUID) -> EndpointRecord:
        with self.engine.connect() as conn:
            rows = on_connection(conn)(
                f"SELECT {ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE id = %(id)s", {"id": endpoint_id}
            )
        if not rows:
            raise NotFound(f"webhook endpoint {endpoint_id} not found")
        return EndpointRecord(*rows[0])

    def update_endpoint(
        self,
        endpoint_id: uuid.UUID,
        *,
        url: str | None = None,
        event_types: Sequence[str] | None = None,
        all_event_types: bool = False,
        enabled: bool | None = None,
        description: str | None = None,
    ) -> EndpointRecord:
        """Edit; ``all_event_types`` subscribes to every type. Enabling clears the disabled reason."""
        self.get_endpoint(endpoint_id)  # an unknown endpoint is 404 before its new URL is looked up
        sets, params = [], {"id": endpoint_id}
        if url is not None:
            self.check_url(url)
            sets.append("url = %(url)s")
            params["url"] = url
        if all_event_types or event_types is not None:
            sets.append("event_types = %(event_types)s")
            params["event_types"] = None if all_event_types else self._event_types(event_types)
        if description is not None:
            sets.append("description = %(description)s")
            params["description"] = self._description(description)
        if enabled is not None:
            sets.append("enabled = %(enabled)s, disabled_reason = %(reason)s")
            params.update(enabled=enabled, reason=None if enabled else "disabled by an admin")
        with self.engine.begin() as conn:
            rows = on_connection(conn)(
                f"UPDATE webhook_endpoints SET {', '.join([*sets, 'updated_at = now()'])} "
                f"WHERE id = %(id)s RETURNING {ENDPOINT_COLUMNS}",
                params,
            )
        if not rows:
            raise NotFound(f"webhook endpoint {endpoint_id} not found")
        return EndpointRecord(*rows[0])

    def delete_endpoint(self, endpoint_id: uuid.UUID) -> None:
        """Gone with its deliveries; their queued jobs find nothing and end."""
        with self.engine.begin() as conn:
            if not on_connection(conn)(
                "DELETE FROM webhook_endpoints WHERE id = %(id)s RETURNING id", {"id": endpoint_id}
            ):
                raise NotFound(f"webhook endpoint {endpoint_id} not found")

    def rotate_secret(self, endpoint_id: uuid.UUID) -> str:
        """A new secret; the old one keeps signing for WEBHOOK_ROTATION_GRACE_MS. Returns the new one."""
        secret = signing.new_secret()
        with self.engine.begin() as conn:
            rows = on_connection(conn)(
                "UPDATE webhook_endpoints SET previous_secret = secret, secret = %(secret)s, "
                "previous_secret_until = now() + %(grace_ms)s * interval '1 millisecond', updated_at = now() "
                "WHERE id = %(id)s RETURNING id",
                {
                    "id": endpoint_id,
                    "secret": self._cipher().encrypt(secret),
                    "grace_ms": self.settings.webhook_rotation_grace_ms,
                },
            )
        if not rows:
            raise NotFound(f"webhook endpoint {endpoint_id} not found")
        return secret

    def send_test(self, endpoint_id: uuid.UUID) -> tuple[uuid.UUID, list[Delivery]]:
        """A ``webhook.test`` event to this endpoint only: its delivery id and the job to send."""
        endpoint = self.get_endpoint(endpoint_id)
        if not endpoint.enabled:
            raise Conflict(
                f"webhook endpoint {endpoint_id} is disabled", field="enabled", code="ENDPOINT_DISABLED"
            )
        event = Event("webhook.test", {"endpointId": str(endpoint_id), "message": "Gatehouse test event"})
        with self.engine.begin() as conn:
            sent = self.outbox(on_connection(conn), event, endpoint_id)
            rows = on_connection(conn)(
                "SELECT id FROM webhook_deliveries WHERE message_id = %(m)s", {"m": event.id}
            )
        if not rows:  # disabled (or deleted) since the check above
            raise Conflict(
                f"webhook endpoint {endpoint_id} is disabled", field="enabled", code="ENDPOINT_DISABLED"
            )
        return rows[0][0], sent

    # -- deliveries ------------------------------------------------------------------

    def get_delivery(self, delivery_id: uuid.UUID) -> tuple[DeliveryRecord, list[AttemptRecord]]:
        with self.engine.connect() as conn:
            sql = on_connection(conn)
            rows = sql(f"{DELIVERY_SELECT} WHERE d.id = %(id)s", {"id": delivery_id})
            if not rows:
                raise NotFound(f"webhook delivery {delivery_id} not found")
            attempts = sql(
                f"SELECT {ATTEMPT_COLUMNS} FROM webhook_attempts WHERE delivery_id = %(id)s ORDER BY attempt",
                {"id": delivery_id},
            )
        return DeliveryRecord(*rows[0]), [AttemptRecord(*a) for a in attempts]

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
            inner += " WHERE d.created_at >= %(since)s"
            params["since"] = since
        sql, page = newest_first(
            f"SELECT * FROM ({inner}) AS deliveries",
            {"endpoint_id": endpoint_id, "status": status, "event_type": event_type},
            limit=limit,
            before=before,
            param=lambda name: f"%({name})s",
        )
        with self.engine.connect() as conn:
            rows = on_connection(conn)(sql, {**params, **page})
        return [DeliveryRecord(*row) for row in rows]

    def delivery_counts(self) -> dict[uuid.UUID, dict[str, int]]:
        """Each endpoint's deliveries by status (every status, zeros too), in one grouped query."""
        with self.engine.connect() as conn:
            rows = on_connection(conn)(
                "SELECT e.id, d.status, count(d.id) FROM webhook_endpoints AS e "
                "LEFT JOIN webhook_deliveries AS d ON d.endpoint_id = e.id GROUP BY e.id, d.status",
                {},
            )
        counts: dict[uuid.UUID, dict[str, int]] = {}
        for endpoint_id, status, n in rows:
            by_status = counts.setdefault(endpoint_id, dict.fromkeys(STATUSES, 0))
            if status is not None:
                by_status[status] = n
        return counts

    def replay(self, delivery_id: uuid.UUID) -> list[Delivery]:
        """A dead or delivered message again: same ``webhook-id``, a new series of attempts."""
        with self.engine.begin() as conn:
            sql = on_connection(conn)
            rows = sql(
                REPLAY.format(where="d.id = %(id)s", skip=""), {"id": delivery_id, "limit": 1, **self._job()}
            )
            if not rows:
                found = sql(
                    "SELECT d.status, e.enabled FROM webhook_deliveries AS d "
                    "JOIN webhook_endpoints AS e ON e.id = d.endpoint_id WHERE d.id = %(id)s",
                    {"id": delivery_id},
                )
                if not found:
                    raise NotFound(f"webhook delivery {delivery_id} not found")
                status, enabled = found[0]
                if not enabled:
                    raise Conflict("its endpoint is disabled: enable it first", code="ENDPOINT_DISABLED")
                raise Conflict(
                    f"a {status} delivery cannot be replayed (only {' or '.join(REPLAYABLE)})",
                    field="status",
                    code="NOT_REPLAYABLE",
                )
        return [_delivery(row, self._first_delay_ms()) for row in rows]

    def start_replay_since(
        self, endpoint_id: uuid.UUID, since: datetime | None
    ) -> tuple[Accepted, list[Delivery]]:
        """Queue the job that replays the endpoint's dead deliveries since ``since`` (all when None)."""
        self.get_endpoint(endpoint_id)
        with self.engine.begin() as conn:
            [row] = on_connection(conn)(
                SQL_CREATE,
                {
                    "id": uuid.uuid4(),
                    "type": WEBHOOK_REPLAY.name,
                    "queue": WEBHOOK_REPLAY.queue,
                    "tier": WEBHOOK_REPLAY.tier,
                    "account_id": None,
                    "max_attempts": WEBHOOK_REPLAY.policy(self.settings).attempts,
                    "payload": Jsonb(
                        {"endpointId": str(endpoint_id), "since": since.isoformat() if since else None}
                    ),
                },
            )
        job = Accepted(*row)
        return job, [Delivery(job.id, job.queue, job.type, job.delivery)]

    def replay_dead_batch(self, endpoint_id: uuid.UUID, since: datetime | None) -> list[Delivery]:
        """The next REPLAY_BATCH dead deliveries of an endpoint, each as a new series; [] when none is left."""
        where = "d.endpoint_id = %(endpoint_id)s AND d.status = 'dead'" + (
            " AND d.created_at >= %(since)s" if since else ""
        )
        with self.engine.begin() as conn:
            rows = on_connection(conn)(
                REPLAY.format(where=where, skip="SKIP LOCKED"),
                {"endpoint_id": endpoint_id, "since": since, "limit": REPLAY_BATCH, **self._job()},
            )
        return [_delivery(row, self._first_delay_ms()) for row in rows]

    # -- one attempt (the job body) ----------------------------------------------------

    def begin_attempt(self, delivery_id: uuid.UUID, job_id: uuid.UUID) -> Attempt | str:
        """Number the next attempt and write its row; or why nothing is to be sent (a str).

        Nothing is sent for a delivery that is gone, already delivered or dead, of another
        series (a replay took it over), or whose endpoint is disabled (it goes dead).
        """
        with self.engine.begin() as conn:
            sql = on_connection(conn)
            rows = sql(
                "SELECT d.status, d.attempts, d.job_id, d.message_id, d.payload, e.id, e.url, e.enabled, "
                "e.secret, e.previous_secret, e.previous_secret_until > now() "
                "FROM webhook_deliveries AS d JOIN webhook_endpoints AS e ON e.id = d.endpoint_id "
                "WHERE d.id = %(id)s FOR UPDATE OF d",
                {"id": delivery_id},
            )
            if not rows:
                return "delivery-gone"
            status, attempts, series, message_id, payload, endpoint_id, url, enabled, *keys = rows[0]
            if series != job_id:
                return "replaced-by-replay"
            if status in REPLAYABLE:
                return f"already-{status}"
            if not enabled:
                sql(
                    "UPDATE webhook_deliveries SET status = 'dead', updated_at = now() WHERE id = %(id)s",
                    {"id": delivery_id},
                )
                return "endpoint-disabled"
            number = attempts + 1
            sql(
                "UPDATE webhook_deliveries SET status = 'delivering', attempts = %(n)s, updated_at = now() "
                "WHERE id = %(id)s",
                {"id": delivery_id, "n": number},
            )
            sql(
                "INSERT INTO webhook_attempts (delivery_id, attempt) VALUES (%(id)s, %(n)s)",
                {"id": delivery_id, "n": number},
            )
        secret, previous, previous_live = keys
        cipher = self._cipher()
        secrets = (cipher.decrypt(secret),) + (
            (cipher.decrypt(previous),) if previous and previous_live else ()
        )
        return Attempt(delivery_id, number, endpoint_id, url, message_id, signing.body_of(payload), secrets)

    def end_attempt(self, attempt: Attempt, answer: Answer, *, status: str, gone: str | None = None) -> int:
        """Record what the attempt got and move the delivery to ``status`` (delivered, failed or dead).

        ``gone`` (a 410 Gone, with the reason): in the same transaction the endpoint is disabled
        and its waiting deliveries stopped (dead, their jobs failed), so no crash can leave the
        delivery dead and the endpoint still taking deliveries. Returns how many were stopped.
        """
        with self.engine.begin() as conn:
            sql = on_connection(conn)
            sql(
                "UPDATE webhook_attempts SET status_code = %(code)s, error = %(error)s, "
                "duration_ms = %(ms)s, response_excerpt = %(excerpt)s "
                "WHERE delivery_id = %(id)s AND attempt = %(n)s",
                {
                    "id": attempt.delivery_id,
                    "n": attempt.number,
                    "code": answer.status_code,
                    "error": answer.error,
                    "ms": answer.duration_ms,
                    "excerpt": (answer.excerpt or "")[:RESPONSE_EXCERPT_MAX] or None,
                },
            )
            sql(
                "UPDATE webhook_deliveries SET status = CAST(%(status)s AS text), updated_at = now(), "
                "delivered_at = CASE WHEN CAST(%(status)s AS text) = 'delivered' THEN now() END WHERE id = %(id)s",
                {"id": attempt.delivery_id, "status": status},
            )
            if gone is None:
                return 0
            sql(
                "UPDATE webhook_endpoints SET enabled = false, disabled_reason = %(reason)s, updated_at = now() "
                "WHERE id = %(id)s",
                {"id": attempt.endpoint_id, "reason": gone},
            )
            stopped = sql(
                "UPDATE webhook_deliveries SET status = 'dead', updated_at = now() "
                "WHERE endpoint_id = %(id)s AND status IN ('pending', 'failed') RETURNING job_id",
                {"id": attempt.endpoint_id},
            )
            sql(
                SQL_CANCEL,
                {
                    "ids": [job_id for (job_id,) in stopped if job_id],
                    "error": Jsonb({"code": "endpoint-gone", "message": gone}),
                    "progress": Jsonb(P.stored(P.FAILED, reason="endpoint-gone")),
                },
            )
        return len(stopped)
