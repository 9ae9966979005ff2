"""Staff users of the B2B platform and their keys (the bootstrap admin token only)."""

from __future__ import annotations

import uuid

import falcon

from gatehouse.handlers import AccountHandlers
from gatehouse.users import UserRecord
from gatehouse.users import Users as UserStore
from gatehouse_api.auth import principal, require_admin_token
from gatehouse_api.body import read_json
from gatehouse_api.openapi import contract
from gatehouse_api.resources.accounts import key_list
from gatehouse_api.schemas import CreateUser, IssueKey, KeyCreated, KeyList, UserCreated, UserList, UserView


def user_list(users: list[UserRecord]) -> dict:
    return UserList(
        items=[
            UserView(userId=u.id, email=u.email, name=u.name, role=u.role, createdAt=u.created_at)
            for u in users
        ]
    ).model_dump(mode="json")


class Users:
    def __init__(self, handlers: AccountHandlers, users: UserStore, *, max_body_bytes: int) -> None:
        self.handlers, self.users, self.max_body_bytes = handlers, users, max_body_bytes

    @contract("List the staff users (admin token)", (200, UserList, "every user not removed"), (401, 403))
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        require_admin_token(req)
        resp.media = user_list(self.users.page())

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


class User:
    def __init__(self, handlers: AccountHandlers) -> None:
        self.handlers = handlers

    @contract(
        "Remove a staff user (admin token): every key of theirs is revoked, their audit rows stay",
        (204, None, "removed"),
        (401, 403, 404),
    )
    def on_delete(self, req: falcon.Request, resp: falcon.Response, user_id: uuid.UUID) -> None:
        require_admin_token(req)
        self.handlers.remove_user(user_id, actor=principal(req).actor)
        resp.status = 204


class UserKeys:
    def __init__(self, handlers: AccountHandlers, users: UserStore, *, max_body_bytes: int) -> None:
        self.handlers, self.users, self.max_body_bytes = handlers, users, max_body_bytes

    @contract(
        "Issue a staff user's API key (admin token)",
        (201, KeyCreated, "the key, shown once"),
        (400, 401, 403, 404, 413, 415, 422),
        body=(IssueKey, False),
    )
    def on_post(self, req: falcon.Request, resp: falcon.Response, user_id: uuid.UUID) -> None:
        require_admin_token(req)
        body = read_json(req, IssueKey, max_bytes=self.max_body_bytes, allow_empty=True)
        key = self.handlers.issue_user_key(user_id, expires_at=body.expiresAt, actor=principal(req).actor)
        resp.status = 201
        resp.media = KeyCreated(key=key).model_dump(mode="json")

    @contract(
        "List a staff user's API keys (admin token)",
        (200, KeyList, "their keys, never a secret"),
        (401, 403, 404),
    )
    def on_get(self, req: falcon.Request, resp: falcon.Response, user_id: uuid.UUID) -> None:
        require_admin_token(req)
        resp.media = key_list(self.users.keys(user_id))


class UserKey:
    def __init__(self, handlers: AccountHandlers) -> None:
        self.handlers = handlers

    @contract(
        "Revoke a staff user's API key (admin token): it answers 401 from the next request on, "
        "and its console sessions end",
        (204, None, "revoked"),
        (401, 403, 404),
    )
    def on_delete(self, req: falcon.Request, resp: falcon.Response, user_id: uuid.UUID, key_id: str) -> None:
        require_admin_token(req)
        self.handlers.revoke_user_key(user_id, key_id, actor=principal(req).actor)
        resp.status = 204
