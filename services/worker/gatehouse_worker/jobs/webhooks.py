"""Webhook deliveries: a run of a ``webhook.deliver`` job makes one attempt of each of its deliveries.

A job holds a batch of one endpoint's deliveries (the outbox's, at most
WEBHOOK_BATCH_SIZE). A run takes a slot of the endpoint (none free: it waits,
no attempt spent), numbers an attempt of each undelivered delivery, checks the
URL again (SSRF rules, the allowlist of now), then signs and POSTs them one
after another in that one slot, and records what came back in one
transaction. If any failed, the run raises, so the runtime schedules the next
attempt of the ones left on WEBHOOK_RETRY_SCHEDULE_MS; ``Retry-After`` on a
429/503 pushes it later; 410 Gone disables the endpoint and stops the run. A
delivery is ``failed`` while attempts are left and ``dead`` after the last.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from datetime import UTC, datetime
from typing import Any

import httpx
from dramatiq.common import current_millis

from gatehouse import progress as P
from gatehouse.errors import JobPaused, PermanentJobError, RetryLater, ValidationFailed
from gatehouse.job_types import WEBHOOK_DELIVER, WEBHOOK_REPLAY
from gatehouse.paging import instant
from gatehouse.webhooks import sender, signing
from gatehouse.webhooks.slots import EndpointSlots
from gatehouse.webhooks.store import Answer, Attempt, Run
from gatehouse_worker.runtime import JobContext, job

# An attempt that found every slot of its endpoint taken looks again after this long.
SLOT_WAIT_MS = 1_000
SLOT_MARGIN_MS = 30_000  # a slot outlives its request by this much, then frees itself
GONE = "the endpoint answered 410 Gone"
log = logging.getLogger(__name__)

_transport: httpx.HTTPTransport | None = None
_transport_lock = threading.Lock()


def http() -> httpx.HTTPTransport:
    """This process's one connection pool (made after the fork, on first use)."""
    global _transport
    with _transport_lock:
        if _transport is None:
            _transport = sender.transport()
        return _transport


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


@job(WEBHOOK_DELIVER)
def deliver(ctx: JobContext) -> dict[str, Any]:
    gh, settings = ctx.gatehouse, ctx.gatehouse.settings
    # The endpoint is in the payload (its slot is taken before the deliveries are touched).
    slot = Slot(
        gh.webhook_slots,
        ctx.payload["endpointId"],
        f"{ctx.job.id}:{ctx.claim.claims}",
        limit=settings.webhook_max_per_endpoint,
        timeout_ms=settings.webhook_timeout_ms,
    )
    slot.take()
    try:
        run = gh.webhooks.begin_run(ctx.job.id)
        if isinstance(run, str):
            return {"sent": 0, "reason": run}
        return _send(ctx, run, slot)
    finally:
        slot.release()


def _send(ctx: JobContext, run: Run, slot: Slot) -> dict[str, Any]:
    store, settings = ctx.gatehouse.webhooks, ctx.gatehouse.settings
    last = ctx.job.attempt >= min(ctx.job.max_attempts, WEBHOOK_DELIVER.policy(settings).attempts)
    failed = "dead" if last else "failed"
    try:
        store.check_url(run.url)
    except ValidationFailed as exc:
        store.end_run(run, [(a, Answer(None, 0, error=f"refused: {exc}"), failed) for a in run.attempts])
        raise DeliveryFailed(f"the endpoint's URL is refused: {exc}") from None
    answered: list[tuple[Attempt, Answer, str]] = []
    left = list(run.attempts)
    gone = None
    try:
        # What every attempt of the batch shares, prepared once: the URL parsed, the secrets decoded.
        url, signer = httpx.URL(run.url), signing.Signer(run.secrets)
        while left and gone is None:
            ctx.ensure_held()
            slot.keep()
            attempt = left[0]
            headers = signer.sign(attempt.message_id, datetime.now(UTC), attempt.body)
            answer = sender.post(http(), url, attempt.body, headers, settings.webhook_timeout_ms / 1000)
            left.pop(0)
            if answer.ok:
                answered.append((attempt, answer, "delivered"))
            elif answer.status_code == 410:
                answered.append((attempt, answer, "dead"))
                gone = GONE
            else:
                answered.append((attempt, answer, failed))
    finally:  # what was sent is recorded even when the run stops early (a lost lease or slot)
        store.end_run(run, answered, unsent=left, gone=gone)
    failures = [answer for _, answer, status in answered if status != "delivered"]
    # One line per run (httpx's own line per request is off in workers: gatehouse_worker.wiring).
    log.info(
        "job %s: %d of %d deliveries to %s delivered%s",
        ctx.job.id, len(answered) - len(failures), len(run.attempts), run.url, ", endpoint gone" if gone else "",
    )  # fmt: skip
    if gone:
        raise PermanentJobError(f"{GONE}: disabled", code="endpoint-gone")
    if not failures:
        return {"sent": len(answered), "delivered": len(answered), "attempt": ctx.job.attempt}
    what = f"{len(failures)} of {len(answered)} attempts failed, the first: " + (
        failures[0].error or f"HTTP {failures[0].status_code}"
    )
    waits = [a.retry_after_ms for a in failures if a.retry_after_ms is not None]
    if waits:
        raise RetryLater(f"{what}; Retry-After", after_ms=max(waits))
    raise DeliveryFailed(what)


@job(WEBHOOK_REPLAY)
def replay_dead(ctx: JobContext) -> dict[str, Any]:
    """Replay every dead delivery of an endpoint since a time, in batches; each is a new series."""
    gh, endpoint_id = ctx.gatehouse, uuid.UUID(ctx.payload["endpointId"])
    since = instant(ctx.payload.get("since"), "since")
    replayed = 0
    while batch := gh.webhooks.replay_dead_batch(endpoint_id, since):
        for delivery in batch:
            gh.enqueue(delivery)
        replayed += len(batch)
        ctx.ensure_held()
    return {"replayed": replayed}
