"""A local SMTP sink for `make run` (aiosmtpd): every message it receives becomes a file under ./var/mail.

    python dev/mail_sink.py [VAR_DIR] [--port N]   # run it on its own until Ctrl-C (port: MAIL_SINK_PORT, 1025)

Development only: aiosmtpd is in the dev dependency group, never in an image
(the worker sends with the standard library's smtplib).
"""

from __future__ import annotations

import argparse
import contextlib
import email
import email.policy
import os
import socket
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from aiosmtpd.controller import Controller

HOST = "127.0.0.1"
PORT = 1025


class _WriteToFiles:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._lock = threading.Lock()

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        data = envelope.content if isinstance(envelope.content, bytes) else envelope.content.encode()
        with self._lock:
            name = f"{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:8]}.eml"
            path = self.directory / name
            path.write_bytes(data)
        parsed = email.message_from_bytes(data, policy=email.policy.default)
        print(
            f"mail sink: to {', '.join(envelope.rcpt_tos)}: {parsed['Subject']!s} → {path}",
            flush=True,
        )
        return "250 Message accepted for delivery"


def port_free(port: int) -> bool:
    with socket.socket() as s, contextlib.suppress(OSError):
        s.bind((HOST, port))
        return True
    return False


class MailSink:
    """Listens on 127.0.0.1:``port`` in a thread of its own; ``start`` raises OSError if the port is taken."""

    def __init__(self, var: Path, port: int = PORT) -> None:
        self.directory = var / "mail"
        self.directory.mkdir(parents=True, exist_ok=True)
        self.port = port
        self._controller = Controller(_WriteToFiles(self.directory), hostname=HOST, port=self.port)

    @property
    def url(self) -> str:
        return f"smtp://{HOST}:{self.port}"

    def start(self) -> MailSink:
        self._controller.start()
        return self

    def stop(self) -> None:
        self._controller.stop()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("var", nargs="?", default="var")
    parser.add_argument("--port", type=int, default=int(os.environ.get("MAIL_SINK_PORT", PORT)))
    args = parser.parse_args()
    sink = MailSink(Path(args.var).resolve(), args.port).start()
    print(f"mail sink: {sink.url}, messages under {sink.directory}", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        sink.stop()


if __name__ == "__main__":
    main()
