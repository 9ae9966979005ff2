"""Slow and hostile clients cost gatehouse-api a buffer, never a thread (gatehouse_api.buffering)."""

from __future__ import annotations

import contextlib
import json
import re
import socket
import time
from collections.abc import Iterator

import httpx

from tests.conftest import ADMIN_TOKEN
from tests.support.processes import wait_until

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
FEEDS = {"kind": "feeds", "dateFrom": "2026-10-01", "dateTo": "2026-10-31"}
# The promise; generous enough for a 2-core machine shared with other test runs.
WITHIN_S = 1.0


def host_port(url: str) -> tuple[str, int]:
    host, port = url.removeprefix("http://").split(":")
    return host, int(port)


@contextlib.contextmanager
def stalled(url: str, prefixes: list[bytes]) -> Iterator[list[socket.socket]]:
    """One socket per prefix: connected, the prefix sent, then silence; all closed at the end."""
    socks: list[socket.socket] = []
    try:
        for prefix in prefixes:
            sock = socket.create_connection(host_port(url), timeout=5)
            sock.sendall(prefix)
            socks.append(sock)
        yield socks
    finally:
        for sock in socks:
            sock.close()


def half_header(path: str = "/healthz") -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ".encode()


def stalled_body(account: str) -> bytes:
    body = json.dumps(FEEDS).encode()
    head = (
        f"POST /v1/accounts/{account}/digitization/imports HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Authorization: Bearer {ADMIN_TOKEN}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    return head + body[: len(body) // 2]


def stalled_chunked(account: str) -> bytes:
    return (
        f"POST /v1/accounts/{account}/digitization/imports HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Authorization: Bearer {ADMIN_TOKEN}\r\nContent-Type: application/json\r\n"
        'Transfer-Encoding: chunked\r\n\r\n5\r\n{"kin'
    ).encode()


def timed(call) -> tuple[httpx.Response, float]:
    started = time.monotonic()
    response = call()
    return response, time.monotonic() - started


def create_account(url: str) -> str:
    response = httpx.post(
        f"{url}/v1/accounts", json={"name": "Shop", "wbToken": "t"}, headers=ADMIN, timeout=10
    )
    assert response.status_code == 201, response.text
    return response.json()["accountId"]


def test_50_stalled_headers_and_stalled_bodies_leave_healthz_and_a_post_within_a_second(processes):
    # Given the API alone on gunicorn's 2 workers × 4 threads (8 threads in all)
    _, url = processes.api(env={"BACKEND_ROLE": "api", "API_WORKERS": "2", "API_THREADS": "4"})
    account = create_account(url)
    other = create_account(url)

    # When 50 sockets sent half a request head, 10 a head and half a Content-Length body,
    # and 4 a head and the first chunk of a chunked body — then all of them stall
    prefixes = (
        [half_header() for _ in range(50)]
        + [stalled_body(account) for _ in range(10)]
        + [stalled_chunked(account) for _ in range(4)]
    )
    with stalled(url, prefixes) as socks, httpx.Client(timeout=5) as client:
        # Then /healthz and a POST on fresh connections answer within a second, again and again
        for _ in range(5):
            health, health_s = timed(lambda: client.get(f"{url}/healthz", headers={"Connection": "close"}))
            post, post_s = timed(
                lambda: client.post(
                    f"{url}/v1/accounts/{other}/autobidder/sync",
                    json={},
                    headers={**ADMIN, "Connection": "close"},
                )
            )
            assert health.status_code == 200 and health_s < WITHIN_S, (health.status_code, health_s)
            assert post.status_code == 202 and post_s < WITHIN_S, (post.status_code, post_s, post.text)
        # … and a stalled body that finally arrives is served as the request it is
        rest = json.dumps(FEEDS).encode()
        socks[50].sendall(rest[len(rest) // 2 :])
        socks[50].settimeout(5)
        answer = socks[50].recv(65536)
        assert answer.startswith(b"HTTP/1.1 202"), answer[:200]


def test_a_request_that_never_completes_is_answered_408_and_closed(processes):
    # Given an API whose requests must arrive within 500 ms
    _, url = processes.api(env={"BACKEND_ROLE": "api", "API_READ_TIMEOUT_MS": "500"})

    # When one client sends half a head, one sends bytes slowly (a byte every 100 ms), one sends nothing
    with stalled(url, [half_header(), b"G", b""]) as (half, trickle, idle):
        started = time.monotonic()
        for sock in (half, trickle, idle):
            sock.settimeout(5)
        for byte in b"ET /healthz HTTP/1.1\r\nX-Slow: ":
            if time.monotonic() - started > 1.5:
                break
            try:
                trickle.send(bytes([byte]))
            except OSError:
                break  # closed by the server: what we are waiting for
            time.sleep(0.1)  # the trickle itself, not synchronisation

        # Then the first two are answered 408 (problem+json, a stable code) and every one is closed
        for sock in (half, trickle):
            answer = b""
            while chunk := sock.recv(65536):
                answer += chunk
            head, _, body = answer.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 408"), answer
            assert b"application/problem+json" in head
            assert json.loads(body)["code"] == "REQUEST_TIMEOUT"
        assert idle.recv(65536) == b""
        assert time.monotonic() - started < 4

    # … and the API still serves, on a kept-alive connection too
    with httpx.Client(timeout=5) as client:
        assert [client.get(f"{url}/healthz").status_code for _ in range(3)] == [200, 200, 200]


def test_pipelined_chunked_and_expect_continue_requests_are_served(processes):
    # Given the API alone
    _, url = processes.api(env={"BACKEND_ROLE": "api"})
    account = create_account(url)
    body = json.dumps(FEEDS).encode()

    with socket.create_connection(host_port(url), timeout=5) as sock:
        # When one connection pipelines two GETs, a chunked POST (sent in pieces) and an Expect: 100-continue POST
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        chunked = (
            (
                f"POST /v1/accounts/{account}/digitization/imports HTTP/1.1\r\nHost: x\r\n"
                f"Authorization: Bearer {ADMIN_TOKEN}\r\nContent-Type: application/json\r\n"
                "Transfer-Encoding: chunked\r\n\r\n"
            ).encode()
            + f"{len(body):x}\r\n".encode()
            + body
            + b"\r\n0\r\n\r\n"
        )
        sock.sendall(chunked[:60])
        sock.sendall(chunked[60:])
        expect = (
            f"POST /v1/accounts/{account}/autobidder/sync HTTP/1.1\r\nHost: x\r\n"
            f"Authorization: Bearer {ADMIN_TOKEN}\r\nContent-Type: application/json\r\n"
            "Expect: 100-continue\r\nContent-Length: 2\r\n\r\n"
        ).encode()
        sock.sendall(expect)
        received = b""

        def got(marker: bytes, count: int) -> bool:
            nonlocal received
            received += sock.recv(65536)
            return received.count(marker) >= count

        # Then the server says 100 Continue before the body is sent …
        wait_until(lambda: got(b"100 Continue", 1), timeout=5, what="100 Continue")
        sock.sendall(b"{}")
        # … and answers all four in order
        wait_until(lambda: got(b"HTTP/1.1 2", 4), timeout=5, what="four answers")
    statuses = re.findall(rb"HTTP/1\.1 (\d{3}) ", received)
    assert statuses == [b"200", b"200", b"202", b"100", b"202"], received


def test_what_is_not_buffered_is_answered_at_once(processes):
    # Given the API alone
    _, url = processes.api(env={"BACKEND_ROLE": "api"})

    def answer(request: bytes) -> bytes:
        with socket.create_connection(host_port(url), timeout=5) as sock:
            sock.sendall(request)
            received = b""
            while chunk := sock.recv(65536):  # until the server closes
                received += chunk
            return received

    started = time.monotonic()
    # When a head is over 64 KiB, then a body is announced far over every limit (and never sent),
    # then a head ends in bare line feeds
    huge_head = answer(b"GET /healthz HTTP/1.1\r\nX-Big: " + b"a" * 70_000 + b"\r\n\r\n")
    huge_body = answer(
        f"POST /v1/accounts HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {ADMIN_TOKEN}\r\n"
        "Content-Type: application/json\r\nContent-Length: 100000000\r\n\r\n{".encode()
    )
    bare = answer(b"GET /healthz HTTP/1.1\nHost: x\n\n")

    # Then each is answered and closed at once: 431 and 413 as problem+json, 400 by gunicorn
    assert huge_head.startswith(b"HTTP/1.1 431") and b'"HEADERS_TOO_LARGE"' in huge_head, huge_head[:300]
    assert huge_body.startswith(b"HTTP/1.1 413") and b"application/problem+json" in huge_body, huge_body[:300]
    assert bare.startswith(b"HTTP/1.1 400"), bare[:300]
    assert time.monotonic() - started < 5
