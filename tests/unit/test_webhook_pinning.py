"""Webhook connections go to the addresses the SSRF guard checked (gatehouse.webhooks.pinning), through
httpcore's real connection code over a recording backend: nothing is dialled, no name goes to DNS."""

from __future__ import annotations

import logging

import httpcore
import pytest

from gatehouse.webhooks.pinning import PinnedBackend
from gatehouse.webhooks.safety import FORBIDDEN, NOT_ALLOWED, Allowlist, Guard, UrlRefused

PUBLIC = "93.184.216.34"  # a literal, never connected to: the recording backend dials nothing
PUBLIC_V6 = "2606:2800:220:1:248:1893:25c8:1946"


class Stop(httpcore.ConnectError):
    pass


class Recorded(httpcore.NetworkBackend):
    """Records each connect (and the TLS server name asked of it) and fails it, or fails ``refusing``."""

    def __init__(self, refusing: tuple[str, ...] = ()) -> None:
        self.connects: list[tuple[str, int]] = []
        self.server_names: list[tuple[str | None, bool]] = []
        self.refusing = refusing

    def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        self.connects.append((host, port))
        if host in self.refusing:
            raise httpcore.ConnectError(f"{host} refused")
        recorded = self

        class Stream(httpcore.NetworkStream):
            def start_tls(self, ssl_context, server_hostname=None, timeout=None):
                recorded.server_names.append((server_hostname, ssl_context.check_hostname))
                raise Stop("recorded")

            def write(self, buffer, timeout=None):
                raise Stop("recorded")

            def close(self):
                pass

        return Stream()


def dns(table: dict[str, list[str]]):
    asked: list[str] = []

    def resolve(host: str, port: int) -> list[str]:
        asked.append(host)
        return table[host]

    resolve.asked = asked
    return resolve


def send(backend: httpcore.NetworkBackend, url: str) -> None:
    with httpcore.ConnectionPool(network_backend=backend) as pool:
        pool.request("POST", url, content=b"{}")


def test_a_connection_goes_to_the_checked_address_with_the_urls_host_as_tls_server_name():
    recorded, resolve = Recorded(), dns({"hooks.example": [PUBLIC]})

    with pytest.raises(Stop):
        send(PinnedBackend(recorded, Guard(resolve=resolve)), "https://hooks.example/hook")

    assert resolve.asked == ["hooks.example"]  # once, by the guard
    assert recorded.connects == [(PUBLIC, 443)]  # the address, never the name
    assert recorded.server_names == [("hooks.example", True)]  # SNI and certificate check: the name


def test_an_address_that_does_not_answer_hands_over_to_the_next_checked_one():
    recorded = Recorded(refusing=(PUBLIC_V6,))
    guard = Guard(resolve=dns({"hooks.example": [PUBLIC_V6, PUBLIC]}))

    with pytest.raises(Stop):
        send(PinnedBackend(recorded, guard), "http://hooks.example:8080/hook")

    assert recorded.connects == [(PUBLIC_V6, 8080), (PUBLIC, 8080)]


@pytest.mark.parametrize("answer", [["127.0.0.1"], [PUBLIC, "10.0.0.5"], ["::ffff:169.254.169.254"]], ids=str)
def test_a_name_answering_any_forbidden_address_is_refused_before_any_connect(answer, caplog):
    recorded = Recorded()

    guard = Guard(resolve=dns({"rebind.example": answer}))
    with caplog.at_level(logging.INFO, "gatehouse.webhooks.safety"), pytest.raises(UrlRefused) as refused:
        send(PinnedBackend(recorded, guard), "https://rebind.example/")

    assert recorded.connects == []
    assert (refused.value.code, refused.value.detail) == (FORBIDDEN, NOT_ALLOWED)
    assert f"rebind.example resolves to {answer[-1]}" in caplog.text  # the details: the log's


def test_a_literal_address_is_judged_without_dns_and_an_allowlisted_one_goes_through():
    recorded, resolve = Recorded(), dns({})
    guard = Guard(Allowlist.parse(["127.0.0.0/8"]), resolve)

    with pytest.raises(Stop):
        send(PinnedBackend(recorded, guard), "http://127.0.0.1:9/hook")
    with pytest.raises(UrlRefused):
        send(PinnedBackend(recorded, guard), "http://[::1]:9/hook")

    assert recorded.connects == [("127.0.0.1", 9)] and resolve.asked == []
