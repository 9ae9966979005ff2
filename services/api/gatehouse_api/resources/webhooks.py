"""Webhooks admin (the view Webhooks → Deliveries): endpoints, their deliveries with attempts, replays."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import datetime, timedelta

import falcon

from gatehouse.composition import Gatehouse
from gatehouse.paging import instant
from gatehouse.webhooks.store import EVENT_TYPES
from gatehouse.webhooks.tables import STATUSES, AttemptRecord, DeliveryRecord, EndpointRecord
from gatehouse_api.auth import require_admin
from gatehouse_api.body import read_json
from gatehouse_api.openapi import contract, page_params, query
from gatehouse_api.paging import choice, decode_cursor, encode_cursor, page_limit, uuid_param
from gatehouse_api.schemas import (
    AttemptView,
    CreateEndpoint,
    DeliveryCountList,
    DeliveryCounts,
    DeliveryDetail,
    DeliveryPage,
    DeliveryView,
    EndpointCreated,
    EndpointList,
    EndpointView,
    PatchEndpoint,
    ReplayQueued,
    SecretRotated,
    TestSent,
)


def endpoint_view(e: EndpointRecord) -> dict:
    return EndpointView(
        endpointId=e.id,
        url=e.url,
        description=e.description,
        eventTypes=e.event_types,
        enabled=e.enabled,
        disabledReason=e.disabled_reason,
        createdAt=e.created_at,
        updatedAt=e.updated_at,
    ).model_dump(mode="json")


def delivery_fields(d: DeliveryRecord) -> dict:
    return dict(
        deliveryId=d.id,
        webhookId=d.message_id,
        endpointId=d.endpoint_id,
        eventType=d.event_type,
        status=d.status,
        attemptCount=d.attempts,
        nextAttemptAt=d.next_attempt_at,
        createdAt=d.created_at,
        deliveredAt=d.delivered_at,
        jobId=d.job_id,
    )


def attempt_view(a: AttemptRecord) -> AttemptView:
    return AttemptView(
        attempt=a.attempt,
        at=a.at,
        statusCode=a.status_code,
        error=a.error,
        durationMs=a.duration_ms,
        responseBody=a.response_excerpt,
    )


def endpoint_list(gh: Gatehouse) -> dict:
    return EndpointList(items=[endpoint_view(e) for e in gh.webhooks.list_endpoints()]).model_dump(
        mode="json"
    )


def delivery_counts(gh: Gatehouse) -> dict:
    """Every endpoint's deliveries by status (one grouped query)."""
    return DeliveryCountList(
        items=[DeliveryCounts(endpointId=e, **counts) for e, counts in gh.webhooks.delivery_counts().items()]
    ).model_dump(mode="json")


def delivery_page(gh: Gatehouse, param: Callable[[str], str | None], *, limit: int) -> dict:
    """A page of deliveries, newest first, filtered by ``param``'s endpointId, status, eventType, since, cursor."""
    endpoint = param("endpointId")
    endpoint_id = uuid_param(endpoint, "endpointId")
    cursor = param("cursor")
    found = gh.webhooks.list_deliveries(
        endpoint_id=endpoint_id,
        status=choice(param("status"), "status", STATUSES),
        event_type=choice(param("eventType"), "eventType", EVENT_TYPES),
        since=instant(param("since"), "since"),
        limit=limit + 1,
        before=decode_cursor(cursor) if cursor else None,
    )
    page, more = found[:limit], len(found) > limit
    return DeliveryPage(
        items=[DeliveryView(**delivery_fields(d)) for d in page],
        nextCursor=encode_cursor(page[-1]) if more else None,
    ).model_dump(mode="json")


def delivery_detail(gh: Gatehouse, delivery_id: uuid.UUID) -> dict:
    delivery, attempts = gh.webhooks.get_delivery(delivery_id)
    return DeliveryDetail(
        **delivery_fields(delivery),
        payload=delivery.payload,
        attempts=[attempt_view(a) for a in attempts],
    ).model_dump(mode="json")


def rotate_secret(gh: Gatehouse, endpoint_id: uuid.UUID) -> dict:
    """A new secret (shown once, in this answer only) and until when the old one still signs."""
    secret = gh.webhooks.rotate_secret(endpoint_id)
    endpoint = gh.webhooks.get_endpoint(endpoint_id)
    grace = timedelta(milliseconds=gh.settings.webhook_rotation_grace_ms)
    return SecretRotated(secret=secret, previousSecretValidUntil=endpoint.updated_at + grace).model_dump(
        mode="json"
    )


def send_test(gh: Gatehouse, endpoint_id: uuid.UUID) -> dict:
    delivery_id, sent = gh.webhooks.send_test(endpoint_id)
    gh.events.send(sent)
    return TestSent(deliveryId=delivery_id).model_dump(mode="json")


def replay_since(gh: Gatehouse, endpoint_id: uuid.UUID, since: datetime | None) -> dict:
    job, sent = gh.webhooks.start_replay_since(endpoint_id, since)
    gh.events.send(sent)
    return ReplayQueued(jobId=job.id, endpointId=endpoint_id, since=since).model_dump(mode="json")


def replay_delivery(gh: Gatehouse, delivery_id: uuid.UUID) -> dict:
    gh.events.send(gh.webhooks.replay(delivery_id))
    delivery, _ = gh.webhooks.get_delivery(delivery_id)
    return DeliveryView(**delivery_fields(delivery)).model_dump(mode="json")


class _Resource:
    def __init__(self, gh: Gatehouse) -> None:
        self.gh = gh

    def max_bytes(self) -> int:
        return self.gh.settings.max_body_bytes


class Endpoints(_Resource):
    @contract(
        "Add an endpoint; its whsec_ secret is shown only in this answer",
        (201, EndpointCreated, "created"),
        (400, 401, 403, 413, 415, 422),
        body=(CreateEndpoint, True),
    )
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        require_admin(req)
        body = read_json(req, CreateEndpoint, max_bytes=self.max_bytes())
        created = self.gh.webhooks.create_endpoint(
            body.url, event_types=body.eventTypes, description=body.description
        )
        resp.status = 201
        resp.location = f"/v1/admin/webhooks/endpoints/{created.endpoint.id}"
        resp.media = EndpointCreated(**endpoint_view(created.endpoint), secret=created.secret).model_dump(
            mode="json"
        )

    @contract("List endpoints", (200, EndpointList, "every endpoint"), (401, 403))
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        require_admin(req)
        resp.media = endpoint_list(self.gh)


class DeliveryCountsByEndpoint(_Resource):
    @contract(
        "Count each endpoint's deliveries by status",
        (200, DeliveryCountList, "one entry per endpoint, every status (zeros too)"),
        (401, 403),
    )
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        require_admin(req)
        resp.media = delivery_counts(self.gh)


class Endpoint(_Resource):
    @contract("Read an endpoint", (200, EndpointView, "the endpoint"), (401, 403, 404))
    def on_get(self, req: falcon.Request, resp: falcon.Response, endpoint_id: uuid.UUID) -> None:
        require_admin(req)
        resp.media = endpoint_view(self.gh.webhooks.get_endpoint(endpoint_id))

    @contract(
        "Edit an endpoint (url, eventTypes, enabled, description)",
        (200, EndpointView, "the endpoint as changed"),
        (400, 401, 403, 404, 413, 415, 422),
        body=(PatchEndpoint, True),
    )
    def on_patch(self, req: falcon.Request, resp: falcon.Response, endpoint_id: uuid.UUID) -> None:
        require_admin(req)
        body = read_json(req, PatchEndpoint, max_bytes=self.max_bytes())
        given = body.model_fields_set
        resp.media = endpoint_view(
            self.gh.webhooks.update_endpoint(
                endpoint_id,
                url=body.url,
                event_types=body.eventTypes,
                all_event_types="eventTypes" in given and body.eventTypes is None,
                enabled=body.enabled,
                description=body.description,
            )
        )

    @contract("Delete an endpoint and its deliveries", (204, None, "deleted"), (401, 403, 404))
    def on_delete(self, req: falcon.Request, resp: falcon.Response, endpoint_id: uuid.UUID) -> None:
        require_admin(req)
        self.gh.webhooks.delete_endpoint(endpoint_id)
        resp.status = 204


class RotateSecret(_Resource):
    @contract(
        "Issue a new secret; the old one also signs for WEBHOOK_ROTATION_GRACE_MS",
        (200, SecretRotated, "the new secret, shown once"),
        (401, 403, 404),
    )
    def on_post(self, req: falcon.Request, resp: falcon.Response, endpoint_id: uuid.UUID) -> None:
        require_admin(req)
        resp.media = rotate_secret(self.gh, endpoint_id)


class SendTest(_Resource):
    @contract("Send a webhook.test event to this endpoint", (202, TestSent, "queued"), (401, 403, 404, 409))
    def on_post(self, req: falcon.Request, resp: falcon.Response, endpoint_id: uuid.UUID) -> None:
        require_admin(req)
        sent = send_test(self.gh, endpoint_id)
        resp.status = 202
        resp.location = f"/v1/admin/webhooks/deliveries/{sent['deliveryId']}"
        resp.media = sent


class ReplayEndpoint(_Resource):
    """Replay every dead delivery of the endpoint (since ``since``): one queued job does it."""

    @contract(
        "Replay the endpoint's dead deliveries (since a time): one queued job",
        (202, ReplayQueued, "queued"),
        (401, 403, 404, 422),
        params=[query("since", format="date-time")],
    )
    def on_post(self, req: falcon.Request, resp: falcon.Response, endpoint_id: uuid.UUID) -> None:
        require_admin(req)
        queued = replay_since(self.gh, endpoint_id, instant(req.get_param("since"), "since"))
        resp.status = 202
        resp.location = f"/v1/jobs/{queued['jobId']}"
        resp.media = queued


class Deliveries(_Resource):
    @contract(
        "List deliveries, newest first",
        (200, DeliveryPage, "a page of deliveries"),
        (401, 403, 422),
        params=page_params(
            query("endpointId", format="uuid"),
            query("status", enum=list(STATUSES)),
            query("eventType", enum=list(EVENT_TYPES)),
            query("since", format="date-time"),
        ),
    )
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        require_admin(req)
        resp.media = delivery_page(self.gh, req.get_param, limit=page_limit(req.get_param("limit")))


class Delivery(_Resource):
    @contract("Read a delivery with its attempts", (200, DeliveryDetail, "the delivery"), (401, 403, 404))
    def on_get(self, req: falcon.Request, resp: falcon.Response, delivery_id: uuid.UUID) -> None:
        require_admin(req)
        resp.media = delivery_detail(self.gh, delivery_id)


class ReplayDelivery(_Resource):
    @contract(
        "Re-send a dead or delivered message (same webhook-id, new series of attempts)",
        (202, DeliveryView, "queued"),
        (401, 403, 404, 409),
    )
    def on_post(self, req: falcon.Request, resp: falcon.Response, delivery_id: uuid.UUID) -> None:
        require_admin(req)
        replayed = replay_delivery(self.gh, delivery_id)
        resp.status = 202
        resp.location = f"/v1/admin/webhooks/deliveries/{delivery_id}"
        resp.media = replayed
