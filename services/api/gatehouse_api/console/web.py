"""What every console page shares: the session guard, CSRF, security headers, templates, errors.

A console resource is a ``Page``: ``public`` for the bearer middleware (the
console signs in with a cookie instead), ``console`` for ``ConsoleGuard``,
which lets a request reach the responder only with a valid session, and a
POST only with that session's CSRF token from a same-origin page. A refused
POST never reaches its responder, so it changes nothing.

Pages render the same view dicts the JSON API returns (``gatehouse_api.resources``),
read through the same domain calls: the console is a second face of the API,
not a second query path.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import falcon
from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup

from gatehouse.errors import GatehouseError
from gatehouse_api import errors
from gatehouse_api.console.session import COOKIE, CSRF_FIELD, ConsoleSession, Sessions

PREFIX = "/console"
STATIC = Path(__file__).parent / "static"
STATIC_TYPES = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}
# Nothing inline, nothing from elsewhere: every script and style is a file under /console/static.
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
    "Cross-Origin-Opener-Policy": "same-origin",
}


class Refused(Exception):
    """A console request answered with an HTML error page (403 without CSRF, 404 …)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def is_console(req: falcon.Request) -> bool:
    return req.path == PREFIX or req.path.startswith(PREFIX + "/")


def cross_site(req: falcon.Request) -> bool:
    """A request a page of another site sent (the browser says so; a non-browser client sends neither)."""
    if (req.get_header("Sec-Fetch-Site") or "").lower() == "cross-site":
        return True
    origin = req.get_header("Origin")
    return origin is not None and origin not in (req.prefix, req.forwarded_prefix)


def _utc(value: Any) -> str:
    """An instant as plain text in UTC (where markup cannot go: an attribute, an SVG's text)."""
    if not value:
        return "—"
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _when(value: Any) -> Markup | str:
    """An instant as ``<time datetime>`` in UTC; console.js adds the browser's local time beside it
    (without JavaScript the UTC stays)."""
    if not value:
        return "—"
    return Markup('<time datetime="{}">{}</time>').format(_iso(value), _utc(value))


def _iso(value: Any) -> str:
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat(timespec="milliseconds")
    return str(value or "")


def _past(value: Any) -> bool:
    """An instant (ISO 8601 or datetime) that has passed."""
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return value is not None and value <= datetime.now(UTC)


def _ms(value: int | None) -> str:
    """A duration in ms as «1 h 30 min», «45 s», «250 ms»."""
    if value is None:
        return "—"
    if value < 1000:
        return f"{value} ms"
    seconds = round(value / 1000)
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    parts = [
        f"{hours} h" if hours else "",
        f"{minutes} min" if minutes else "",
        f"{seconds} s" if seconds else "",
    ]
    return " ".join(p for p in parts if p)


class Console:
    """The console's shared pieces, built once by ``routes`` and handed to every page."""

    def __init__(self, sessions: Sessions, *, refresh_ms: int, secure_cookie: bool) -> None:
        self.sessions = sessions
        self.refresh_ms = refresh_ms
        # SESSION_COOKIE_SECURE: a setting, never a request header a client could send.
        self.secure_cookie = secure_cookie
        self.templates = Environment(
            loader=PackageLoader("gatehouse_api.console", "templates"),
            autoescape=True,  # every value is text unless a template says otherwise (none does)
            undefined=StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self.templates.filters.update(when=_when, utc=_utc, iso=_iso, ms=_ms, past=_past)

    def render(self, req: falcon.Request, resp: falcon.Response, template: str, **context: Any) -> None:
        session: ConsoleSession | None = getattr(req.context, "console", None)
        resp.content_type = falcon.MEDIA_HTML
        resp.text = self.templates.get_template(template).render(
            session=session,
            csrf=session.csrf if session else "",
            csrf_field=CSRF_FIELD,
            refresh_ms=self.refresh_ms,
            path=req.path,
            now=datetime.now(UTC),
            **context,
        )


class Page:
    """Base of console resources: the guard checks them, the bearer middleware does not."""

    public = True
    console = True
    outside_contract = "an HTML page or form action of the console, not JSON (gatehouse_api.openapi)"
    signed_out = False  # login and static assets need no session

    def __init__(self, console: Console) -> None:
        self.console = console


class Confirmed(Page):
    """A consequential action in two requests: GET is its confirm step (what will happen, the button —
    a form with the session's CSRF token — and the way back), POST does it, through the same
    handler as its JSON twin. No script and no browser dialog is needed for the step.

    A subclass says ``describe`` (title, what happens, the JSON twin), ``act`` and ``done`` (where
    to go after, and the confirm step's way back); ``fields`` are hidden fields its form posts.
    """

    label = ""

    def on_get(self, req: falcon.Request, resp: falcon.Response, **params: Any) -> None:
        self.allowed(req)
        title, what, twin = self.describe(req, **params)
        self.console.render(
            req,
            resp,
            "confirm.html",
            title=title,
            what=what,
            label=self.label,
            cancel=self.done(**params),
            twin=twin,
            fields=self.fields(req),
        )

    def on_post(self, req: falcon.Request, resp: falcon.Response, **params: Any) -> None:
        self.allowed(req)
        back(resp, self.act(req, req.context.principal.actor, **params) or self.done(**params))

    def allowed(self, req: falcon.Request) -> None:
        """Who may: every console session by default (each is an admin's)."""

    def describe(self, req: falcon.Request, **params: Any) -> tuple[str, str, str]:
        raise NotImplementedError

    def fields(self, req: falcon.Request) -> dict[str, str]:
        return {}

    def act(self, req: falcon.Request, actor: str, **params: Any) -> str | None:
        """Do it; return where to go next, or None for ``done``."""
        raise NotImplementedError

    def done(self, **params: Any) -> str:
        raise NotImplementedError


def query(req: falcon.Request) -> Callable[[str], str | None]:
    """A filter form's parameters: an empty field (the form's "any") reads as absent, as in the JSON lists."""
    return lambda name: req.get_param(name) or None


def form(req: falcon.Request) -> dict[str, str]:
    """The url-encoded form of a POST (a repeated field keeps its last value)."""
    media = req.get_media(default_when_empty={}) if req.content_length else {}
    if not isinstance(media, dict):
        return {}
    return {k: (v[-1] if isinstance(v, list) else v) for k, v in media.items()}


def back(resp: falcon.Response, location: str) -> None:
    """After an action: 303 See Other, so a reload does not post again."""
    resp.status = falcon.HTTP_303
    resp.location = location


class ConsoleGuard:
    """Falcon middleware for console resources: session, CSRF, same-origin; headers on every answer."""

    def __init__(self, console: Console) -> None:
        self.sessions = console.sessions

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        req.context.console = self.sessions.load(req.cookies.get(COOKIE)) if is_console(req) else None

    def process_resource(
        self, req: falcon.Request, resp: falcon.Response, resource: Any, params: dict
    ) -> None:
        if not getattr(resource, "console", False):
            return
        posting = req.method not in ("GET", "HEAD", "OPTIONS")
        if posting and cross_site(req):
            raise Refused(403, "This request came from another site; the console only acts on its own forms.")
        session = req.context.console
        if resource.signed_out:
            return
        if session is None:
            if not posting:
                raise falcon.HTTPSeeOther(f"{PREFIX}/login?next={quote(req.relative_uri, safe='/')}")
            raise Refused(403, "Your console session has ended; sign in again.")
        if posting and not self.sessions.csrf_valid(session, form(req).get(CSRF_FIELD)):
            raise Refused(403, "The form's CSRF token is missing or wrong; reload the page and try again.")
        req.context.principal = session.principal

    def process_response(
        self, req: falcon.Request, resp: falcon.Response, resource: Any, req_succeeded: bool
    ) -> None:
        if is_console(req):
            resp.set_headers(SECURITY_HEADERS)


def install_errors(app: falcon.App, console: Console) -> None:
    """Errors on console paths answer an HTML page; everywhere else problem+json as before."""

    def page(req: falcon.Request, resp: falcon.Response, status: int, message: str) -> None:
        resp.status = status
        console.render(req, resp, "error.html", status=status, message=message)

    def refused(req: falcon.Request, resp: falcon.Response, exc: Refused, params: Any) -> None:
        page(req, resp, exc.status, exc.message)

    def domain(req: falcon.Request, resp: falcon.Response, exc: GatehouseError, params: Any) -> None:
        errors.handle_domain(req, resp, exc, params)
        if is_console(req):
            page(req, resp, resp.status_code, exc.detail)

    def http(req: falcon.Request, resp: falcon.Response, exc: falcon.HTTPError, params: Any) -> None:
        if is_console(req) and exc.status_code >= 400:
            for name, value in (exc.headers or {}).items():
                resp.set_header(name, value)
            page(req, resp, exc.status_code, exc.description or exc.title or "")
        else:
            errors.handle_http(req, resp, exc, params)

    app.add_error_handler(Refused, refused)
    app.add_error_handler(GatehouseError, domain)
    app.add_error_handler(falcon.HTTPError, http)
