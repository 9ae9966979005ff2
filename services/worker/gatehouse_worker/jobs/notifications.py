"""The e-mail of a notification: one plain-text message to its user over SMTP (stdlib smtplib).

A connection failure or a timeout raises, so the attempt fails and the job
retries on its policy (``NOTIFICATION_EMAIL``); SMTP_TIMEOUT_MS bounds the
whole exchange, connect to QUIT (gatehouse.deadlines), however slowly the
server answers. A notification whose user is gone completes with nothing sent.
"""

from __future__ import annotations

import smtplib
import uuid
from dataclasses import dataclass, field
from email.message import EmailMessage
from email.utils import formataddr
from typing import Any
from urllib.parse import unquote, urlsplit

from gatehouse import deadlines, traces
from gatehouse.errors import PermanentJobError
from gatehouse.job_types import NOTIFICATION_EMAIL
from gatehouse.notifications import EmailOf, NotificationStore
from gatehouse_worker.runtime import JobContext, job

PORTS = {"smtp": 25, "smtps": 465}


@dataclass(frozen=True)
class SmtpServer:
    host: str
    port: int
    tls: bool
    user: str | None = None
    password: str | None = field(default=None, repr=False)


@dataclass(frozen=True)
class SmtpConfig:
    """SMTP_URL, MAIL_FROM and SMTP_TIMEOUT_MS."""

    url: str | None = field(repr=False)
    mail_from: str
    timeout_ms: int


def smtp_server(smtp_url: str | None) -> SmtpServer:
    """SMTP_URL as host, port, TLS and login; unset or malformed fails the job at once (no retry fixes it)."""
    if not smtp_url:
        raise PermanentJobError(
            "SMTP_URL is not set: no server to send e-mail to", code="SMTP_NOT_CONFIGURED"
        )
    url = urlsplit(smtp_url)
    try:
        port = url.port
    except ValueError:
        port = -1
    if url.scheme not in PORTS or not url.hostname or port == -1:
        raise PermanentJobError(
            "SMTP_URL must look like smtp://host:port or smtps://host:port", code="SMTP_NOT_CONFIGURED"
        )
    return SmtpServer(
        host=url.hostname,
        port=port or PORTS[url.scheme],
        tls=url.scheme == "smtps",
        user=unquote(url.username) if url.username else None,
        password=unquote(url.password) if url.password else None,
    )


def absolute(link: str, public_url: str) -> str:
    """A path (the console page of what it is about) as PUBLIC_URL + path; a full URL as it is."""
    return public_url.rstrip("/") + link if link.startswith("/") else link


def message(of: EmailOf, mail_from: str, public_url: str) -> EmailMessage:
    """The e-mail of a notification; its link absolute (a mail client has no page to resolve a path against)."""
    n = of.notification
    msg = EmailMessage()
    msg["From"] = mail_from
    msg["To"] = formataddr((of.name, of.email))
    msg["Subject"] = n.title
    # One notification, one Message-ID: a re-sent e-mail (a retry after a lost reply) is recognizable.
    msg["Message-ID"] = f"<{n.id}@gatehouse>"
    lines = [n.body]
    if n.link:
        lines += ["", absolute(n.link, public_url)]
    msg.set_content("\n".join(lines) + "\n")
    return msg


def send(server: SmtpServer, msg: EmailMessage, timeout_s: float) -> None:
    """The exchange ends within ``timeout_s`` (or the run's deadline if sooner): smtplib's timeout
    bounds each socket wait only, so the socket is shut down at the deadline."""
    smtp_class = smtplib.SMTP_SSL if server.tls else smtplib.SMTP
    with (
        traces.span("SMTP send", {"server.address": server.host, "server.port": server.port}),
        deadlines.within(timeout_s),
    ):
        smtp = smtp_class(timeout=deadlines.clamp(timeout_s))  # no host: connecting comes below
        try:
            with deadlines.shut_at_deadline(lambda: smtp.sock), smtp:
                smtp.connect(server.host, server.port)
                if server.user:
                    smtp.login(server.user, server.password or "")
                smtp.send_message(msg)
        except (OSError, smtplib.SMTPException) as exc:
            if deadlines.remaining() <= 0:
                raise TimeoutError(f"the SMTP exchange did not end within {timeout_s:g} s") from exc
            raise


@job(NOTIFICATION_EMAIL)
def notification_email(
    ctx: JobContext, notifications: NotificationStore, smtp: SmtpConfig, public_url: str
) -> dict[str, Any] | None:
    server = smtp_server(smtp.url)
    of = notifications.email_of(uuid.UUID(ctx.payload["notificationId"]))
    if of is None:
        return {"sent": False, "reason": "notification-gone"}
    ctx.ensure_held()
    send(server, message(of, smtp.mail_from, public_url), smtp.timeout_ms / 1000)
    return None
