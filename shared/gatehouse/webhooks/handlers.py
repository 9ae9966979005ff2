"""The webhooks' use cases: endpoints, test events, replays, and one run of a ``webhook.deliver`` job.

A run holds a batch of one endpoint's deliveries (the outbox's, at most
WEBHOOK_BATCH_SIZE). It takes a slot of the endpoint (none free: it waits, no
attempt spent), numbers an attempt of each undelivered delivery, checks the
URL again (SSRF rules, the allowlist of now; each new connection checks the
addresses it goes to again: gatehouse.webhooks.pinning), then signs and POSTs them one
after another in that one slot, and records what came back in one
transaction. If any failed, the run raises, so the runtime schedules the next
attempt of the ones left on WEBHOOK_RETRY_SCHEDULE_MS; ``Retry-After`` on a
429/503 pushes it later; 410 Gone disables the endpoint and stops the run. A
delivery is ``failed`` while attempts are left and ``dead`` after the last.

An endpoint with a rate limit sends only when its pace allows (gatehouse.webhooks.slots): a
delivery beyond it is not sent, and the run waits for the next turn (JobPaused), spending no
attempt. A run whose every attempt failed counts toward the endpoint's failing; past
WEBHOOK_DISABLE_AFTER_MS of that the endpoint is disabled (``failing``), the other endpoints
get ``webhook.endpoint.disabled`` and the staff a notification, in the run's transaction.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from dramatiq.common import current_millis

from gatehouse import logs, metrics, traces
from gatehouse import progress as P
from gatehouse.errors import Conflict, JobPaused, PermanentJobError, RetryLater, ValidationFailed
from gatehouse.events import Event
from gatehouse.jobs import Accepted
from gatehouse.notifications import NotificationStore
from gatehouse.uow import Tx, UnitOfWork
from gatehouse.webhooks import sender, signing
from gatehouse.webhooks.safety import origin
from gatehouse.webhooks.slots import EndpointSlots
from gatehouse.webhooks.store import ENDPOINT_FAILING, FAILING, Answer, Attempt, Created, Run, WebhookStore
from gatehouse.webhooks.tables import DeliveryRecord, EndpointRecord

# An attempt that found every slot of its endpoint taken looks again after this long.
SLOT_WAIT_MS = 1_000
SLOT_MARGIN_MS = 30_000  # a slot outlives its request by this much, then frees itself
GONE = "the endpoint answered 410 Gone"
ENDPOINTS_PAGE = "/console/webhooks/endpoints"
log = logging.getLogger(__name__)


class DeliveryFailed(Exception):
    code = "delivery-failed"


class Slot:
    """The run's slot of its endpoint, its lease renewed as the batch goes (before a request could outlive it)."""

    def __init__(self, slots: EndpointSlots, endpoint_id: str, holder: str, *, limit: int, timeout_ms: int):
        self.slots, self.endpoint_id, self.holder, self.limit = slots, endpoint_id, holder, limit
        self.lease_ms = timeout_ms + SLOT_MARGIN_MS
        self.taken_at = 0.0

    def take(self) -> None:
        if not self.slots.acquire(self.endpoint_id, self.holder, limit=self.limit, lease_ms=self.lease_ms):
            raise JobPaused(
                "every slot of the endpoint is taken",
                resume_at_ms=current_millis() + SLOT_WAIT_MS,
                phase=P.WAITING_ENDPOINT,
                reason="endpoint-busy",
            )
        self.taken_at = time.monotonic()

    def keep(self) -> None:
        """Renew when half the margin is gone: the lease then covers the next request with room to spare."""
        if time.monotonic() - self.taken_at > SLOT_MARGIN_MS / 2000:
            self.take()

    def release(self) -> None:
        self.slots.release(self.endpoint_id, self.holder)


class WebhookHandlers:
    def __init__(
        self,
        uow: UnitOfWork,
        webhooks: WebhookStore,
        slots: EndpointSlots,
        notifications: NotificationStore,
        *,
        transport: Callable[[], httpx.BaseTransport],
        max_per_endpoint: int,
        timeout_ms: int,
        attempts: int,
    ) -> None:
        self.uow, self.webhooks, self.slots, self.notifications = uow, webhooks, slots, notifications
        self.transport = transport  # this process's one connection pool, made on first use
        self.max_per_endpoint, self.timeout_ms, self.attempts = max_per_endpoint, timeout_ms, attempts

    # -- endpoints -----------------------------------------------------------------

    def create_endpoint(
        self,
        url: str,
        *,
        event_types: Sequence[str] | None,
        description: str,
        account_id: uuid.UUID | None = None,
        rate_limit_per_second: int | None = None,
    ) -> Created:
        """An admin endpoint, or with ``account_id`` one of that account (its events only)."""
        with self.uow.begin() as tx:
            return self.webhooks.create_endpoint(
                tx,
                url,
                event_types=event_types,
                description=description,
                account_id=account_id,
                rate_limit_per_second=rate_limit_per_second,
            )

    def update_endpoint(self, endpoint_id: uuid.UUID, **changes: Any) -> EndpointRecord:
        with self.uow.begin() as tx:
            return self.webhooks.update_endpoint(tx, endpoint_id, **changes)

    def delete_endpoint(self, endpoint_id: uuid.UUID) -> None:
        with self.uow.begin() as tx:
            self.webhooks.delete_endpoint(tx, endpoint_id)

    def rotate_secret(self, endpoint_id: uuid.UUID) -> tuple[str, datetime]:
        """A new secret (shown once) and until when the old one still signs."""
        with self.uow.begin() as tx:
            secret = self.webhooks.rotate_secret(tx, endpoint_id)
            rotated = self.webhooks.get_endpoint(endpoint_id, tx.conn)
        return secret, rotated.updated_at + timedelta(milliseconds=self.webhooks.rotation_grace_ms)

    def send_test(self, endpoint_id: uuid.UUID) -> uuid.UUID:
        """A ``webhook.test`` event to this endpoint only; returns its delivery's id."""
        with self.uow.begin() as tx:
            return self.webhooks.send_test(tx, endpoint_id)

    # -- replays ---------------------------------------------------------------------

    def replay(self, delivery_id: uuid.UUID) -> DeliveryRecord:
        """A dead or delivered message again: same ``webhook-id``, a new series of attempts; returns
        the delivery as the replay left it."""
        with self.uow.begin() as tx:
            return self.webhooks.replay(tx, delivery_id)

    def start_replay_since(self, endpoint_id: uuid.UUID, since: datetime | None) -> Accepted:
        """Queue the job that replays the endpoint's dead deliveries since ``since`` (all when None).

        A disabled endpoint is refused now (ENDPOINT_DISABLED, as a single replay is): its job
        would replay nothing, since a replay takes only an enabled endpoint's deliveries.
        """
        with self.uow.begin() as tx:
            endpoint = self.webhooks.get_endpoint(endpoint_id, tx.conn)
            if not endpoint.enabled:
                raise Conflict(
                    f"webhook endpoint {endpoint_id} is disabled: enable it first",
                    field="enabled",
                    code="ENDPOINT_DISABLED",
                )
            return self.webhooks.start_replay_since(tx, endpoint_id, since)

    def replay_dead(
        self, endpoint_id: uuid.UUID, since: datetime | None, *, between_batches: Callable[[], None]
    ) -> int:
        """Every dead delivery of the endpoint since ``since``, in batches, each a new series (the job body)."""
        replayed = 0
        while True:
            with self.uow.begin() as tx:
                n = self.webhooks.replay_dead_batch(tx, endpoint_id, since)
            if not n:
                return replayed
            replayed += n
            between_batches()

    # -- one run of a webhook.deliver job ----------------------------------------------

    def deliver(
        self, job_id: uuid.UUID, endpoint_id: str, *, run: int, attempt: int, max_attempts: int,
        ensure_held: Callable[[], None],
    ) -> dict[str, Any]:  # fmt: skip
        """One attempt of each undelivered delivery of the job, in one slot of its endpoint."""
        slot = Slot(
            self.slots,
            endpoint_id,
            f"{job_id}:{run}",
            limit=self.max_per_endpoint,
            timeout_ms=self.timeout_ms,
        )
        slot.take()
        try:
            with self.uow.begin() as tx:
                begun = self.webhooks.begin_run(tx, job_id)
            if isinstance(begun, str):
                return {"sent": 0, "reason": begun}
            last = attempt >= min(max_attempts, self.attempts)
            return self._send(begun, slot, attempt=attempt, last=last, ensure_held=ensure_held)
        finally:
            slot.release()

    def _end(self, run: Run, answered: list[tuple[Attempt, Answer, str]], **kwargs: Any) -> bool:
        """Record the run; True if its failures disabled the endpoint (``failing``)."""
        with self.uow.begin() as tx:
            stopped = self.webhooks.end_run(tx, run, answered, **kwargs)
            disabled = None
            if answered and not kwargs.get("gone"):
                ok = any(status == "delivered" for _, _, status in answered)
                disabled = self.webhooks.note_health(tx, run.endpoint_id, ok=ok)
                if disabled is not None:
                    self._disabled_as_failing(tx, disabled)
        for _, answer, status in answered:
            metrics.WEBHOOK_ATTEMPTS.labels(outcome=attempt_outcome(answer, status)).inc()
        # The run's own dead attempts, and the waiting deliveries a 410 stopped with them.
        metrics.WEBHOOK_DEAD.inc(sum(status == "dead" for _, _, status in answered) + stopped)
        return disabled is not None

    def _disabled_as_failing(self, tx: Tx, endpoint: EndpointRecord) -> None:
        """Tell the other endpoints (it is disabled already, so the outbox skips it) and the staff."""
        where, since = origin(endpoint.url), endpoint.failing_since
        tx.publish(
            Event(
                "webhook.endpoint.disabled",
                {
                    "endpointId": str(endpoint.id),
                    "accountId": str(endpoint.account_id) if endpoint.account_id else None,
                    "url": where,
                    "reason": FAILING,
                    "failingSince": since.isoformat() if since else None,
                    "disabledAt": endpoint.disabled_at.isoformat() if endpoint.disabled_at else None,
                },
            )
        )
        self.notifications.notify_staff(
            tx,
            kind="webhook.endpoint.disabled",
            title=f"Webhook wyłączony: {where}",
            body=(
                f"Endpoint {endpoint.id} ({where}) nie przyjął żadnej dostawy od {since:%Y-%m-%d %H:%M} UTC "
                "i został wyłączony (failing). Po naprawie włącz go ponownie i odtwórz martwe dostawy."
            ),
            link=ENDPOINTS_PAGE,
        )

    def _attempt(self, url: httpx.URL, attempt: Attempt, headers: dict[str, str]) -> Answer:
        """One POST of a delivery; with traces on, a span (the receiver's host only, as in the logs)."""
        what = {
            "gatehouse.delivery.id": str(attempt.delivery_id),
            "gatehouse.delivery.attempt": attempt.number,
        }
        with traces.span("webhook attempt", {**what, "server.address": url.host}):
            answer = sender.post(self.transport(), url, attempt.body, headers, self.timeout_ms / 1000)
            traces.note(
                {"http.response.status_code": answer.status_code, "retry_after_ms": answer.retry_after_ms},
                error=None if answer.ok else answer.error or f"HTTP {answer.status_code}",
            )
        return answer

    def _send(
        self, run: Run, slot: Slot, *, attempt: int, last: bool, ensure_held: Callable[[], None]
    ) -> dict[str, Any]:
        failed = "dead" if last else "failed"
        try:
            self.webhooks.check_url(run.url)
        except ValidationFailed as exc:
            refused = [(a, Answer(None, 0, error=f"refused: {exc}"), failed) for a in run.attempts]
            if self._end(run, refused):
                raise PermanentJobError("the endpoint is failing: disabled", code=ENDPOINT_FAILING) from None
            raise DeliveryFailed(f"the endpoint's URL is refused: {exc}") from None
        answered: list[tuple[Attempt, Answer, str]] = []
        left = list(run.attempts)
        gone = paced = None
        disabled = False
        try:
            # What every attempt of the batch shares, prepared once: the URL parsed, the secrets decoded.
            url, signer = httpx.URL(run.url), signing.Signer(run.secrets)
            while left and gone is None:
                ensure_held()
                slot.keep()
                if run.rate_limit_per_second and (
                    paced := self.slots.pace(str(run.endpoint_id), run.rate_limit_per_second)
                ):
                    break  # the rest wait for the endpoint's pace, unsent: no attempt spent
                current = left[0]
                headers = signer.sign(current.message_id, datetime.now(UTC), current.body)
                with logs.bound(delivery_id=current.delivery_id):
                    answer = self._attempt(url, current, headers)
                left.pop(0)
                if answer.ok:
                    answered.append((current, answer, "delivered"))
                elif answer.status_code == 410:
                    answered.append((current, answer, "dead"))
                    gone = GONE
                else:
                    answered.append((current, answer, failed))
        finally:  # what was sent is recorded even when the run stops early (a lost lease or slot)
            disabled = self._end(run, answered, unsent=left, gone=gone)
        failures = [answer for _, answer, status in answered if status != "delivered"]
        # One line per run (httpx's own line per request is off in workers: gatehouse_worker.wiring);
        # the URL as scheme and host: a receiver may put a token in its path or query.
        log.info(
            "job %s: %d of %d deliveries to %s delivered%s",
            run.job_id, len(answered) - len(failures), len(run.attempts), origin(run.url),
            ", endpoint gone" if gone else "",
        )  # fmt: skip
        if gone:
            raise PermanentJobError(f"{GONE}: disabled", code="endpoint-gone")
        if disabled:
            raise PermanentJobError("the endpoint is failing: disabled", code=ENDPOINT_FAILING)
        if paced and not failures:
            raise JobPaused(
                "the endpoint's rate limit is reached",
                resume_at_ms=current_millis() + paced,
                phase=P.WAITING_ENDPOINT,
                reason="endpoint-rate-limited",
            )
        if not failures:
            return {"sent": len(answered), "delivered": len(answered), "attempt": attempt}
        what = f"{len(failures)} of {len(answered)} attempts failed, the first: " + (
            failures[0].error or f"HTTP {failures[0].status_code}"
        )
        waits = [a.retry_after_ms for a in failures if a.retry_after_ms is not None]
        if waits:
            raise RetryLater(f"{what}; Retry-After", after_ms=max(waits))
        raise DeliveryFailed(what)


def attempt_outcome(answer: Answer, status: str) -> str:
    """gatehouse_webhook_attempts_total's label of one attempt."""
    if status == "delivered":
        return "delivered"
    if answer.status_code == 410:
        return "gone"
    return "error" if answer.error is not None else "failed"
