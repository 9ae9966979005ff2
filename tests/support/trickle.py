"""A server on 127.0.0.1 that answers as slowly as a bad network: one byte every ``interval`` seconds.

For the total deadlines (gatehouse.deadlines): each byte comes well within any
per-read timeout, so only a deadline over the whole exchange ends it. Modes:

- ``http``: reads a request; for a path starting with one of ``slow_paths``
  (all when empty) sends a 200 whose JSON body trickles; any other path gets
  ``204 No Content`` at once;
- ``http-silent``: reads a request and never answers (for those paths);
- ``smtp``: trickles its ``220`` greeting.

Each connection is recorded as (opened, closed) monotonic times, where closed is
when the client gave up (the server saw its end of the connection go).
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

BODY = b'[{"never": "complete"}' + b" " * 4096 + b"]"
GREETING = b"220 slow.example ESMTP " + b"." * 4096 + b"\r\n"


@dataclass
class Connection:
    path: str | None
    opened: float
    closed: float | None = None


@dataclass
class Trickle:
    mode: str = "http"
    interval: float = 0.2
    slow_paths: tuple[str, ...] = ()
    connections: list[Connection] = field(default_factory=list)
    port: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def slow(self) -> list[Connection]:
        return [c for c in self.connections if self._is_slow(c.path)]

    def _is_slow(self, path: str | None) -> bool:
        return path is None or not self.slow_paths or path.startswith(self.slow_paths)

    # -- serving ------------------------------------------------------------------

    def _serve(self, sock: socket.socket, stop: threading.Event) -> None:
        with sock:
            sock.settimeout(0.2)
            conn = Connection(path=None, opened=time.monotonic())
            self.connections.append(conn)
            try:
                if self.mode == "smtp":
                    self._drip(sock, GREETING, stop)
                    return
                conn.path = self._read_request(sock, stop)
                if conn.path is None:
                    return
                if not self._is_slow(conn.path):
                    sock.sendall(b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n")
                    return
                if self.mode == "http-silent":
                    self._wait_for_close(sock, stop)
                    return
                head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(BODY)}\r\n\r\n"
                sock.sendall(head.encode())
                self._drip(sock, BODY, stop)
            except OSError:
                pass
            finally:
                conn.closed = time.monotonic()

    def _read_request(self, sock: socket.socket, stop: threading.Event) -> str | None:
        data = b""
        while b"\r\n\r\n" not in data and not stop.is_set():
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                continue
            if not chunk:
                return None
            data += chunk
        first = data.split(b"\r\n", 1)[0].decode("latin-1").split(" ")
        return first[1] if len(first) > 1 else "/"

    def _drip(self, sock: socket.socket, payload: bytes, stop: threading.Event) -> None:
        """One byte every interval, until the client hangs up (a send fails) or the server stops."""
        for i in range(len(payload)):
            if stop.wait(self.interval):
                return
            sock.sendall(payload[i : i + 1])
            if self._peer_gone(sock):
                return

    def _wait_for_close(self, sock: socket.socket, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                if not sock.recv(65536):
                    return
            except TimeoutError:
                continue

    @staticmethod
    def _peer_gone(sock: socket.socket) -> bool:
        try:
            return sock.recv(65536, socket.MSG_DONTWAIT) == b""
        except (BlockingIOError, TimeoutError):
            return False


@contextlib.contextmanager
def trickling(
    mode: str = "http", *, interval: float = 0.2, slow_paths: tuple[str, ...] = ()
) -> Iterator[Trickle]:
    server = Trickle(mode=mode, interval=interval, slow_paths=slow_paths)
    stop = threading.Event()
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.1)
    server.port = listener.getsockname()[1]
    threads: list[threading.Thread] = []

    def accept() -> None:
        while not stop.is_set():
            try:
                sock, _ = listener.accept()
            except TimeoutError:
                continue
            t = threading.Thread(target=server._serve, args=(sock, stop), daemon=True)
            t.start()
            threads.append(t)

    acceptor = threading.Thread(target=accept, daemon=True)
    acceptor.start()
    try:
        yield server
    finally:
        stop.set()
        acceptor.join(timeout=2)
        listener.close()
        for t in threads:
            t.join(timeout=2)
