"""Bearer authentication (the admin token, a staff user's key, or an account-scoped key), throttled
per client address (``AuthGuard``, shared with the console's sign-in)."""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Sequence
from typing import Any

import falcon

from gatehouse.accounts import Accounts, Principal
from gatehouse.auth_throttle import AuthThrottle
from gatehouse.errors import Forbidden, NotFound, TooManyAttempts, Unauthorized
from gatehouse.metrics import AUTH_FAILURES

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def client_address(req: falcon.Request, trusted_proxies: Sequence[Network]) -> str:
    """The client's address: the socket's peer, or, when the peer is a trusted proxy, the right-most
    hop of X-Forwarded-For that is not one (each trusted proxy vouches for the hop it appended; a
    hop further left is whatever the client wrote). A hop that is no address ends the walk."""
    address = req.remote_addr
    if not trusted_proxies:
        return address
    forwarded = [hop.strip() for hop in (req.get_header("X-Forwarded-For") or "").split(",")]
    for hop in (address, *reversed(forwarded)):
        try:
            ip = ipaddress.ip_address(hop)
        except ValueError:
            return address
        address = hop
        if not any(ip in network for network in trusted_proxies):
            return address
    return address  # every hop a trusted proxy: the left-most


class AuthGuard:
    """Throttles one surface's authentication (gatehouse.auth_throttle): a locked-out client address
    is refused before its credential is looked at; each failure is counted, in Redis and in
    ``gatehouse_auth_failures_total{surface}``."""

    def __init__(self, throttle: AuthThrottle, *, trusted_proxies: Sequence[Network], surface: str) -> None:
        self.throttle, self.trusted_proxies, self.surface = throttle, trusted_proxies, surface

    def admit(self, req: falcon.Request) -> str:
        """The client's address, or TooManyAttempts (429) while it is locked out."""
        address = client_address(req, self.trusted_proxies)
        locked_ms = self.throttle.locked_ms(address)
        if locked_ms:
            retry_after_s = math.ceil(locked_ms / 1000)
            raise TooManyAttempts(
                f"too many failed authentication attempts from your address; try again in {retry_after_s} s",
                retry_after_s=retry_after_s,
            )
        return address

    def failed(self, address: str) -> None:
        AUTH_FAILURES.labels(self.surface).inc()
        self.throttle.failed(address)


class Authenticate:
    """Falcon middleware: every resource not marked ``public`` needs a valid bearer token."""

    def __init__(self, accounts: Accounts, guard: AuthGuard) -> None:
        self.accounts, self.guard = accounts, guard

    def process_resource(
        self, req: falcon.Request, resp: falcon.Response, resource: Any, params: dict
    ) -> None:
        if resource is None or getattr(resource, "public", False):
            return
        self.check(req)

    def check(self, req: falcon.Request) -> None:
        """The request's bearer token is valid (``req.context.principal``), or Unauthorized
        (TooManyAttempts while its client is locked out, whatever it sends)."""
        address = self.guard.admit(req)
        scheme, _, token = (req.get_header("Authorization") or "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthorized("send Authorization: Bearer <admin token, user key or account key>")
        principal = self.accounts.authenticate(token.strip())
        if principal is None:
            self.guard.failed(address)
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
