"""The webhook SSRF guard: may Gatehouse send a request to this URL?

A tenant chooses a webhook URL, and the worker that delivers it sits inside our
network. Unguarded, ``https://169.254.169.254/latest/meta-data/`` or
``http://10.0.0.5:6379/`` would turn Gatehouse into a proxy into its own
infrastructure (server-side request forgery, SSRF). So a target must use https,
its host must resolve, and every address it resolves to must be a public unicast
address. WEBHOOK_ALLOWED_HOSTS lets chosen hosts or networks through anyway, and
over plain http too (local development, tests, an internal receiver).

A URL is checked when its endpoint is created or edited and again before every
run of deliveries. A name can resolve to a public address at the check and to a
private one at connect time (DNS rebinding), so the deliverer never lets its HTTP
client resolve a name: each new connection resolves the host once, through
``Guard.addresses`` (every address checked), and connects to a checked address
(gatehouse.webhooks.pinning).

A refusal tells the caller only that the target is not allowed (or does not
resolve): what a name resolves to inside our network is nobody else's business.
The reason (``UrlRefused.why``) goes to the log.
"""

from __future__ import annotations

import ipaddress
import logging
import re
import socket
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from gatehouse.errors import ConfigurationError, ValidationFailed

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
Resolver = Callable[[str, int], list[str]]

MAX_URL_LENGTH = 2000
DEFAULT_PORTS = {"https": 443, "http": 80}

log = logging.getLogger(__name__)

INVALID = "WEBHOOK_URL_INVALID"
INSECURE = "WEBHOOK_URL_INSECURE"
UNRESOLVABLE = "WEBHOOK_URL_UNRESOLVABLE"
FORBIDDEN = "WEBHOOK_URL_FORBIDDEN"
# What a refused caller is told: never what the host resolves to.
NOT_ALLOWED = "the webhook URL's host is not allowed"
NOT_RESOLVED = "the webhook URL's host does not resolve"


class UrlRefused(ValidationFailed):
    """A webhook URL the guard refuses; ``code`` names the rule it breaks, ``why`` (for the log
    only, never the caller) what was found."""

    def __init__(self, detail: str, *, code: str, why: str | None = None) -> None:
        super().__init__(detail, field="url", code=code)
        self.why = why or detail


def _refused(code: str, why: str) -> UrlRefused:
    """A FORBIDDEN or UNRESOLVABLE refusal: the caller learns which, the log learns why."""
    # A warning: someone may be probing what our network reaches (and the API logs no INFO lines).
    log.warning("webhook target refused (%s): %s", code, why)
    return UrlRefused(NOT_ALLOWED if code == FORBIDDEN else NOT_RESOLVED, code=code, why=why)


@dataclass(frozen=True)
class Target:
    """A URL that passed the guard, and the addresses it was judged by."""

    url: str
    scheme: str
    host: str
    port: int
    addresses: tuple[str, ...]


# --- addresses --------------------------------------------------------------------------------


def _nets(*cidrs: str) -> tuple[IPNetwork, ...]:
    return tuple(ipaddress.ip_network(cidr) for cidr in cidrs)


# How a message names each reason: "<address> is <phrase>".
_PHRASES = {
    "metadata": "a cloud metadata address",
    "unspecified": "an unspecified address",
    "broadcast": "a broadcast address",
    "loopback": "a loopback address",
    "private": "a private address",
    "carrier-grade-nat": "a carrier-grade NAT (shared) address",
    "link-local": "a link-local address",
    "multicast": "a multicast address",
    "documentation": "a documentation address",
    "benchmarking": "a benchmarking address",
    "reserved": "a reserved address, not publicly routable",
    "invalid": "not an IP address",
}

# The first matching rule names the reason, so a narrow range comes before the one holding it.
# Written out rather than read from ipaddress's is_private / is_global, whose answers differ
# between Python versions (and call multicast "global").
_IPV4_RULES: tuple[tuple[str, tuple[IPNetwork, ...]], ...] = (
    ("metadata", _nets("169.254.169.254/32", "100.100.100.200/32")),  # AWS/GCP/Azure…, Alibaba
    ("unspecified", _nets("0.0.0.0/32")),
    ("broadcast", _nets("255.255.255.255/32")),
    ("loopback", _nets("127.0.0.0/8")),
    ("private", _nets("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16")),
    ("carrier-grade-nat", _nets("100.64.0.0/10")),
    ("link-local", _nets("169.254.0.0/16")),
    ("multicast", _nets("224.0.0.0/4")),
    ("documentation", _nets("192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24")),
    ("benchmarking", _nets("198.18.0.0/15")),
    # "this network" (Linux connects 0.x to itself), IETF protocol assignments,
    # the retired 6to4 relay anycast, class E.
    ("reserved", _nets("0.0.0.0/8", "192.0.0.0/24", "192.88.99.0/24", "240.0.0.0/4")),
)
_IPV6_RULES: tuple[tuple[str, tuple[IPNetwork, ...]], ...] = (
    ("metadata", _nets("fd00:ec2::254/128")),  # AWS over IPv6
    ("unspecified", _nets("::/128")),
    ("loopback", _nets("::1/128")),
    # unique local, the retired site-local, local-use NAT64 (RFC 8215)
    ("private", _nets("fc00::/7", "fec0::/10", "64:ff9b:1::/48")),
    ("link-local", _nets("fe80::/10")),
    ("multicast", _nets("ff00::/8")),
    ("documentation", _nets("2001:db8::/32", "3fff::/20")),
    ("benchmarking", _nets("2001:2::/48")),
    ("reserved", _nets("100::/64", "2001::/23")),  # discard-only, IETF protocol assignments
)
_IPV6_GLOBAL_UNICAST = ipaddress.IPv6Network("2000::/3")
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_IPV4_COMPATIBLE = ipaddress.IPv6Network("::/96")


@dataclass(frozen=True)
class _Verdict:
    reason: str
    explanation: str


def _low_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address:
    return ipaddress.IPv4Address(int(ip) & 0xFFFF_FFFF)


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> list[tuple[str, ipaddress.IPv4Address]]:
    """The IPv4 addresses an IPv6 address carries, each with the form that carries it."""
    if ip.ipv4_mapped is not None:
        return [("IPv4-mapped", ip.ipv4_mapped)]
    if ip.teredo is not None:
        server, client = ip.teredo
        return [("Teredo client", client), ("Teredo server", server)]
    if ip.sixtofour is not None:
        return [("6to4", ip.sixtofour)]
    if ip in _NAT64:
        return [("NAT64", _low_ipv4(ip))]
    if ip in _IPV4_COMPATIBLE and int(ip) > 1:  # :: and ::1 are themselves, not 0.0.0.0 and 0.0.0.1
        return [("IPv4-compatible", _low_ipv4(ip))]
    return []


def _classify(ip: IPAddress) -> str | None:
    """The reason ``ip`` itself is refused (no unwrapping), or None for a public unicast address."""
    for reason, networks in _IPV4_RULES if ip.version == 4 else _IPV6_RULES:
        if any(ip in network for network in networks):
            return reason
    if ip.version == 6 and ip not in _IPV6_GLOBAL_UNICAST:
        return "reserved"  # IANA has assigned no unicast space outside 2000::/3
    if not ip.is_global:
        return "reserved"  # anything ipaddress knows to be special that the tables above miss
    return None


def _verdict(address: str) -> _Verdict | None:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return _Verdict("invalid", f"{address!r} is {_PHRASES['invalid']}")
    embedded = _embedded_ipv4(ip) if ip.version == 6 else []
    if embedded:
        # The packet ends up at the IPv4 address, so that is the one to judge.
        for form, ipv4 in embedded:
            if reason := _classify(ipv4):
                return _Verdict(reason, f"{address} carries {ipv4} ({form}), {_PHRASES[reason]}")
        return None
    if reason := _classify(ip):
        return _Verdict(reason, f"{address} is {_PHRASES[reason]}")
    return None


def is_forbidden(address: str) -> str | None:
    """Why a webhook may not go to ``address`` ("loopback", "private", "metadata", …), or None.

    An IPv6 address that embeds an IPv4 one (IPv4-mapped, IPv4-compatible, NAT64, 6to4,
    Teredo) is judged by the IPv4 address. A string that is not an IP address is "invalid".
    """
    verdict = _verdict(address)
    return verdict.reason if verdict else None


def resolve_host(host: str, port: int) -> list[str]:
    """Every address (IPv4 and IPv6) ``host`` resolves to, in getaddrinfo's order."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


# --- host names -------------------------------------------------------------------------------

_LABEL = re.compile(r"(?!-)[a-z0-9_-]{1,63}(?<!-)")
# A last label like these makes browsers and some clients read the host as an IPv4 address
# ("127.1", "2130706433", "0x7f.1", "0177.0.0.1"): refuse it unless it is a plain dotted quad.
_NUMERIC_LABEL = re.compile(r"[0-9]+|0x[0-9a-f]*")


def _host_name_problem(host: str) -> str | None:
    """What is wrong with ``host`` (lowercase) as a DNS host name, or None."""
    if not host.isascii():
        return "write an internationalised host name in its xn-- (punycode) form"
    name = host.removesuffix(".")
    labels = name.split(".")
    if not name or len(name) > 253 or not all(_LABEL.fullmatch(label) for label in labels):
        return f"{host!r} is not a valid host name"
    if _NUMERIC_LABEL.fullmatch(labels[-1]):
        return f"{host!r} is neither a host name nor a dotted-quad IPv4 address"
    return None


# --- the allowlist ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Allowlist:
    """WEBHOOK_ALLOWED_HOSTS, parsed: host names (lowercase) and networks let through."""

    hosts: frozenset[str] = frozenset()
    networks: tuple[IPNetwork, ...] = ()

    @classmethod
    def parse(cls, entries: Iterable[str]) -> Allowlist:
        """Host names, IP addresses and CIDRs; a malformed entry is a ConfigurationError."""
        hosts: set[str] = set()
        networks: list[IPNetwork] = []
        for entry in entries:
            text = entry.strip().lower()
            try:
                networks.append(ipaddress.ip_network(text))
                continue
            except ValueError as exc:
                problem = str(exc) if "/" in text else _host_name_problem(text)
            if problem:
                raise ConfigurationError(
                    f"WEBHOOK_ALLOWED_HOSTS: {entry!r} is not a host name, IP address or CIDR ({problem})"
                )
            hosts.add(text.removesuffix("."))
        return cls(frozenset(hosts), tuple(networks))

    def allows(self, host: str, addresses: Iterable[str]) -> bool:
        """True when ``host`` is listed, or when every one of ``addresses`` lies in a listed network."""
        if host.lower().removesuffix(".") in self.hosts:
            return True
        addresses = list(addresses)
        return bool(addresses) and all(self.covers(address) for address in addresses)

    def covers(self, address: str) -> bool:
        """True when ``address`` lies in a listed network."""
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            return False
        return any(ip in network for network in self.networks)


# --- the check --------------------------------------------------------------------------------


def _invalid(detail: str) -> UrlRefused:
    return UrlRefused(detail, code=INVALID)


def _split(url: str) -> tuple[str, str, int, IPAddress | None]:
    """(scheme, host, port, the host as an IP address if it is a literal) or UrlRefused."""
    if len(url) > MAX_URL_LENGTH:
        raise _invalid(f"the URL is longer than {MAX_URL_LENGTH} characters")
    if any(c.isspace() or not c.isprintable() or c == "\\" for c in url):
        raise _invalid("the URL contains whitespace, a control character or a backslash")
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise _invalid(f"the URL is malformed ({exc})") from None
    if parts.scheme not in DEFAULT_PORTS:
        raise _invalid("the URL must start with https://")
    if "@" in parts.netloc:
        raise _invalid("the URL must not carry a user name or password")
    host = parts.hostname
    if not host:
        raise _invalid("the URL has no host")
    try:
        port = parts.port
    except ValueError:
        port = 0
    if port == 0:
        raise _invalid("the port must be a number from 1 to 65535")

    literal: IPAddress | None
    if parts.netloc.startswith("["):
        try:
            literal = ipaddress.IPv6Address(host)
        except ValueError:
            literal = None
        if literal is None or literal.scope_id:
            raise _invalid(f"[{host}] is not an IPv6 address (zone ids are not accepted)")
    else:
        try:
            literal = ipaddress.IPv4Address(host)
        except ValueError:
            literal = None
            if problem := _host_name_problem(host):
                raise _invalid(problem) from None
    return parts.scheme, host, port or DEFAULT_PORTS[parts.scheme], literal


def _resolved(host: str, port: int, resolve: Resolver) -> tuple[str, ...]:
    try:
        addresses = tuple(dict.fromkeys(resolve(host, port)))
    except (OSError, UnicodeError) as exc:
        raise _refused(UNRESOLVABLE, f"{host} does not resolve ({exc})") from None
    if not addresses:
        raise _refused(UNRESOLVABLE, f"{host} resolves to no address")
    return addresses


def _allowlisted(host: str, addresses: tuple[str, ...], allowlist: Allowlist, *, literal: bool) -> bool:
    """True when the allowlist lets ``host`` through; else each address must be public or in a
    listed network (a name may resolve to both), or UrlRefused (FORBIDDEN)."""
    if allowlist.allows(host, addresses):
        return True
    for address in addresses:
        if not allowlist.covers(address) and (verdict := _verdict(address)):
            why = verdict.explanation if literal else f"{host} resolves to {address}; {verdict.explanation}"
            raise _refused(FORBIDDEN, why)
    return False


def check_url(url: str, allowlist: Allowlist, *, resolve: Resolver = resolve_host) -> Target:
    """The target of a webhook URL, or UrlRefused (``field="url"``) with the rule it breaks.

    A literal IP host is judged as written; a name is resolved with ``resolve`` and every
    address it gives must be public or in an allowlisted network. A host the allowlist lets
    through (its name is listed, or all its addresses are) skips the address rules and may
    use plain http.
    """
    scheme, host, port, literal = _split(url)
    addresses = (str(literal),) if literal is not None else _resolved(host, port, resolve)
    if not _allowlisted(host, addresses, allowlist, literal=literal is not None) and scheme != "https":
        raise UrlRefused("the URL must use https; plain http is only for allowlisted hosts", code=INSECURE)
    return Target(url=url, scheme=scheme, host=host, port=port, addresses=addresses)


@dataclass(frozen=True)
class Guard:
    """The SSRF rules of a process: its allowlist and its resolver, for a URL and for a connection."""

    allowlist: Allowlist = Allowlist()
    resolve: Resolver = resolve_host

    def check_url(self, url: str) -> Target:
        return check_url(url, self.allowlist, resolve=self.resolve)

    def addresses(self, host: str, port: int) -> tuple[str, ...]:
        """Where a new connection to ``host`` may go: it resolved once, every address checked
        (the address rules of ``check_url``; the URL's own were checked before the run), or UrlRefused."""
        try:
            addresses, literal = (str(ipaddress.ip_address(host)),), True
        except ValueError:
            addresses, literal = _resolved(host, port, self.resolve), False
        _allowlisted(host, addresses, self.allowlist, literal=literal)
        return addresses


def origin(url: str) -> str:
    """A webhook URL as it may be logged: scheme and host only (a receiver may put a token in its
    path or query)."""
    try:
        parts = urlsplit(url)
        return f"{parts.scheme}://{parts.hostname}"
    except ValueError:
        return "(a malformed URL)"
