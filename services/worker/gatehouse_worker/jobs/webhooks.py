"""Webhook deliveries: a run of a ``webhook.deliver`` job makes one attempt of each of its deliveries
(gatehouse.webhooks.handlers); ``webhook.replay`` replays an endpoint's dead deliveries."""

from __future__ import annotations

import uuid
from typing import Any

from gatehouse.job_types import WEBHOOK_DELIVER, WEBHOOK_REPLAY
from gatehouse.paging import instant
from gatehouse.webhooks.handlers import WebhookHandlers
from gatehouse_worker.runtime import JobContext, job


@job(WEBHOOK_DELIVER)
def deliver(ctx: JobContext, webhooks: WebhookHandlers) -> dict[str, Any]:
    # The endpoint is in the payload (its slot is taken before the deliveries are touched).
    return webhooks.deliver(
        ctx.job.id,
        ctx.payload["endpointId"],
        run=ctx.claim.claims,
        attempt=ctx.job.attempt,
        max_attempts=ctx.job.max_attempts,
        ensure_held=ctx.ensure_held,
    )


@job(WEBHOOK_REPLAY)
def replay_dead(ctx: JobContext, webhooks: WebhookHandlers) -> dict[str, Any]:
    """Replay every dead delivery of an endpoint since a time, in batches; each is a new series."""
    since = instant(ctx.payload.get("since"), "since")
    endpoint_id = uuid.UUID(ctx.payload["endpointId"])
    return {"replayed": webhooks.replay_dead(endpoint_id, since, between_batches=ctx.ensure_held)}
