"""gatehouse-api's gunicorn worker: a thread gets a request only once all of it has arrived.

gunicorn's gthread worker hands a connection to a thread as soon as its first
bytes arrive; the thread then blocks reading the rest of the head and the body.
Eight clients that send half a header (or a header and a stalled body) so held
all 2 × 4 threads, and /healthz timed out for minutes.

``BufferingWorker`` reads every request in the worker's event loop instead, the
way a buffering proxy does: the socket stays non-blocking in the selector and
its bytes pile up in a buffer until the head (``\\r\\n\\r\\n``) and the whole body
(Content-Length bytes, or a chunked body up to its last chunk) are there. Only
then does a thread get the connection, with the bytes already in gunicorn's
parser, so no thread ever waits on a client. A request that is not complete
API_READ_TIMEOUT_MS after its connection was accepted (or its kept-alive
connection became readable) is answered 408 and closed by the event loop.

What is not buffered is still bounded: a head larger than ``HEAD_LIMIT`` is
refused 431 from the loop; a body larger than every route accepts (or one
arriving while the worker's buffers hold ``BUFFER_BUDGET`` bytes) is handed
over with its head — the route refuses it from its Content-Length (413) or
reads the rest until the request's deadline — and the connection is then
closed instead of drained; a thread's socket reads and writes time out
(API_READ_TIMEOUT_MS), so a client that stops reading its response cannot hold
a thread either.

Two more things happen here because this is where a request's bytes are first
seen, before gunicorn parses them:

- A request target holding raw non-ASCII bytes (``GET /search?q=krzesło``, sent
  unencoded by some clients) is accepted: those bytes are percent-encoded
  (``krzes%C5%82o``) before gunicorn's parser, which refuses them, sees the line.
- Whatever gunicorn itself answers (a bad request line or header, a URI or header
  field too long, an error before the app answered) is problem+json like every
  other answer of the API (``write_problem``), not gunicorn's HTML page.
"""

from __future__ import annotations

import contextlib
import json
import re
import selectors
import time
from functools import partial

from gunicorn import util
from gunicorn.workers.gthread import ThreadWorker

from gatehouse_api import root

# A request head larger than this is refused (431): gunicorn's own line limit is
# 8 190 bytes, and nothing we serve needs kilobytes of headers.
HEAD_LIMIT = 65_536
RECV_SIZE = 65_536


def _problem(status: int, reason: str, code: str, detail: str) -> bytes:
    body = json.dumps(
        {"type": "about:blank", "title": reason, "status": status, "detail": detail, "code": code}
    ).encode()
    return (
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/problem+json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode() + body


REQUEST_TIMEOUT = _problem(
    408, "Request Timeout", "REQUEST_TIMEOUT", "the request did not arrive in time (API_READ_TIMEOUT_MS)"
)
HEAD_TOO_LARGE = _problem(
    431,
    "Request Header Fields Too Large",
    "HEADERS_TOO_LARGE",
    f"the request line and headers may be at most {HEAD_LIMIT} bytes",
)
CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
# The codes of what gunicorn answers itself (gunicorn.workers.base.Worker.handle_error).
GUNICORN_CODES = {
    400: "BAD_REQUEST",
    403: "FORBIDDEN",
    414: "URI_TOO_LONG",
    417: "EXPECTATION_FAILED",
    431: "HEADERS_TOO_LARGE",
    500: "INTERNAL_ERROR",
    501: "NOT_IMPLEMENTED",
}
NON_ASCII = re.compile(rb"[\x80-\xff]")


def write_problem(sock, status: int, reason: str, message: str) -> None:
    """gunicorn's ``util.write_error``, as problem+json: what it says, with a stable code."""
    detail = message or ("An unexpected error occurred; it has been logged." if status >= 500 else reason)
    util.write_nonblock(sock, _problem(status, reason, GUNICORN_CODES.get(status, f"HTTP_{status}"), detail))


def encode_target(data: bytes) -> bytes:
    """The request with the raw non-ASCII bytes of its request line's target percent-encoded.

    Only the target (the second of the line's three space-separated parts, as
    gunicorn splits it) changes; a line of another shape is left to gunicorn to judge.
    """
    end = data.find(b"\r\n")
    line = data[: end if end >= 0 else len(data)]
    if not NON_ASCII.search(line):
        return data
    parts = line.split(b" ", 2)
    if len(parts) != 3:
        return data
    target = NON_ASCII.sub(lambda m: b"%%%02X" % m[0][0], parts[1])
    return b" ".join((parts[0], target, parts[2])) + data[len(line) :]


INCOMPLETE, COMPLETE, OVERSIZED, HEAD_OVERSIZED = "incomplete", "complete", "oversized", "head-oversized"
# A head ended by bare line feeds: gunicorn's parser judges it (a 400), from what is buffered.
BARE_LF = "bare-lf"
# Bytes a worker holds in request buffers at most; past it a request goes to a thread as it
# is (its reads bounded by its deadline), so a flood of large bodies cannot exhaust memory.
BUFFER_BUDGET = 64 * 1024 * 1024
# How long a stopping worker still waits for a connection that has sent nothing yet.
STOP_LINGER_S = 2.0


class Pending:
    """A request being read in the event loop: its bytes and how far they were scanned."""

    __slots__ = (
        "body_end",
        "buf",
        "chunk_pos",
        "chunked",
        "continued",
        "deadline",
        "expect_continue",
        "head_end",
        "scanned",
    )

    def __init__(self, data: bytes, deadline: float) -> None:
        self.buf = bytearray(data)
        self.deadline = deadline
        self.head_end: int | None = None  # index just past the head's blank line
        self.body_end: int | None = None  # index just past the body, once known
        self.chunked = False
        self.chunk_pos = 0  # where the next chunk-size line starts
        self.scanned = 0  # how much of the buffer the head search has seen
        self.continued = False  # whether we sent "100 Continue"
        self.expect_continue = False

    def state(self, body_limit: int) -> str:
        """Whether the buffer holds a whole request yet (scanning only what is new)."""
        buf = self.buf
        if self.head_end is None:
            start = max(0, self.scanned - 3)
            found = buf.find(b"\r\n\r\n", start)
            bare = buf.find(b"\n\n", start)
            if bare >= 0 and (found < 0 or bare < found):
                return BARE_LF
            if found < 0:
                self.scanned = len(buf)
                return HEAD_OVERSIZED if len(buf) > HEAD_LIMIT else INCOMPLETE
            if found + 4 > HEAD_LIMIT:
                return HEAD_OVERSIZED
            self.head_end = found + 4
            self._read_head(bytes(buf[: self.head_end]), body_limit)
        if self.body_end is None and self.chunked:
            self._scan_chunks()
        if self.body_end is None:
            return OVERSIZED if len(buf) - self.head_end > body_limit else INCOMPLETE
        if self.body_end - self.head_end > body_limit:
            return OVERSIZED
        return COMPLETE if len(buf) >= self.body_end else INCOMPLETE

    def _read_head(self, head: bytes, body_limit: int) -> None:
        lines = head.split(b"\r\n")
        lengths, codings = [], []
        for line in lines[1:]:
            name, sep, value = line.partition(b":")
            if not sep:
                continue
            name = name.strip().lower()
            if name == b"content-length":
                lengths.append(value.strip())
            elif name == b"transfer-encoding":
                codings.append(value.strip().lower())
            elif name == b"expect" and value.strip().lower() == b"100-continue":
                self.expect_continue = lines[0].endswith(b"HTTP/1.1")
        if codings and b"chunked" in b",".join(codings):
            if lengths:  # both: gunicorn refuses the request from its head alone
                self.body_end = self.head_end
            else:
                self.chunked = True
                self.chunk_pos = self.head_end
            return
        if len(lengths) == 1 and lengths[0].isdigit():
            length = int(lengths[0])
            # Past the limit the body is never waited for: the route refuses it from its head.
            self.body_end = self.head_end + (length if length <= body_limit else body_limit + 1)
            return
        # No body, or a head gunicorn refuses (several or bad lengths): nothing more to wait for.
        self.body_end = self.head_end

    def _scan_chunks(self) -> None:
        buf = self.buf
        while True:
            line_end = buf.find(b"\r\n", self.chunk_pos)
            if line_end < 0:
                return
            size_text = bytes(buf[self.chunk_pos : line_end]).split(b";", 1)[0].strip()
            try:
                size = int(size_text, 16)
            except ValueError:
                # A malformed chunk: gunicorn's parser refuses it from what is buffered.
                self.body_end = line_end + 2
                return
            if size == 0:
                # The last chunk, then trailers (if any) up to a blank line.
                end = buf.find(b"\r\n\r\n", line_end)
                if end >= 0:
                    self.body_end = end + 4
                return
            next_pos = line_end + 2 + size + 2
            if next_pos > len(buf):
                return
            self.chunk_pos = next_pos


class BufferingWorker(ThreadWorker):
    """gthread, except that a request is read in the event loop before a thread gets it."""

    def init_process(self) -> None:
        settings = root.settings()
        self.read_timeout = settings.api_read_timeout_ms / 1000
        # The largest body any route accepts; a larger one is not waited for.
        self.body_limit = max(settings.max_body_bytes, settings.catalog_batch_max_body_bytes)
        # TLS and HTTP/2 read in their own ways: those keep gthread's behaviour.
        self.buffering = not self.cfg.is_ssl and getattr(self.cfg, "http2_cleartext", "off") == "off"
        self.reading: dict = {}  # conn → Pending, in deadline order
        self.buffered = 0  # bytes in the buffers of self.reading
        self.stopping_at: float | None = None
        # gunicorn's own answers (handle_error) go out through util.write_error: problem+json here.
        util.write_error = write_problem
        super().init_process()

    # Every way a connection reaches a thread (accepted, kept alive and readable
    # again, read-ahead of a pipelined request) goes through enqueue_req.
    def enqueue_req(self, conn) -> None:
        if not self.buffering or getattr(conn, "gh_ready", False):
            conn.gh_ready = False
            super().enqueue_req(conn)
            return
        data = conn.parser.unreader.take_buffered() if conn.parser is not None else b""
        pending = Pending(data, time.monotonic() + self.read_timeout)
        self.reading[conn] = pending
        conn.sock.setblocking(False)
        self.poller.register(conn.sock, selectors.EVENT_READ, partial(self._on_readable, conn))
        self._on_readable(conn)

    def _on_readable(self, conn, _fileobj=None) -> None:
        pending = self.reading.get(conn)
        if pending is None:
            return
        eof = False
        try:
            while len(pending.buf) <= HEAD_LIMIT + self.body_limit:
                data = conn.sock.recv(RECV_SIZE)
                if not data:
                    eof = True
                    break
                pending.buf += data
                self.buffered += len(data)
                if self.buffered > BUFFER_BUDGET:
                    break
        except (BlockingIOError, InterruptedError):
            pass
        except OSError:
            self._drop(conn)
            return
        state = pending.state(self.body_limit)
        if state == COMPLETE:
            self._dispatch(conn, pending, partial_body=False)
        elif state in (OVERSIZED, BARE_LF) or (
            # (a head is always buffered whole: a thread must never wait for one)
            self.buffered > BUFFER_BUDGET and pending.head_end is not None and not eof
        ):
            self._dispatch(conn, pending, partial_body=True)
        elif state == HEAD_OVERSIZED:
            self._drop(conn, HEAD_TOO_LARGE)
        elif eof:
            self._drop(conn)
        elif pending.head_end is not None and not pending.continued and pending.expect_continue:
            pending.continued = True
            self._send(conn, CONTINUE)

    def _dispatch(self, conn, pending: Pending, *, partial_body: bool) -> None:
        del self.reading[conn]
        self.buffered -= len(pending.buf)
        self.poller.unregister(conn.sock)
        conn.sock.setblocking(True)
        if not conn.initialized:
            conn.init()  # plain HTTP/1: makes the parser, reads nothing
        conn.parser.unreader.unread(encode_target(bytes(pending.buf)))
        conn.data_ready = True
        conn.gh_deadline = pending.deadline
        conn.gh_partial_body = partial_body
        conn.gh_ready = True
        super().enqueue_req(conn)

    def _send(self, conn, data: bytes) -> None:
        with contextlib.suppress(OSError):
            conn.sock.send(data)

    def _drop(self, conn, answer: bytes | None = None) -> None:
        pending = self.reading.pop(conn, None)
        if pending is not None:
            self.buffered -= len(pending.buf)
        with contextlib.suppress(KeyError, ValueError, OSError):
            self.poller.unregister(conn.sock)
        if answer is not None:
            self._send(conn, answer)
        self.nr_conns -= 1
        conn.close()

    def murder_pending(self) -> None:
        super().murder_pending()
        now = time.monotonic()
        if not self.alive:
            # Stopping: a connection that has sent nothing gets STOP_LINGER_S more, not its deadline.
            self.stopping_at = self.stopping_at or now
            if now - self.stopping_at >= STOP_LINGER_S:
                for conn in [c for c, p in self.reading.items() if not p.buf]:
                    self._drop(conn)
        while self.reading:
            conn, pending = next(iter(self.reading.items()))
            if pending.deadline > now:
                break
            # Only a client that sent something is told; an idle socket is just closed.
            self._drop(conn, REQUEST_TIMEOUT if pending.buf else None)

    def handle_request(self, req, conn):
        if self.buffering:
            # The body is buffered (reads cannot block) unless it was too large; either
            # way no read or write of this thread waits on the client past the deadline.
            remaining = conn.gh_deadline - time.monotonic()
            conn.sock.settimeout(max(remaining, 0.1) if conn.gh_partial_body else self.read_timeout)
        return super().handle_request(req, conn)

    def _keepalive_after(self, conn, keepalive):
        # A body not buffered is not drained from a client that may never send it.
        if self.buffering and conn.gh_partial_body:
            return False
        return super()._keepalive_after(conn, keepalive)
