"""A real SMTP server (aiosmtpd) on 127.0.0.1 for tests: it keeps what it receives."""

from __future__ import annotations

import email
import email.policy
import threading
from email.message import EmailMessage

from aiosmtpd.controller import Controller


class Inbox:
    """An aiosmtpd handler that keeps what it receives."""

    def __init__(self) -> None:
        self.messages: list[tuple[list[str], EmailMessage]] = []
        self._lock = threading.Lock()

    async def handle_DATA(self, server, session, envelope) -> str:
        parsed = email.message_from_bytes(envelope.content, policy=email.policy.default)
        with self._lock:
            self.messages.append((list(envelope.rcpt_tos), parsed))
        return "250 OK"


class SmtpServer:
    """A real SMTP server on 127.0.0.1:<port>, started (and restarted) by the test."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.inbox = Inbox()
        self._controller: Controller | None = None

    @property
    def url(self) -> str:
        return f"smtp://127.0.0.1:{self.port}"

    def start(self) -> None:
        self._controller = Controller(self.inbox, hostname="127.0.0.1", port=self.port)
        self._controller.start()

    def stop(self) -> None:
        if self._controller is not None:
            self._controller.stop()
            self._controller = None
