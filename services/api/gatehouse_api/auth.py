"""Bearer authentication: the admin token, a staff user's key, or an account-scoped key."""

from __future__ import annotations

from typing import Any

import falcon

from gatehouse.accounts import Accounts, Principal
from gatehouse.errors import Forbidden, NotFound, Unauthorized


class Authenticate:
    """Falcon middleware: every resource not marked ``public`` needs a valid bearer token."""

    def __init__(self, accounts: Accounts) -> None:
        self.accounts = accounts

    def process_resource(
        self, req: falcon.Request, resp: falcon.Response, resource: Any, params: dict
    ) -> None:
        if resource is None or getattr(resource, "public", False):
            return
        self.check(req)

    def check(self, req: falcon.Request) -> None:
        """The request's bearer token is valid (``req.context.principal``), or Unauthorized."""
        scheme, _, token = (req.get_header("Authorization") or "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthorized("send Authorization: Bearer <admin token, user key or account key>")
        principal = self.accounts.authenticate(token.strip())
        if principal is None:
            raise Unauthorized("the bearer token is not valid")
        req.context.principal = principal


def principal(req: falcon.Request) -> Principal:
    return req.context.principal


def require_admin(req: falcon.Request) -> None:
    """The admin token or a staff user's key (role admin)."""
    if not principal(req).admin:
        raise Forbidden("this operation needs the admin token or a staff user's key")


def require_admin_token(req: falcon.Request) -> None:
    """The bootstrap ADMIN_TOKEN itself: managing staff users and their keys."""
    if not principal(req).bootstrap:
        raise Forbidden("this operation needs the admin token")


def require_account(req: falcon.Request, account_id: Any) -> None:
    """An account key sees only its own account; anything else looks like it does not exist."""
    if not principal(req).may_see(account_id):
        raise NotFound(f"account {account_id} not found")
