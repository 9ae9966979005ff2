"""Webhooks → Endpoints and Deliveries: endpoints with their actions, deliveries with attempts, replays.

The pages render the JSON API's views (``WebhookViews`` of gatehouse_api.resources.webhooks)
and every action is the form twin of a JSON call, through the same ``WebhookActions``:

- ``…/endpoints/{id}/enabled`` (``enabled``): PATCH /v1/admin/webhooks/endpoints/{id}
- ``…/endpoints/{id}/rotate-secret``: POST …/rotate-secret; the new secret is shown once,
  on the answer to the POST (never in a URL, a redirect or a later page)
- ``…/endpoints/{id}/test``: POST …/test
- ``…/endpoints/{id}/replay`` (``since``, optional): POST …/replay
- ``…/deliveries/{id}/replay``: POST /v1/admin/webhooks/deliveries/{id}/replay

While the webhooks module is off the pages still render (with a banner) but
offer no action, and an action posted anyway answers MODULE_DISABLED, as its
JSON twin does.
"""

from __future__ import annotations

import json
import uuid
from urllib.parse import urlencode

import falcon

from gatehouse.modules import ModuleState, ModuleStates
from gatehouse.paging import instant
from gatehouse.webhooks.store import EVENT_TYPES
from gatehouse.webhooks.tables import STATUSES
from gatehouse_api.console.web import PREFIX, Confirmed, Console, Page, back, form, query
from gatehouse_api.resources.webhooks import WebhookActions, WebhookViews

MODULE = "webhooks"
PAGE = 50
FILTERS = ("status", "endpointId", "eventType")


def _uuid(raw: str | None) -> uuid.UUID | None:
    try:
        return uuid.UUID(raw) if raw else None
    except ValueError:
        return None


class _Page(Page):
    def __init__(
        self, console: Console, views: WebhookViews, actions: WebhookActions, modules: ModuleStates
    ) -> None:
        super().__init__(console)
        self.views, self.actions, self.modules = views, actions, modules

    def module(self) -> ModuleState:
        return self.modules.state(MODULE)

    def require_module(self) -> None:
        """An action of a module that is off is refused, as its JSON twin is (MODULE_DISABLED)."""
        self.modules.require(MODULE, fresh=True)


class Endpoints(_Page):
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        counts = {c["endpointId"]: c for c in self.views.counts()["items"]}
        self.console.render(
            req,
            resp,
            "webhook_endpoints.html",
            endpoints=self.views.endpoints()["items"],
            counts=counts,
            statuses=STATUSES,
            module=self.module(),
        )


class SetEnabled(_Page):
    """Twin of PATCH /v1/admin/webhooks/endpoints/{id} with ``enabled``."""

    def on_post(self, req: falcon.Request, resp: falcon.Response, endpoint_id: uuid.UUID) -> None:
        self.require_module()
        enabled = form(req).get("enabled", "").lower()
        if enabled not in ("true", "false"):
            raise falcon.HTTPBadRequest(description="enabled must be true or false")
        self.actions.set_enabled(endpoint_id, enabled == "true")
        back(resp, f"{PREFIX}/webhooks/endpoints")


class RotateSecret(_Page, Confirmed):
    """Twin of POST …/rotate-secret, after a confirm step: the answer to this POST is the only place
    the secret shows."""

    label = "Rotate the secret"

    def describe(self, req: falcon.Request, endpoint_id: uuid.UUID) -> tuple[str, str, str]:
        endpoint = self.views.endpoint(endpoint_id)
        return (
            f"Rotate the signing secret of {endpoint['url']}?",
            "A new secret signs its deliveries from now on, the old one beside it for "
            "WEBHOOK_ROTATION_GRACE_MS; the new secret is shown once, on the next page.",
            f"POST /v1/admin/webhooks/endpoints/{endpoint_id}/rotate-secret",
        )

    def done(self, endpoint_id: uuid.UUID) -> str:
        return f"{PREFIX}/webhooks/endpoints"

    def on_post(self, req: falcon.Request, resp: falcon.Response, endpoint_id: uuid.UUID) -> None:
        self.require_module()
        rotated = self.actions.rotate_secret(endpoint_id)
        endpoint = self.views.endpoint(endpoint_id)
        self.console.render(req, resp, "webhook_secret.html", rotated=rotated, endpoint=endpoint)


class SendTest(_Page):
    """Twin of POST …/test: then the test delivery's page."""

    def on_post(self, req: falcon.Request, resp: falcon.Response, endpoint_id: uuid.UUID) -> None:
        self.require_module()
        sent = self.actions.send_test(endpoint_id)
        back(resp, f"{PREFIX}/webhooks/deliveries/{sent['deliveryId']}")


class ReplayEndpoint(_Page):
    """Twin of POST …/replay: every dead delivery of the endpoint (since ``since``) again, by one job."""

    def on_post(self, req: falcon.Request, resp: falcon.Response, endpoint_id: uuid.UUID) -> None:
        self.require_module()
        since = instant(form(req).get("since") or None, "since")
        queued = self.actions.replay_since(endpoint_id, since)
        query = urlencode({"endpointId": str(endpoint_id), "replayJob": queued["jobId"]})
        back(resp, f"{PREFIX}/webhooks/deliveries?{query}")


class Deliveries(_Page):
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        param = query(req)
        page = self.views.deliveries(param, limit=PAGE)
        endpoints = {e["endpointId"]: e for e in self.views.endpoints()["items"]}
        filters = {name: param(name) for name in FILTERS if param(name)}
        self.console.render(
            req,
            resp,
            "webhook_deliveries.html",
            page=page,
            endpoints=endpoints,
            endpoint_labels={
                id_: e["url"] + (f" ({e['description']})" if e["description"] else "")
                for id_, e in endpoints.items()
            },
            filters=filters,
            next_url=(
                f"{PREFIX}/webhooks/deliveries?{urlencode({**filters, 'cursor': page['nextCursor']})}"
                if page["nextCursor"]
                else None
            ),
            statuses=STATUSES,
            event_types=EVENT_TYPES,
            replay_job=_uuid(req.get_param("replayJob")),
            module=self.module(),
        )


class Delivery(_Page):
    def on_get(self, req: falcon.Request, resp: falcon.Response, delivery_id: uuid.UUID) -> None:
        delivery = self.views.delivery(delivery_id)
        endpoint = self.views.endpoint(uuid.UUID(delivery["endpointId"]))
        self.console.render(
            req,
            resp,
            "webhook_delivery.html",
            delivery=delivery,
            endpoint=endpoint,
            payload=json.dumps(delivery["payload"], indent=2, ensure_ascii=False),
            module=self.module(),
        )


class ReplayDelivery(_Page):
    """Twin of POST /v1/admin/webhooks/deliveries/{id}/replay: then its page, where its status moves live."""

    def on_post(self, req: falcon.Request, resp: falcon.Response, delivery_id: uuid.UUID) -> None:
        self.require_module()
        self.actions.replay_delivery(delivery_id)
        back(resp, f"{PREFIX}/webhooks/deliveries/{delivery_id}")
