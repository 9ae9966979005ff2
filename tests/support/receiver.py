"""A real webhook receiver for tests: an HTTP server on 127.0.0.1 (or ::1) that checks signatures.

It verifies every request with the README's helper (``gatehouse.webhooks.verify``)
against the secrets it is given, records what came (``Received``), and answers
as scripted: a list of ``Reply`` taken in order (the last one repeats), each a
status, headers, and optionally a hold (keep the request open until released
or for some seconds) — so a test can make it fail seven times, answer 410, or
hang while a worker is killed.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from gatehouse.webhooks import SignatureInvalid, verify
from gatehouse.webhooks.safety import Allowlist, Guard

# The SSRF guard of a sender that may reach these receivers (and nothing else local).
LOOPBACK_GUARD = Guard(Allowlist.parse(["127.0.0.0/8", "::1"]))


@dataclass(frozen=True)
class Reply:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: str = "ok"
    hold_s: float = 0.0  # keep the request open this long first (or until release())


@dataclass(frozen=True)
class Received:
    at: float  # time.time() when it arrived
    webhook_id: str
    timestamp: str
    signature: str
    verified_by: tuple[int, ...]  # indexes of the secrets that verify it
    body: bytes
    path: str
    headers: dict[str, str] = field(default_factory=dict)  # every header, names lower-cased

    @property
    def event(self) -> dict[str, Any]:
        return json.loads(self.body)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


class Receiver:
    def __init__(self, *, host: str = "127.0.0.1", secrets: list[str] | None = None) -> None:
        self.host = host
        self.secrets: list[str] = list(secrets or [])
        self.received: list[Received] = []
        self._replies: list[Reply] = [Reply()]
        self._lock = threading.Lock()
        self._release = threading.Event()
        _Server.address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._server = _Server((host, 0), self._handler())
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/hook"

    def script(self, *replies: Reply) -> None:
        """Answer with these in order; the last one repeats."""
        with self._lock:
            self._replies = list(replies) or [Reply()]

    def release(self) -> None:
        """Let every held request answer now."""
        self._release.set()

    def ids(self) -> list[str]:
        with self._lock:
            return [r.webhook_id for r in self.received]

    def stop(self) -> None:
        self._release.set()
        self._server.shutdown()
        self._server.server_close()

    def _next_reply(self) -> Reply:
        with self._lock:
            return self._replies.pop(0) if len(self._replies) > 1 else self._replies[0]

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                headers = {k.lower(): v for k, v in self.headers.items()}
                verified = []
                for i, secret in enumerate(list(receiver.secrets)):
                    try:
                        verify(headers, body, secret)
                        verified.append(i)
                    except SignatureInvalid:
                        pass
                with receiver._lock:
                    receiver.received.append(
                        Received(
                            at=time.time(),
                            webhook_id=headers.get("webhook-id", ""),
                            timestamp=headers.get("webhook-timestamp", ""),
                            signature=headers.get("webhook-signature", ""),
                            verified_by=tuple(verified),
                            body=body,
                            path=self.path,
                            headers=headers,
                        )
                    )
                reply = receiver._next_reply()
                if reply.hold_s:
                    receiver._release.wait(reply.hold_s)
                payload = reply.body.encode()
                try:
                    self.send_response(reply.status)
                    for name, value in reply.headers.items():
                        self.send_header(name, value)
                    self.send_header("content-length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except OSError:
                    pass  # the sender gave up (its timeout) or died

        return Handler
