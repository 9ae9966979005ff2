"""Keys and staff users: the users with their keys; revoking a key or removing a user, each after a
confirm step (``Confirmed``: a GET says what will happen, a POST does it)."""

from __future__ import annotations

import uuid

import falcon

from gatehouse.handlers import AccountHandlers
from gatehouse.users import USER_KEY_PREFIX, Users
from gatehouse_api.auth import require_admin, require_admin_token
from gatehouse_api.console.web import PREFIX, Confirmed, Console, Page
from gatehouse_api.resources.accounts import key_list
from gatehouse_api.resources.users import user_list


class StaffUsers(Page):
    """GET /console/users: the twin of GET /v1/admin/users, with each user's GET …/users/{id}/keys
    (the admin token's sessions only, as the JSON routes)."""

    def __init__(self, console: Console, users: Users) -> None:
        super().__init__(console)
        self.users = users

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        require_admin_token(req)
        users = user_list(self.users.page())["items"]
        keys = {u["userId"]: key_list(self.users.keys(uuid.UUID(u["userId"])))["items"] for u in users}
        self.console.render(
            req,
            resp,
            "users.html",
            users=users,
            keys=keys,
            prefix=USER_KEY_PREFIX,
        )


class _Confirmed(Confirmed):
    """A key or user action after its confirm step (the admin token's sessions only, as the JSON routes)."""

    def __init__(self, console: Console, handlers: AccountHandlers) -> None:
        super().__init__(console)
        self.handlers = handlers

    def allowed(self, req: falcon.Request) -> None:
        require_admin_token(req)

    def done(self, **params: object) -> str:
        return f"{PREFIX}/users"


class RevokeAccountKey(_Confirmed):
    """The form twin of DELETE /v1/accounts/{accountId}/keys/{keyId}."""

    label = "Revoke the key"

    def allowed(self, req: falcon.Request) -> None:
        require_admin(req)

    def describe(self, req: falcon.Request, account_id: uuid.UUID, key_id: str) -> tuple[str, str, str]:
        return (
            f"Revoke key {key_id}?",
            "Requests made with it answer 401 from the next one on, in every API process. "
            "This cannot be undone; the account can be given a new key.",
            f"DELETE /v1/accounts/{account_id}/keys/{key_id}",
        )

    def act(self, req: falcon.Request, actor: str, account_id: uuid.UUID, key_id: str) -> None:
        self.handlers.revoke_account_key(account_id, key_id, actor=actor)

    def done(self, account_id: uuid.UUID, key_id: str) -> str:
        return f"{PREFIX}/accounts/{account_id}#keys"


class RevokeUserKey(_Confirmed):
    """The form twin of DELETE /v1/admin/users/{userId}/keys/{keyId}."""

    label = "Revoke the key"

    def describe(self, req: falcon.Request, user_id: uuid.UUID, key_id: str) -> tuple[str, str, str]:
        return (
            f"Revoke staff key {key_id}?",
            "Requests made with it answer 401 from the next one on, and the console sessions "
            "signed in with it end. This cannot be undone.",
            f"DELETE /v1/admin/users/{user_id}/keys/{key_id}",
        )

    def act(self, req: falcon.Request, actor: str, user_id: uuid.UUID, key_id: str) -> None:
        self.handlers.revoke_user_key(user_id, key_id, actor=actor)


class RemoveUser(_Confirmed):
    """The form twin of DELETE /v1/admin/users/{userId}."""

    label = "Remove the user"

    def describe(self, req: falcon.Request, user_id: uuid.UUID) -> tuple[str, str, str]:
        return (
            "Remove this staff user?",
            "Every key of theirs is revoked and their console sessions end; the audit log keeps "
            "what they did. This cannot be undone.",
            f"DELETE /v1/admin/users/{user_id}",
        )

    def act(self, req: falcon.Request, actor: str, user_id: uuid.UUID) -> None:
        self.handlers.remove_user(user_id, actor=actor)
