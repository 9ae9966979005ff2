"""Which address a request is counted under by the authentication throttle (issue 26)."""

from __future__ import annotations

from ipaddress import ip_network

import pytest
from falcon import testing

from gatehouse.auth_throttle import address_key
from gatehouse_api.auth import client_address

PROXIES = [ip_network("10.0.0.0/8"), ip_network("fd00::/8")]


@pytest.mark.parametrize(
    ("peer", "forwarded", "trusted", "client"),
    [
        ("203.0.113.5", "198.51.100.1", [], "203.0.113.5"),  # no trusted proxies: the header is ignored
        ("203.0.113.5", "198.51.100.1", PROXIES, "203.0.113.5"),  # a peer that is none: ignored too
        ("10.0.0.2", "198.51.100.1", PROXIES, "198.51.100.1"),
        ("10.0.0.2", "6.6.6.6, 198.51.100.1, 10.1.1.1", PROXIES, "198.51.100.1"),  # the right-most untrusted
        ("10.0.0.2", "10.9.9.9, 10.1.1.1", PROXIES, "10.9.9.9"),  # every hop trusted: the left-most
        ("10.0.0.2", "not-an-address, 10.1.1.1", PROXIES, "10.1.1.1"),  # a hop that is no address ends it
        ("10.0.0.2", None, PROXIES, "10.0.0.2"),
        ("fd00::2", "2001:db8::7", PROXIES, "2001:db8::7"),
    ],
)
def test_the_client_is_the_peer_unless_a_trusted_proxy_vouches_for_another(peer, forwarded, trusted, client):
    headers = {"X-Forwarded-For": forwarded} if forwarded else {}
    assert client_address(testing.create_req(remote_addr=peer, headers=headers), trusted) == client


def test_an_ipv6_client_is_counted_by_its_64_and_a_mapped_ipv4_one_as_ipv4():
    assert address_key("2001:db8:1:2:aaaa::1") == address_key("2001:db8:1:2:bbbb::9") == "2001:db8:1:2::/64"
    assert address_key("::ffff:198.51.100.1") == "198.51.100.1" == address_key("198.51.100.1")
