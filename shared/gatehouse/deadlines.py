"""Total deadlines: connect plus every read and write of an exchange, together, end by one instant.

A socket timeout (httpx's ``timeout=``, smtplib's ``timeout``) bounds each
operation alone: a server that sends one byte every few seconds never trips it,
and would hold a worker thread, its job and its account's gate for ever. So the
calling thread carries a deadline (``within``); nested deadlines keep the
earliest (a WB call's inside its run's time limit), and every socket wait is
clamped to what is left of it:

- HTTP: ``transport()`` is httpx's transport (``client()`` bounds those of a
  Client) whose network streams wait at most min(the operation's own timeout,
  what is left) in each read, write and connect, and fail at once when nothing
  is left (httpx raises its ``ReadTimeout``/``WriteTimeout``/``ConnectTimeout``);
- a blocking exchange that reads through a file (smtplib): ``shut_at_deadline``
  shuts its socket down when the deadline passes, which wakes the blocked read.

The deadline is thread-local: a job body and the HTTP calls it makes run in its
worker thread (httpx's sync client does its I/O in the calling thread). A job
run's own deadline (its run time limit) is the thread's outermost one
(``reset``, gatehouse_worker.time_limits).
"""

from __future__ import annotations

import contextlib
import math
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpcore
import httpx

_local = threading.local()


class DeadlinePassed(TimeoutError):
    """The thread's deadline has passed: the exchange stops here."""


def current() -> float | None:
    """The thread's deadline (``time.monotonic()`` seconds), or None when it has none."""
    return getattr(_local, "deadline", None)


def remaining() -> float:
    """Seconds left before the thread's deadline (may be <= 0); infinite without one."""
    deadline = current()
    return math.inf if deadline is None else deadline - time.monotonic()


@contextlib.contextmanager
def within(seconds: float | None) -> Iterator[None]:
    """Everything in the block ends ``seconds`` from now, or at the enclosing deadline if that is earlier."""
    outer = current()
    mine = None if seconds is None else time.monotonic() + seconds
    _local.deadline = outer if mine is None else mine if outer is None else min(mine, outer)
    try:
        yield
    finally:
        _local.deadline = outer


def reset(instant: float | None) -> None:
    """Set the thread's outermost deadline (a job run's), whatever was set before, or clear it (None).

    For the job runtime, at the start and end of a run: an exception raised into the thread
    from outside (a run time limit's interrupt) may skip a ``within`` block's restore.
    """
    _local.deadline = instant


def clamp(timeout: float | None) -> float | None:
    """One socket wait: its own ``timeout`` or what is left, whichever is shorter.

    Raises DeadlinePassed when nothing is left (a zero timeout would mean
    "non-blocking", not "give up").
    """
    left = remaining()
    if left <= 0:
        raise DeadlinePassed("the deadline has passed")
    if left == math.inf:
        return timeout
    return left if timeout is None else min(timeout, left)


# -- HTTP (httpx over httpcore) ------------------------------------------------------------


class _Stream(httpcore.NetworkStream):
    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _clamped(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _clamped(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None):
        return _Stream(
            self._inner.start_tls(ssl_context, server_hostname, _clamped(timeout, httpcore.ConnectTimeout))
        )

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _Backend(httpcore.NetworkBackend):
    def __init__(self, inner: httpcore.NetworkBackend) -> None:
        self._inner = inner

    def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        return _Stream(
            self._inner.connect_tcp(
                host, port, _clamped(timeout, httpcore.ConnectTimeout), local_address, socket_options
            )
        )

    def connect_unix_socket(self, path, timeout=None, socket_options=None):
        return _Stream(
            self._inner.connect_unix_socket(path, _clamped(timeout, httpcore.ConnectTimeout), socket_options)
        )

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


def _clamped(timeout: float | None, error: type[Exception]) -> float | None:
    try:
        return clamp(timeout)
    except DeadlinePassed:
        raise error("the exchange's total deadline has passed") from None


def transport(
    network: Callable[[httpcore.NetworkBackend], httpcore.NetworkBackend] | None = None, **options: Any
) -> httpx.HTTPTransport:
    """httpx's HTTPTransport (``options`` as for it) whose sockets never wait past the thread's deadline.

    ``network`` wraps the bounded network backend (where connections go: gatehouse.webhooks.pinning);
    each connect it makes is bounded like any other.
    """
    http = _bound(httpx.HTTPTransport(**options))
    if network is not None:
        http._pool._network_backend = network(http._pool._network_backend)
    return http


def client(http: httpx.Client) -> httpx.Client:
    """``http`` with every transport it built (its own, and one per proxy the environment names)
    bounded like ``transport()``'s; a transport given to it that is not httpx's (a test's) stays."""
    for each in (http._transport, *http._mounts.values()):
        if isinstance(each, httpx.HTTPTransport):
            _bound(each)
    return http


def _bound(http: httpx.HTTPTransport) -> httpx.HTTPTransport:
    # httpx has no public hook for its network backend, so its pool's backend is wrapped in place
    # (tests/unit/test_deadlines.py holds httpx to it).
    pool = http._pool
    if not isinstance(pool._network_backend, _Backend):
        pool._network_backend = _Backend(pool._network_backend)
    return http


# -- blocking exchanges over a socket file (smtplib) ----------------------------------------------


@contextlib.contextmanager
def shut_at_deadline(sock_of: Callable[[], socket.socket | None]) -> Iterator[None]:
    """Shut down the socket ``sock_of()`` names once the thread's deadline passes, until the block ends.

    A shut-down socket wakes a read blocked in another thread (close alone does
    not), so the exchange ends with a connection error at the deadline at the latest.
    """
    left = remaining()
    if left == math.inf:
        yield
        return

    def shut() -> None:
        sock = sock_of()
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    timer = threading.Timer(max(0.0, left), shut)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
