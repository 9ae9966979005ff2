"""The calling staff user's notifications (``/v1/me``): only a user key has a "me"."""

from __future__ import annotations

import uuid

import falcon

from gatehouse.errors import Forbidden
from gatehouse.notifications import NotificationRecord, NotificationStore
from gatehouse.notifications.handlers import NotificationHandlers
from gatehouse_api.auth import principal
from gatehouse_api.openapi import contract
from gatehouse_api.schemas import NotificationList, NotificationView

# GET /v1/me/notifications shows this many, newest first.
SHOWN = 100


def me(req: falcon.Request) -> uuid.UUID:
    """The staff user behind the request's key; the admin token and account keys have none."""
    user_id = principal(req).user_id
    if user_id is None:
        raise Forbidden("/v1/me needs a staff user's key (the admin token and account keys have no user)")
    return user_id


def notification_model(n: NotificationRecord) -> NotificationView:
    return NotificationView(
        notificationId=n.id,
        kind=n.kind,
        title=n.title,
        body=n.body,
        link=n.link,
        createdAt=n.created_at,
        readAt=n.read_at,
    )


class MyNotifications:
    def __init__(self, store: NotificationStore) -> None:
        self.store = store

    @contract(
        "The calling staff user's notifications, newest first (a user key)",
        (200, NotificationList, "the newest notifications"),
        (401, 403),
    )
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        items = self.store.list_for_user(me(req), limit=SHOWN)
        resp.media = NotificationList(items=[notification_model(n) for n in items]).model_dump(mode="json")


class MyNotificationRead:
    def __init__(self, handlers: NotificationHandlers) -> None:
        self.handlers = handlers

    @contract(
        "Mark one of the caller's notifications read (a user key)",
        (200, NotificationView, "the notification, read"),
        (401, 403, 404),
    )
    def on_post(self, req: falcon.Request, resp: falcon.Response, notification_id: uuid.UUID) -> None:
        read = self.handlers.mark_read(me(req), notification_id)
        resp.media = notification_model(read).model_dump(mode="json")
