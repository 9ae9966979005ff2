"""One attempt's HTTP (gatehouse.webhooks.sender) against raw local servers: what it reads, keeps and follows."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator

import httpx
import pytest

from gatehouse.webhooks import sender
from tests.support.receiver import LOOPBACK_GUARD

REQUEST_END = b"\r\n\r\n"


@pytest.fixture
def serve() -> Iterator[Callable[[Callable[[socket.socket], None]], tuple[httpx.URL, list[bytes]]]]:
    """A one-thread TCP server on 127.0.0.1 running ``answer(conn)`` per connection; yields URL and request heads."""
    stops: list[Callable[[], None]] = []

    def start(answer: Callable[[socket.socket], None]) -> tuple[httpx.URL, list[bytes]]:
        listener = socket.create_server(("127.0.0.1", 0))
        heads: list[bytes] = []

        def loop() -> None:
            while True:
                try:
                    conn, _ = listener.accept()
                except OSError:
                    return
                with conn:
                    while True:
                        data = b""
                        while REQUEST_END not in data:
                            chunk = conn.recv(65536)
                            if not chunk:
                                break
                            data += chunk
                        if REQUEST_END not in data:
                            break
                        head, _, rest = data.partition(REQUEST_END)
                        length = next(
                            (int(v) for k, _, v in (line.partition(b":") for line in head.split(b"\r\n"))
                             if k.strip().lower() == b"content-length"),
                            0,
                        )  # fmt: skip
                        while len(rest) < length:
                            rest += conn.recv(65536)
                        heads.append(head)
                        try:
                            answer(conn)
                        except OSError:
                            break  # the client closed: what a capped read does

        thread = threading.Thread(target=loop, daemon=True)
        thread.start()
        stops.append(listener.close)
        return httpx.URL(f"http://127.0.0.1:{listener.getsockname()[1]}/hook"), heads

    yield start
    for stop in stops:
        stop()


def post(
    url: httpx.URL, transport: httpx.HTTPTransport | None = None, timeout_s: float = 5.0
) -> sender.Answer:
    transport = transport or sender.transport(LOOPBACK_GUARD)
    return sender.post(transport, url, '{"type":"webhook.test"}', {"webhook-id": "msg_1"}, timeout_s)


def test_an_endless_answer_is_read_up_to_the_cap_and_the_attempt_counts_its_status(serve):
    def endless(conn: socket.socket) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
        chunk = b"x" * 16384
        while True:  # until the sender closes the connection
            conn.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))

    url, _ = serve(endless)
    answer = post(url, timeout_s=10)
    assert answer.ok and answer.status_code == 200, answer
    assert answer.excerpt == "x" * 4096 and answer.duration_ms < 5_000  # not read to the timeout


def test_a_redirect_is_answered_not_followed_and_a_cookie_is_never_sent_back(serve):
    def redirect(conn: socket.socket) -> None:
        conn.sendall(
            b"HTTP/1.1 307 Temporary Redirect\r\nlocation: /elsewhere\r\nset-cookie: session=s3cr3t; Path=/\r\n"
            b"content-length: 0\r\n\r\n"
        )

    url, heads = serve(redirect)
    transport = sender.transport(LOOPBACK_GUARD)
    first, second = post(url, transport), post(url, transport)
    assert (first.status_code, first.ok, second.status_code) == (307, False, 307)
    assert len(heads) == 2 and all(h.startswith(b"POST /hook ") for h in heads)  # never /elsewhere
    assert b"cookie" not in heads[1].lower()
    assert f"user-agent: {sender.USER_AGENT}".lower().encode() in heads[0].lower()


def test_a_silent_server_is_a_timeout_and_a_closed_port_a_connection_error(serve):
    url, _ = serve(lambda conn: conn.recv(1))  # reads, never answers (blocks until the sender gives up)
    answer = post(url, timeout_s=0.5)
    assert answer.status_code is None and answer.error == "timeout after 0.5 s"

    closed = socket.create_server(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()
    answer = post(httpx.URL(f"http://127.0.0.1:{port}/hook"))
    assert answer.status_code is None and answer.error.startswith("ConnectError")
