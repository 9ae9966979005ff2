"""Webhooks admin (the view Webhooks → Deliveries): endpoints, their deliveries with attempts, replays."""

from __future__ import annotations

import uuid
from datetime import timedelta

import falcon

from gatehouse.composition import Gatehouse
from gatehouse.errors import ValidationFailed
from gatehouse.webhooks.store import EVENT_TYPES, decode_since
from gatehouse.webhooks.tables import STATUSES, AttemptRecord, DeliveryRecord, EndpointRecord
from gatehouse_api.auth import require_admin
from gatehouse_api.body import read_json
from gatehouse_api.paging import choice, decode_cursor, encode_cursor, page_limit
from gatehouse_api.schemas import (
    AttemptView,
    CreateEndpoint,
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


class _Resource:
    def __init__(self, gh: Gatehouse) -> None:
        self.gh = gh

    def max_bytes(self) -> int:
        return self.gh.settings.max_body_bytes


class Endpoints(_Resource):
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

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        require_admin(req)
        resp.media = EndpointList(
            items=[endpoint_view(e) for e in self.gh.webhooks.list_endpoints()]
        ).model_dump(mode="json")


class Endpoint(_Resource):
    def on_get(self, req: falcon.Request, resp: falcon.Response, endpoint_id: uuid.UUID) -> None:
        require_admin(req)
        resp.media = endpoint_view(self.gh.webhooks.get_endpoint(endpoint_id))

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

    def on_delete(self, req: falcon.Request, resp: falcon.Response, endpoint_id: uuid.UUID) -> None:
        require_admin(req)
        self.gh.webhooks.delete_endpoint(endpoint_id)
        resp.status = 204


class RotateSecret(_Resource):
    def on_post(self, req: falcon.Request, resp: falcon.Response, endpoint_id: uuid.UUID) -> None:
        require_admin(req)
        secret = self.gh.webhooks.rotate_secret(endpoint_id)
        endpoint = self.gh.webhooks.get_endpoint(endpoint_id)
        grace = timedelta(milliseconds=self.gh.settings.webhook_rotation_grace_ms)
        resp.media = SecretRotated(
            secret=secret, previousSecretValidUntil=endpoint.updated_at + grace
        ).model_dump(mode="json")


class SendTest(_Resource):
    def on_post(self, req: falcon.Request, resp: falcon.Response, endpoint_id: uuid.UUID) -> None:
        require_admin(req)
        delivery_id, sent = self.gh.webhooks.send_test(endpoint_id)
        self.gh.events.send(sent)
        resp.status = 202
        resp.location = f"/v1/admin/webhooks/deliveries/{delivery_id}"
        resp.media = TestSent(deliveryId=delivery_id).model_dump(mode="json")


class ReplayEndpoint(_Resource):
    """Replay every dead delivery of the endpoint (since ``since``): one queued job does it."""

    def on_post(self, req: falcon.Request, resp: falcon.Response, endpoint_id: uuid.UUID) -> None:
        require_admin(req)
        since = decode_since(req.get_param("since"))
        job, sent = self.gh.webhooks.start_replay_since(endpoint_id, since)
        self.gh.events.send(sent)
        resp.status = 202
        resp.location = f"/v1/jobs/{job.id}"
        resp.media = ReplayQueued(jobId=job.id, endpointId=endpoint_id, since=since).model_dump(mode="json")


class Deliveries(_Resource):
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        require_admin(req)
        endpoint = req.get_param("endpointId")
        try:
            endpoint_id = uuid.UUID(endpoint) if endpoint is not None else None
        except ValueError:
            raise ValidationFailed("endpointId must be a UUID", field="endpointId") from None
        limit = page_limit(req.get_param("limit"))
        cursor = req.get_param("cursor")
        found = self.gh.webhooks.list_deliveries(
            endpoint_id=endpoint_id,
            status=choice(req.get_param("status"), "status", STATUSES),
            event_type=choice(req.get_param("eventType"), "eventType", EVENT_TYPES),
            since=decode_since(req.get_param("since")),
            limit=limit + 1,
            before=decode_cursor(cursor) if cursor else None,
        )
        page, more = found[:limit], len(found) > limit
        resp.media = DeliveryPage(
            items=[DeliveryView(**delivery_fields(d)) for d in page],
            nextCursor=encode_cursor(page[-1]) if more else None,
        ).model_dump(mode="json")


class Delivery(_Resource):
    def on_get(self, req: falcon.Request, resp: falcon.Response, delivery_id: uuid.UUID) -> None:
        require_admin(req)
        delivery, attempts = self.gh.webhooks.get_delivery(delivery_id)
        resp.media = DeliveryDetail(
            **delivery_fields(delivery),
            payload=delivery.payload,
            attempts=[attempt_view(a) for a in attempts],
        ).model_dump(mode="json")


class ReplayDelivery(_Resource):
    def on_post(self, req: falcon.Request, resp: falcon.Response, delivery_id: uuid.UUID) -> None:
        require_admin(req)
        self.gh.events.send(self.gh.webhooks.replay(delivery_id))
        resp.status = 202
        resp.location = f"/v1/admin/webhooks/deliveries/{delivery_id}"
        delivery, _ = self.gh.webhooks.get_delivery(delivery_id)
        resp.media = DeliveryView(**delivery_fields(delivery)).model_dump(mode="json")
