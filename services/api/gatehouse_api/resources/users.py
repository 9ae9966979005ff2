"""Staff users of the B2B platform and their keys (the bootstrap admin token only)."""

from __future__ import annotations

import uuid

import falcon

from gatehouse.users import Users as UserStore
from gatehouse_api.auth import require_admin_token
from gatehouse_api.body import read_json
from gatehouse_api.openapi import contract
from gatehouse_api.schemas import CreateUser, KeyCreated, UserCreated


class Users:
    def __init__(self, users: UserStore, *, max_body_bytes: int) -> None:
        self.users, self.max_body_bytes = users, max_body_bytes

    @contract(
        "Create a staff user (admin token)",
        (201, UserCreated, "created"),
        (400, 401, 403, 409, 413, 415, 422),
        body=(CreateUser, True),
    )
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        require_admin_token(req)
        body = read_json(req, CreateUser, max_bytes=self.max_body_bytes)
        user = self.users.create(body.email, body.name)
        resp.status = 201
        resp.media = UserCreated(userId=user.id, email=user.email, name=user.name).model_dump(mode="json")


class UserKeys:
    def __init__(self, users: UserStore) -> None:
        self.users = users

    @contract(
        "Issue a staff user's API key (admin token)",
        (201, KeyCreated, "the key, shown once"),
        (401, 403, 404),
    )
    def on_post(self, req: falcon.Request, resp: falcon.Response, user_id: uuid.UUID) -> None:
        require_admin_token(req)
        resp.status = 201
        resp.media = KeyCreated(key=self.users.issue_key(user_id)).model_dump(mode="json")
