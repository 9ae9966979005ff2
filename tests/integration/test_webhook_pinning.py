"""A delivery connects to the address its run checked (gatehouse.webhooks.pinning), in this process:
the real handlers, PostgreSQL, Redis and transport, receivers on loopback.

The resolver is a stub wherever an answer must lie: its "public" address (a literal) is only ever
judged, never dialled — every connect goes through ``dialled``, which fails the test on any address
off loopback.
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import socket
import uuid
from collections.abc import Iterator

import pytest
from httpcore._backends.sync import SyncBackend

from gatehouse.composition import Components, bootstrap
from gatehouse.webhooks import sender
from gatehouse.webhooks.handlers import DeliveryFailed, WebhookHandlers
from gatehouse.webhooks.safety import Guard
from tests.support.receiver import Receiver

PUBLIC = "93.184.216.34"


@pytest.fixture
def wh(settings, clean) -> Iterator[Components]:
    gatehouse = bootstrap(settings.model_copy(update={"webhook_allowed_hosts": ["127.0.0.0/8", "::1"]}))
    yield gatehouse
    gatehouse.close()


@pytest.fixture
def dialled(monkeypatch) -> list[tuple[str, int]]:
    """Every TCP connect httpx makes, as (host, port); one to anything but loopback fails the test."""
    seen: list[tuple[str, int]] = []
    real = SyncBackend.connect_tcp

    def connect_tcp(self, host, port, *args, **kwargs):
        seen.append((host, port))
        assert host == "localhost" or ipaddress.ip_address(host).is_loopback, f"dialled {host}"
        return real(self, host, port, *args, **kwargs)

    monkeypatch.setattr(SyncBackend, "connect_tcp", connect_tcp)
    return seen


def deliver(wh: Components, handlers: WebhookHandlers, endpoint_id: uuid.UUID):
    """One run of a test event's job; the delivery's attempts after it."""
    delivery_id = handlers.send_test(endpoint_id)
    job_id = wh.webhooks.get_delivery(delivery_id)[0].job_id
    with contextlib.suppress(DeliveryFailed):  # a failed attempt: its row says why
        handlers.deliver(job_id, str(endpoint_id), run=1, attempt=1, max_attempts=8, ensure_held=lambda: None)
    return wh.webhooks.get_delivery(delivery_id)[1]


def test_a_delivery_to_an_allowed_name_connects_to_its_checked_address_with_its_host_header(
    wh, dialled, caplog
):
    receiver = Receiver()
    try:
        url = f"http://localhost:{receiver.port}/hook?token=s3cr3t"
        endpoint = wh.webhook_handlers.create_endpoint(url, event_types=None, description="")
        receiver.secrets.append(endpoint.secret)

        with caplog.at_level(logging.INFO, "gatehouse.webhooks"):
            [attempt] = deliver(wh, wh.webhook_handlers, endpoint.endpoint.id)

        assert attempt.status_code == 200, attempt
        [received] = receiver.received
        assert received.verified_by == (0,)
        assert received.headers["host"] == f"localhost:{receiver.port}"  # the name, as written
        assert dialled and all(
            ipaddress.ip_address(host).is_loopback for host, _ in dialled
        )  # never the name
        assert dialled[-1] == ("127.0.0.1", receiver.port)
        # The run's log line names the URL by scheme and host: a receiver's token stays out of the log.
        assert "1 of 1 deliveries to http://localhost delivered" in caplog.text
        assert "s3cr3t" not in caplog.text
    finally:
        receiver.stop()


@pytest.mark.parametrize(
    ("answers", "lookups"),
    [
        ([[PUBLIC], [PUBLIC], ["127.0.0.1"]], 3),  # rebinding: public at the run's check, loopback at connect
        ([[PUBLIC], ["127.0.0.1"], ["127.0.0.1"]], 2),  # loopback at the check: refused before connecting
    ],
    ids=["rebinding-at-connect", "loopback-at-check"],
)
def test_a_name_that_turns_to_loopback_is_refused_and_nothing_connects(
    wh, dialled, monkeypatch, answers, lookups
):
    asked: list[str] = []

    def resolve(host: str, port: int) -> list[str]:  # answers in turn: the endpoint's creation, then the run
        asked.append(host)
        return answers[min(len(asked), len(answers)) - 1]

    guard = Guard(resolve=resolve)  # no allowlist: loopback is forbidden
    monkeypatch.setattr(wh.webhooks, "guard", guard)
    transport = sender.transport(guard)
    handlers = WebhookHandlers(
        wh.uow,
        wh.webhooks,
        wh.webhook_slots,
        wh.notifications,
        transport=lambda: transport,
        max_per_endpoint=4,
        timeout_ms=2_000,
        attempts=8,
    )
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        endpoint = handlers.create_endpoint(
            f"https://localhost:{port}/hook", event_types=None, description=""
        )

        [attempt] = deliver(wh, handlers, endpoint.endpoint.id)

        listener.setblocking(False)
        with pytest.raises(BlockingIOError):
            listener.accept()  # nobody knocked
    transport.close()
    assert attempt.status_code is None and attempt.error == "refused: the webhook URL's host is not allowed"
    assert len(asked) == lookups and dialled == []
