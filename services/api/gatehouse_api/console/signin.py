"""Signing in and out of the console, and its static files."""

from __future__ import annotations

import falcon

from gatehouse_api.auth import AuthGuard
from gatehouse_api.console.session import COOKIE
from gatehouse_api.console.web import PREFIX, STATIC, STATIC_TYPES, Console, Page, back, form


def _next(value: str | None) -> str:
    """Where to go after signing in: a console path only (never another site)."""
    if value and value.startswith(PREFIX) and not value.startswith("//"):
        return value
    return PREFIX


class Login(Page):
    signed_out = True

    def __init__(self, console: Console, guard: AuthGuard) -> None:
        super().__init__(console)
        self.guard = guard

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        if req.context.console is not None:
            back(resp, _next(req.get_param("next")))
            return
        self.console.render(req, resp, "login.html", next=_next(req.get_param("next")), error=None)

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        address = self.guard.admit(req)  # a locked-out address: 429, its token unread
        fields = form(req)
        opened = self.console.sessions.open(fields.get("token", "").strip())
        if opened is None:
            self.guard.failed(address)
            resp.status = falcon.HTTP_401
            error = (
                "That is not the admin token or a staff user's key (account keys cannot open the console)."
            )
            self.console.render(req, resp, "login.html", next=_next(fields.get("next")), error=error)
            return
        sid, _ = opened
        resp.set_cookie(
            COOKIE,
            sid,
            max_age=self.console.sessions.session_ms // 1000,
            path=PREFIX,
            secure=self.console.secure_cookie,
            http_only=True,
            same_site="Strict",
        )
        back(resp, _next(fields.get("next")))


class Logout(Page):
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        self.console.sessions.close(req.context.console.sid)
        resp.unset_cookie(COOKIE, path=PREFIX, same_site="Strict")
        back(resp, f"{PREFIX}/login")


class Static(Page):
    signed_out = True

    def on_get(self, req: falcon.Request, resp: falcon.Response, name: str) -> None:
        path = STATIC / name
        if "/" in name or path.suffix not in STATIC_TYPES or not path.is_file():
            raise falcon.HTTPNotFound(description=f"no static file {name}")
        resp.content_type = STATIC_TYPES[path.suffix]
        resp.data = path.read_bytes()
