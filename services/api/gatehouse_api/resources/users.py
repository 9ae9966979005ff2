"""Staff users of the B2B platform and their keys (the bootstrap admin token only)."""

from __future__ import annotations

import uuid

import falcon

from gatehouse.handlers import AccountHandlers
from gatehouse_api.auth import require_admin_token
from gatehouse_api.body import read_json
from gatehouse_api.openapi import contract
from gatehouse_api.schemas import CreateUser, KeyCreated, UserCreated


class Users:
    def __init__(self, handlers: AccountHandlers, *, max_body_bytes: int) -> None:
        self.handlers, self.max_body_bytes = handlers, max_body_bytes

    @contract(
        "Create a staff user (admin token)",
        (201, UserCreated, "created"),
        (400, 401, 403, 409, 413, 415, 422),
        body=(CreateUser, True),
    )
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        require_admin_token(req)
        body = read_json(req, CreateUser, max_bytes=self.max_body_bytes)
        user = self.handlers.create_user(body.email, body.name)
        resp.status = 201
        resp.media = UserCreated(userId=user.id, email=user.email, name=user.name).model_dump(mode="json")


class UserKeys:
    def __init__(self, handlers: AccountHandlers) -> None:
        self.handlers = handlers

    @contract(
        "Issue a staff user's API key (admin token)",
        (201, KeyCreated, "the key, shown once"),
        (401, 403, 404),
    )
    def on_post(self, req: falcon.Request, resp: falcon.Response, user_id: uuid.UUID) -> None:
        require_admin_token(req)
        resp.status = 201
        resp.media = KeyCreated(key=self.handlers.issue_user_key(user_id)).model_dump(mode="json")
