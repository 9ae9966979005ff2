"""Webhooks admin (the view Webhooks → Deliveries): endpoints, their deliveries with attempts, replays."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import datetime

import falcon

from gatehouse.paging import instant
from gatehouse.webhooks.handlers import WebhookHandlers
from gatehouse.webhooks.store import EVENT_TYPES, WebhookStore
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
        deadReason=d.dead_reason,
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


class WebhookViews:
    """Endpoints and deliveries as the API and the console show them (the read side of gatehouse.webhooks)."""

    def __init__(self, webhooks: WebhookStore) -> None:
        self.webhooks = webhooks

    def endpoint(self, endpoint_id: uuid.UUID) -> dict:
        return endpoint_view(self.webhooks.get_endpoint(endpoint_id))

    def endpoints(self) -> dict:
        return EndpointList(items=[endpoint_view(e) for e in self.webhooks.list_endpoints()]).model_dump(
            mode="json"
        )

    def counts(self) -> dict:
        """Every endpoint's deliveries by status (one grouped query)."""
        return DeliveryCountList(
            items=[DeliveryCounts(endpointId=e, **c) for e, c in self.webhooks.delivery_counts().items()]
        ).model_dump(mode="json")

    def deliveries(self, param: Callable[[str], str | None], *, limit: int) -> dict:
        """A page of deliveries, newest first, filtered by ``param``'s endpointId, status, eventType, since, cursor."""
        cursor = param("cursor")
        found = self.webhooks.list_deliveries(
            endpoint_id=uuid_param(param("endpointId"), "endpointId"),
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

    def delivery(self, delivery_id: uuid.UUID) -> dict:
        delivery, attempts = self.webhooks.get_delivery(delivery_id)
        return DeliveryDetail(
            **delivery_fields(delivery),
            payload=delivery.payload,
            attempts=[attempt_view(a) for a in attempts],
        ).model_dump(mode="json")


class WebhookActions:
    """The actions the API and the console both offer, answered as the API answers them."""

    def __init__(self, handlers: WebhookHandlers) -> None:
        self.handlers = handlers

    def rotate_secret(self, endpoint_id: uuid.UUID) -> dict:
        """A new secret (shown once, in this answer only) and until when the old one still signs."""
        secret, until = self.handlers.rotate_secret(endpoint_id)
        return SecretRotated(secret=secret, previousSecretValidUntil=until).model_dump(mode="json")

    def send_test(self, endpoint_id: uuid.UUID) -> dict:
        return TestSent(deliveryId=self.handlers.send_test(endpoint_id)).model_dump(mode="json")

    def replay_since(self, endpoint_id: uuid.UUID, since: datetime | None) -> dict:
        job = self.handlers.start_replay_since(endpoint_id, since)
        return ReplayQueued(jobId=job.id, endpointId=endpoint_id, since=since).model_dump(mode="json")

    def replay_delivery(self, delivery_id: uuid.UUID) -> dict:
        """The delivery as the replay left it (its job may deliver it before the answer is sent)."""
        return DeliveryView(**delivery_fields(self.handlers.replay(delivery_id))).model_dump(mode="json")

    def set_enabled(self, endpoint_id: uuid.UUID, enabled: bool) -> None:
        self.handlers.update_endpoint(endpoint_id, enabled=enabled)


class _Resource:
    def __init__(self, views: WebhookViews, actions: WebhookActions, *, max_body_bytes: int) -> None:
        self.views, self.actions, self.max_body_bytes = views, actions, max_body_bytes


class Endpoints(_Resource):
    @contract(
        "Add an endpoint; its whsec_ secret is shown only in this answer",
        (201, EndpointCreated, "created"),
        (400, 401, 403, 413, 415, 422),
        body=(CreateEndpoint, True),
    )
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        require_admin(req)
        body = read_json(req, CreateEndpoint, max_bytes=self.max_body_bytes)
        created = self.actions.handlers.create_endpoint(
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
        resp.media = self.views.endpoints()


class DeliveryCountsByEndpoint(_Resource):
    @contract(
        "Count each endpoint's deliveries by status",
        (200, DeliveryCountList, "one entry per endpoint, every status (zeros too)"),
        (401, 403),
    )
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        require_admin(req)
        resp.media = self.views.counts()


class Endpoint(_Resource):
    @contract("Read an endpoint", (200, EndpointView, "the endpoint"), (401, 403, 404))
    def on_get(self, req: falcon.Request, resp: falcon.Response, endpoint_id: uuid.UUID) -> None:
        require_admin(req)
        resp.media = self.views.endpoint(endpoint_id)

    @contract(
        "Edit an endpoint (url, eventTypes, enabled, description)",
        (200, EndpointView, "the endpoint as changed"),
        (400, 401, 403, 404, 413, 415, 422),
        body=(PatchEndpoint, True),
    )
    def on_patch(self, req: falcon.Request, resp: falcon.Response, endpoint_id: uuid.UUID) -> None:
        require_admin(req)
        body = read_json(req, PatchEndpoint, max_bytes=self.max_body_bytes)
        given = body.model_fields_set
        resp.media = endpoint_view(
            self.actions.handlers.update_endpoint(
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
        self.actions.handlers.delete_endpoint(endpoint_id)
        resp.status = 204


class RotateSecret(_Resource):
    @contract(
        "Issue a new secret; the old one also signs for WEBHOOK_ROTATION_GRACE_MS",
        (200, SecretRotated, "the new secret, shown once"),
        (401, 403, 404),
    )
    def on_post(self, req: falcon.Request, resp: falcon.Response, endpoint_id: uuid.UUID) -> None:
        require_admin(req)
        resp.media = self.actions.rotate_secret(endpoint_id)


class SendTest(_Resource):
    @contract("Send a webhook.test event to this endpoint", (202, TestSent, "queued"), (401, 403, 404, 409))
    def on_post(self, req: falcon.Request, resp: falcon.Response, endpoint_id: uuid.UUID) -> None:
        require_admin(req)
        sent = self.actions.send_test(endpoint_id)
        resp.status = 202
        resp.location = f"/v1/admin/webhooks/deliveries/{sent['deliveryId']}"
        resp.media = sent


class ReplayEndpoint(_Resource):
    """Replay every dead delivery of the endpoint (since ``since``): one queued job does it.

    A disabled endpoint answers 409 ENDPOINT_DISABLED, as a single delivery's replay does.
    """

    @contract(
        "Replay the endpoint's dead deliveries (since a time): one queued job",
        (202, ReplayQueued, "queued"),
        (401, 403, 404, 409, 422),
        notes={409: "ENDPOINT_DISABLED: the endpoint is disabled (enable it first)"},
        params=[query("since", format="date-time")],
    )
    def on_post(self, req: falcon.Request, resp: falcon.Response, endpoint_id: uuid.UUID) -> None:
        require_admin(req)
        queued = self.actions.replay_since(endpoint_id, instant(req.get_param("since"), "since"))
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
        resp.media = self.views.deliveries(req.get_param, limit=page_limit(req.get_param("limit")))


class Delivery(_Resource):
    @contract("Read a delivery with its attempts", (200, DeliveryDetail, "the delivery"), (401, 403, 404))
    def on_get(self, req: falcon.Request, resp: falcon.Response, delivery_id: uuid.UUID) -> None:
        require_admin(req)
        resp.media = self.views.delivery(delivery_id)


class ReplayDelivery(_Resource):
    @contract(
        "Re-send a dead or delivered message (same webhook-id, new series of attempts)",
        (202, DeliveryView, "queued"),
        (401, 403, 404, 409),
    )
    def on_post(self, req: falcon.Request, resp: falcon.Response, delivery_id: uuid.UUID) -> None:
        require_admin(req)
        replayed = self.actions.replay_delivery(delivery_id)
        resp.status = 202
        resp.location = f"/v1/admin/webhooks/deliveries/{delivery_id}"
        resp.media = replayed
