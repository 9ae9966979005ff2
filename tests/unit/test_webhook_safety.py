"""The webhook SSRF guard: addresses, URLs and the allowlist. No network: every name goes to a stub resolver."""

from __future__ import annotations

import ipaddress
import logging
import socket

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gatehouse.errors import ConfigurationError, ValidationFailed
from gatehouse.webhooks.safety import (
    FORBIDDEN,
    INSECURE,
    INVALID,
    NOT_ALLOWED,
    UNRESOLVABLE,
    Allowlist,
    Target,
    UrlRefused,
    check_url,
    is_forbidden,
    resolve_host,
)

PUBLIC_V4 = "93.184.216.34"
PUBLIC_V6 = "2606:2800:220:1:248:1893:25c8:1946"
NOBODY = Allowlist()


def resolver(table: dict[str, list[str]]):
    """A stand-in for DNS: answers from ``table``, and a name not in it does not resolve."""

    def resolve(host: str, port: int) -> list[str]:
        if host not in table:
            raise OSError(f"[Errno -2] Name or service not known: {host}")
        return table[host]

    return resolve


def no_dns(host: str, port: int) -> list[str]:
    raise AssertionError(f"resolved {host!r}, but a literal IP must not be resolved")


def refusal(url: str, dns: dict[str, list[str]] | None = None, allowlist: Allowlist = NOBODY) -> UrlRefused:
    """The UrlRefused check_url raises for ``url``, with names resolved from ``dns``."""
    with pytest.raises(UrlRefused) as caught:
        check_url(url, allowlist, resolve=resolver(dns or {}))
    return caught.value


# --- is_forbidden: one address ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        # IPv4
        ("127.0.0.1", "loopback"),
        ("127.255.255.254", "loopback"),
        ("10.0.0.5", "private"),
        ("172.16.0.1", "private"),
        ("172.31.255.255", "private"),
        ("192.168.1.1", "private"),
        ("169.254.0.1", "link-local"),
        ("169.254.169.254", "metadata"),
        ("100.100.100.200", "metadata"),
        ("100.64.0.1", "carrier-grade-nat"),
        ("100.127.255.255", "carrier-grade-nat"),
        ("224.0.0.1", "multicast"),
        ("239.255.255.250", "multicast"),
        ("0.0.0.0", "unspecified"),
        ("0.1.2.3", "reserved"),
        ("255.255.255.255", "broadcast"),
        ("240.0.0.1", "reserved"),
        ("192.0.0.8", "reserved"),
        ("192.0.2.1", "documentation"),
        ("198.51.100.7", "documentation"),
        ("203.0.113.9", "documentation"),
        ("198.18.0.1", "benchmarking"),
        ("198.19.255.255", "benchmarking"),
        # IPv6
        ("::1", "loopback"),
        ("::", "unspecified"),
        ("fc00::1", "private"),
        ("fd12:3456::1", "private"),
        ("fec0::1", "private"),
        ("fd00:ec2::254", "metadata"),
        ("fe80::1", "link-local"),
        ("fe80::1%eth0", "link-local"),
        ("ff02::1", "multicast"),
        ("ff0e::1", "multicast"),
        ("2001:db8::1", "documentation"),
        ("3fff::1", "documentation"),
        ("2001:2::1", "benchmarking"),
        ("100::1", "reserved"),
        ("2001:10::1", "reserved"),
        ("5f00::1", "reserved"),
        ("64:ff9b:1::a00:5", "private"),
        # IPv6 forms carrying an IPv4 address are judged by that address
        ("::ffff:127.0.0.1", "loopback"),
        ("::ffff:7f00:1", "loopback"),
        ("::ffff:10.0.0.5", "private"),
        ("::ffff:169.254.169.254", "metadata"),
        ("::ffff:0.0.0.0", "unspecified"),
        ("::127.0.0.1", "loopback"),
        ("::10.0.0.5", "private"),
        ("::0.0.0.2", "reserved"),
        ("64:ff9b::127.0.0.1", "loopback"),
        ("64:ff9b::a9fe:a9fe", "metadata"),
        ("2002:7f00:1::1", "loopback"),
        ("2002:a00:5::", "private"),
        ("2002:a9fe:a9fe::1", "metadata"),
        # Teredo: server 65.54.227.120, client 192.0.2.45 (the example of the ipaddress docs)
        ("2001:0:4136:e378:8000:63bf:3fff:fdd2", "documentation"),
        # Teredo: server 65.54.227.120, client 127.0.0.1 (stored XOR 0xffffffff)
        ("2001:0:4136:e378::80ff:fffe", "loopback"),
        # not an address at all: refused, never waved through
        ("localhost", "invalid"),
        ("", "invalid"),
    ],
)
def test_a_non_public_address_is_forbidden_with_its_reason(address, reason):
    assert is_forbidden(address) == reason


@pytest.mark.parametrize(
    "address",
    [
        PUBLIC_V4,
        "8.8.8.8",
        "1.1.1.1",
        "172.32.0.1",  # just past 172.16.0.0/12
        "100.128.0.1",  # just past 100.64.0.0/10
        "192.0.3.1",
        PUBLIC_V6,
        "2001:4860:4860::8888",
        "::ffff:93.184.216.34",
        "64:ff9b::93.184.216.34",
        "2002:5db8:d822::1",  # 6to4 of 93.184.216.34
    ],
)
def test_a_public_unicast_address_is_not_forbidden(address):
    assert is_forbidden(address) is None


@given(st.integers(min_value=0, max_value=2**24 - 1))
def test_every_address_in_10_slash_8_is_private_bare_or_ipv4_mapped(offset):
    address = ipaddress.IPv4Address("10.0.0.0") + offset

    assert is_forbidden(str(address)) == "private"
    assert is_forbidden(f"::ffff:{address}") == "private"


# --- check_url: the URL itself ------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "ftp://example.com/hook",
        "file:///etc/passwd",
        "gopher://example.com/",
        "example.com/hook",
        "//example.com/hook",
        "https:///hook",
        "https://user:pass@example.com/hook",
        "https://user@example.com/hook",
        "https://@example.com/hook",
        "https://example.com:0/",
        "https://example.com:65536/",
        "https://example.com:99999/",
        "https://example.com:-1/",
        "https://example.com:http/",
        "https://[::1/",
        "https://[v1.x]/",
        "https://[fe80::1%25eth0]/",
        "https://exa mple.com/",
        "https://example.com/\n",
        "https://example.com\\@127.0.0.1/",
        "https://exa_mple..com/",
        "https://-example.com/",
        "https://пример.рф/",
        "https://%31%32%37.0.0.1/",
        # hosts that some clients read as 127.0.0.1
        "https://127.1/",
        "https://2130706433/",
        "https://0x7f000001/",
        "https://0177.0.0.1/",
        "https://127.0.0.1./",
        "https://example.com/" + "a" * 2000,
    ],
)
def test_a_malformed_url_is_invalid(url):
    e = refusal(url, {"example.com": [PUBLIC_V4]})

    assert e.code == INVALID
    assert e.field == "url"
    assert isinstance(e, ValidationFailed)


def test_a_url_of_2000_characters_is_still_accepted():
    url = "https://example.com/" + "a" * (2000 - len("https://example.com/"))

    assert check_url(url, NOBODY, resolve=resolver({"example.com": [PUBLIC_V4]})).url == url


def test_a_public_name_over_https_passes_with_its_addresses():
    resolve = resolver({"hooks.example.com": [PUBLIC_V4, PUBLIC_V6, PUBLIC_V4]})

    target = check_url("https://Hooks.Example.com/wh?x=1", NOBODY, resolve=resolve)

    assert target == Target(
        url="https://Hooks.Example.com/wh?x=1",
        scheme="https",
        host="hooks.example.com",
        port=443,
        addresses=(PUBLIC_V4, PUBLIC_V6),
    )


def test_the_port_is_the_one_written_or_the_schemes_default():
    resolve = resolver({"example.com": [PUBLIC_V4]})

    assert check_url("https://example.com:8443/", NOBODY, resolve=resolve).port == 8443
    assert check_url("HTTPS://example.com:/", NOBODY, resolve=resolve).port == 443


def test_the_resolver_is_asked_for_the_host_and_port():
    asked = []

    def resolve(host, port):
        asked.append((host, port))
        return [PUBLIC_V4]

    check_url("https://example.com:8443/x", NOBODY, resolve=resolve)

    assert asked == [("example.com", 8443)]


# --- check_url: where the name leads --------------------------------------------------------------


def test_a_name_resolving_to_a_private_address_is_forbidden_naming_the_address_to_the_log_only(caplog):
    with caplog.at_level(logging.INFO, logger="gatehouse.webhooks.safety"):
        e = refusal("https://evil.example/hook", {"evil.example": ["10.0.0.5"]})

    assert e.code == FORBIDDEN
    assert e.field == "url"
    assert e.detail == NOT_ALLOWED  # the caller learns nothing of what the name resolves to
    assert e.why == "evil.example resolves to 10.0.0.5; 10.0.0.5 is a private address"
    assert e.why in caplog.text


def test_one_private_address_among_public_ones_is_enough_to_refuse():
    e = refusal("https://evil.example/", {"evil.example": [PUBLIC_V4, "169.254.169.254", PUBLIC_V6]})

    assert e.code == FORBIDDEN
    assert "169.254.169.254 is a cloud metadata address" in e.why


def test_a_name_resolving_to_an_ipv4_mapped_loopback_is_forbidden():
    e = refusal("https://evil.example/", {"evil.example": ["::ffff:127.0.0.1"]})

    assert e.code == FORBIDDEN
    assert "carries 127.0.0.1 (IPv4-mapped), a loopback address" in e.why


def test_a_public_name_over_plain_http_is_insecure():
    e = refusal("http://example.com/hook", {"example.com": [PUBLIC_V4]})

    assert e.code == INSECURE
    assert e.field == "url"


def test_a_name_that_does_not_resolve_is_unresolvable():
    e = refusal("https://nowhere.example/hook")

    assert e.code == UNRESOLVABLE
    assert e.detail == "the webhook URL's host does not resolve"
    assert "nowhere.example does not resolve" in e.why


def test_a_name_that_resolves_to_nothing_is_unresolvable():
    assert refusal("https://empty.example/", {"empty.example": []}).code == UNRESOLVABLE


def test_an_address_the_resolver_garbles_is_forbidden_not_trusted():
    assert refusal("https://odd.example/", {"odd.example": ["not-an-ip"]}).code == FORBIDDEN


# --- check_url: literal addresses ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "address"),
    [
        ("http://127.0.0.1:8080/", "127.0.0.1"),
        ("https://127.0.0.1:8080/", "127.0.0.1"),
        ("http://[::1]:8080/", "::1"),
        ("https://[::ffff:127.0.0.1]/", "::ffff:7f00:1"),
        ("https://169.254.169.254/latest/meta-data/", "169.254.169.254"),
        ("https://[fd00:ec2::254]/", "fd00:ec2::254"),
        ("https://0.0.0.0/", "0.0.0.0"),
        ("https://[::]/", "::"),
    ],
)
def test_a_literal_non_public_address_is_forbidden_without_resolving(url, address):
    with pytest.raises(UrlRefused) as caught:
        check_url(url, NOBODY, resolve=no_dns)

    assert caught.value.code == FORBIDDEN
    assert caught.value.why.startswith(f"{address} ")


def test_the_message_says_only_that_the_host_is_not_allowed_and_the_reason_what_the_address_is():
    with pytest.raises(UrlRefused, match=r"^the webhook URL's host is not allowed$") as caught:
        check_url("https://127.0.0.1/", NOBODY, resolve=no_dns)
    assert caught.value.why == "127.0.0.1 is a loopback address"


@pytest.mark.parametrize("url", [f"https://{PUBLIC_V4}/hook", f"https://[{PUBLIC_V6}]:8443/hook"])
def test_a_literal_public_address_passes_without_resolving(url):
    target = check_url(url, NOBODY, resolve=no_dns)

    assert target.addresses in ((PUBLIC_V4,), (PUBLIC_V6,))


def test_a_literal_public_address_over_plain_http_is_insecure():
    with pytest.raises(UrlRefused) as caught:
        check_url(f"http://{PUBLIC_V4}/", NOBODY, resolve=no_dns)

    assert caught.value.code == INSECURE


# --- the allowlist --------------------------------------------------------------------------------


def test_an_allowlisted_name_passes_despite_its_address_and_over_http():
    allowlist = Allowlist.parse(["LocalHost", "hooks.internal"])
    resolve = resolver({"localhost": ["127.0.0.1", "::1"], "hooks.internal": ["10.0.0.5"]})

    local = check_url("http://localhost:8080/hook", allowlist, resolve=resolve)
    internal = check_url("https://HOOKS.internal/hook", allowlist, resolve=resolve)

    assert (local.scheme, local.host, local.port, local.addresses) == (
        "http",
        "localhost",
        8080,
        ("127.0.0.1", "::1"),
    )
    assert internal.addresses == ("10.0.0.5",)


def test_the_name_must_match_exactly_not_as_a_suffix():
    allowlist = Allowlist.parse(["hooks.internal"])

    e = refusal("https://evil.hooks.internal/", {"evil.hooks.internal": ["10.0.0.5"]}, allowlist)

    assert e.code == FORBIDDEN


def test_an_allowlisted_name_must_still_resolve():
    assert (
        refusal("http://hooks.internal/", allowlist=Allowlist.parse(["hooks.internal"])).code == UNRESOLVABLE
    )


def test_an_allowlisted_network_lets_its_literal_addresses_through_over_http():
    allowlist = Allowlist.parse(["127.0.0.0/8", "::1/128"])

    v4 = check_url("http://127.0.0.1:9/", allowlist, resolve=no_dns)
    v6 = check_url("http://[::1]:9/", allowlist, resolve=no_dns)

    assert (v4.host, v4.port, v4.addresses) == ("127.0.0.1", 9, ("127.0.0.1",))
    assert (v6.host, v6.port, v6.addresses) == ("::1", 9, ("::1",))


def test_a_plain_ip_entry_allows_that_address():
    assert check_url("http://[::1]:9/", Allowlist.parse(["::1"]), resolve=no_dns).addresses == ("::1",)


def test_an_allowlisted_network_lets_a_name_through_when_every_address_is_in_it():
    allowlist = Allowlist.parse(["10.0.0.0/8"])
    resolve = resolver(
        {"inside.example": ["10.0.0.5", "10.1.2.3"], "split.example": ["10.0.0.5", "192.168.1.1"]}
    )

    assert check_url("http://inside.example/", allowlist, resolve=resolve).addresses == (
        "10.0.0.5",
        "10.1.2.3",
    )
    with pytest.raises(UrlRefused) as caught:
        check_url("http://split.example/", allowlist, resolve=resolve)
    assert caught.value.code == FORBIDDEN
    assert "192.168.1.1 is a private address" in caught.value.why


def test_a_name_in_an_allowlisted_network_and_on_the_internet_passes_over_https_only():
    allowlist = Allowlist.parse(["10.0.0.0/8"])
    dns = {"both.example": ["10.0.0.5", PUBLIC_V4]}

    assert check_url("https://both.example/", allowlist, resolve=resolver(dns)).addresses == (
        "10.0.0.5",
        PUBLIC_V4,
    )
    assert refusal("http://both.example/", dns, allowlist).code == INSECURE


def test_without_the_allowlist_local_addresses_are_refused():
    for url in ("http://127.0.0.1:8080/", "http://[::1]:8080/"):
        with pytest.raises(UrlRefused) as caught:
            check_url(url, Allowlist.parse(["10.0.0.0/8", "hooks.internal"]), resolve=no_dns)
        assert caught.value.code == FORBIDDEN


def test_the_allowlist_never_lifts_the_url_rules():
    allowlist = Allowlist.parse(["127.0.0.0/8", "localhost"])

    for url in ("ftp://127.0.0.1/", "http://user:pw@localhost/", "http://localhost:0/"):
        assert refusal(url, {"localhost": ["127.0.0.1"]}, allowlist).code == INVALID


@pytest.mark.parametrize(
    "entry", ["", "127.0.0.1/8", "10.0.0.0/33", "*.internal", "localhost:8080", "127.1", "[::1]"]
)
def test_a_malformed_allowlist_entry_is_a_configuration_error_naming_the_setting(entry):
    with pytest.raises(ConfigurationError, match="WEBHOOK_ALLOWED_HOSTS"):
        Allowlist.parse(["localhost", entry])


def test_the_allowlist_is_parsed_once_into_names_and_networks():
    allowlist = Allowlist.parse([" LocalHost. ", "127.0.0.0/8", "::1", "10.0.0.1"])

    assert allowlist.hosts == frozenset({"localhost"})
    assert allowlist.networks == (
        ipaddress.ip_network("127.0.0.0/8"),
        ipaddress.ip_network("::1/128"),
        ipaddress.ip_network("10.0.0.1/32"),
    )


def test_the_default_resolver_gives_each_getaddrinfo_address_once(monkeypatch):
    def getaddrinfo(host, port, *args, **kwargs):
        assert (host, port) == ("example.com", 443)
        return [
            (socket.AF_INET, socket.SOCK_STREAM, 6, "", (PUBLIC_V4, 443)),
            (socket.AF_INET6, socket.SOCK_STREAM, 6, "", (PUBLIC_V6, 443, 0, 0)),
            (socket.AF_INET, socket.SOCK_STREAM, 6, "", (PUBLIC_V4, 443)),
        ]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)

    assert resolve_host("example.com", 443) == [PUBLIC_V4, PUBLIC_V6]
