"""Total deadlines (gatehouse.deadlines) against servers on 127.0.0.1 that trickle one byte at a time.

Each byte comes far within the per-read timeout, so each call below would run
for minutes (the whole trickled answer) without a deadline over the exchange.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from email.message import EmailMessage

import httpx
import pytest

from gatehouse import deadlines
from gatehouse.wb import client as wb
from gatehouse.wb.errors import WbTimeout
from gatehouse.webhooks import sender
from gatehouse_worker.jobs.notifications import SmtpServer, send
from tests.support.receiver import LOOPBACK_GUARD
from tests.support.trickle import trickling

SLACK_S = 0.6  # the server notices a hang-up at its next byte (0.1 s) + scheduling


@contextlib.contextmanager
def wb_client(url: str, deadline_ms: int, timeout_ms: int = 30_000) -> Iterator[wb.WbClient]:
    http = wb.WbHttp(timeout_ms=timeout_ms)
    try:
        yield wb.WbClient(http, lambda service: url, "token", deadline_ms=deadline_ms)
    finally:
        http.close()


def test_a_wb_answer_that_trickles_is_cut_at_the_call_deadline():
    with trickling(interval=0.1) as server, wb_client(server.url, deadline_ms=1_000) as client:
        start = time.monotonic()
        with pytest.raises(WbTimeout):
            client.call(wb.ORDERS, params={"dateFrom": "2026-01-01"})
        took = time.monotonic() - start
    assert 0.9 < took < 1.0 + SLACK_S
    (conn,) = server.connections
    assert conn.closed is not None and conn.closed - conn.opened < 1.0 + SLACK_S


def test_a_wb_call_ends_by_the_enclosing_deadline_when_that_is_earlier():
    # A run's time limit (the thread's deadline) cuts a silent WB call short of its own deadline.
    with trickling("http-silent") as server, wb_client(server.url, deadline_ms=60_000) as client:
        start = time.monotonic()
        with deadlines.within(0.5), pytest.raises(WbTimeout):
            client.call(wb.ORDERS)
        assert time.monotonic() - start < 0.5 + SLACK_S


def test_a_webhook_receiver_that_trickles_its_answer_is_cut_at_the_attempt_deadline():
    with trickling(interval=0.1) as server:
        transport = sender.transport(LOOPBACK_GUARD)
        start = time.monotonic()
        answer = sender.post(transport, httpx.URL(server.url + "/hook"), "{}", {}, 1.0)
        took = time.monotonic() - start
        transport.close()
    assert answer.error == "timeout after 1 s" and not answer.ok
    assert 0.9 < took < 1.0 + SLACK_S and answer.duration_ms < 1_000 + SLACK_S * 1000


def test_an_smtp_server_that_trickles_its_greeting_is_cut_at_the_exchange_deadline():
    msg = EmailMessage()
    msg["From"], msg["To"], msg["Subject"] = "a@example.test", "b@example.test", "hello"
    msg.set_content("hello")
    with trickling("smtp", interval=0.1) as server:
        start = time.monotonic()
        with pytest.raises(TimeoutError, match="did not end within 1 s"):
            send(SmtpServer("127.0.0.1", server.port, tls=False), msg, 1.0)
        took = time.monotonic() - start
    assert 0.9 < took < 1.0 + SLACK_S
