"""Webhook deliveries: one attempt per run of a ``webhook.deliver`` job; the job runtime retries.

An attempt takes a slot of its endpoint (none free: it waits, no attempt
spent), numbers itself on the delivery, checks the URL again (SSRF rules, the
allowlist of now), signs and POSTs, and records what came back. A failure
raises, so the runtime schedules the next attempt on WEBHOOK_RETRY_SCHEDULE_MS;
``Retry-After`` on a 429/503 pushes it later; 410 Gone disables the endpoint.
The delivery is ``failed`` while attempts are left and ``dead`` after the last.
"""

from __future__ import annotations

import threading
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
from gatehouse.webhooks.store import Answer
from gatehouse_worker.runtime import JobContext, job

# An attempt that found every slot of its endpoint taken looks again after this long.
SLOT_WAIT_MS = 1_000
SLOT_MARGIN_MS = 30_000  # a slot outlives its request by this much, then frees itself

_client: httpx.Client | None = None
_client_lock = threading.Lock()


def http() -> httpx.Client:
    """This process's one client (made after the fork, on first use)."""
    global _client
    with _client_lock:
        if _client is None:
            _client = sender.client()
        return _client


class DeliveryFailed(Exception):
    code = "delivery-failed"


@job(WEBHOOK_DELIVER)
def deliver(ctx: JobContext) -> dict[str, Any]:
    gh, settings = ctx.gatehouse, ctx.gatehouse.settings
    delivery_id = uuid.UUID(ctx.payload["deliveryId"])
    # The endpoint is in the payload (its slot is taken before the delivery is touched).
    endpoint_id = uuid.UUID(ctx.payload["endpointId"])
    holder = f"{ctx.job.id}:{ctx.claim.claims}"
    lease_ms = settings.webhook_timeout_ms + SLOT_MARGIN_MS
    if not gh.webhook_slots.acquire(
        str(endpoint_id), holder, limit=settings.webhook_max_per_endpoint, lease_ms=lease_ms
    ):
        raise JobPaused(
            "every slot of the endpoint is taken",
            resume_at_ms=current_millis() + SLOT_WAIT_MS,
            phase=P.WAITING_ENDPOINT,
            reason="endpoint-busy",
        )
    try:
        return _attempt(ctx, delivery_id)
    finally:
        gh.webhook_slots.release(str(endpoint_id), holder)


def _attempt(ctx: JobContext, delivery_id: uuid.UUID) -> dict[str, Any]:
    gh, settings = ctx.gatehouse, ctx.gatehouse.settings
    store = gh.webhooks
    attempt = store.begin_attempt(delivery_id, ctx.job.id)
    if isinstance(attempt, str):
        return {"sent": False, "reason": attempt}
    last = ctx.job.attempt >= min(ctx.job.max_attempts, WEBHOOK_DELIVER.policy(settings).attempts)
    failed = "dead" if last else "failed"
    try:
        store.check_url(attempt.url)
    except ValidationFailed as exc:
        store.end_attempt(attempt, Answer(None, 0, error=f"refused: {exc}"), status=failed)
        raise DeliveryFailed(f"the endpoint's URL is refused: {exc}") from None
    ctx.ensure_held()
    headers = signing.sign(attempt.message_id, datetime.now(UTC), attempt.body, attempt.secrets)
    answer = sender.post(http(), attempt, headers, settings.webhook_timeout_ms / 1000)
    if answer.ok:
        store.end_attempt(attempt, answer, status="delivered")
        return {"sent": True, "attempt": attempt.number, "statusCode": answer.status_code}
    if answer.status_code == 410:
        store.end_attempt(attempt, answer, status="dead", gone="the endpoint answered 410 Gone")
        raise PermanentJobError("the endpoint answered 410 Gone: disabled", code="endpoint-gone")
    store.end_attempt(attempt, answer, status=failed)
    what = answer.error or f"HTTP {answer.status_code}"
    if answer.retry_after_ms is not None:
        raise RetryLater(f"the endpoint answered {what}, Retry-After", after_ms=answer.retry_after_ms)
    raise DeliveryFailed(f"attempt {attempt.number} failed: {what}")


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
