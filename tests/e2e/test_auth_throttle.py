"""Throttled authentication under a real gunicorn API with two workers (issue 26).

AUTH_MAX_FAILURES (the default, 20) failed attempts from one client address lock it out of /v1 and
of the console's sign-in, counted in Redis so both workers agree; other addresses are unaffected;
X-Forwarded-For is believed from TRUSTED_PROXIES only; the lockout ends after AUTH_LOCKOUT_MS.
"""

from __future__ import annotations

import re
import time

import httpx

from tests.conftest import ADMIN_TOKEN
from tests.support.processes import free_port, wait_until

LOCKOUT_MS = 2_000
FAILURES = 20  # AUTH_MAX_FAILURES' default, left unset
ACCOUNTS = "/v1/admin/accounts"


class Peers:
    """Requests from a loopback address of their choice, each on a connection of its own (so the two
    workers share the traffic) unless ``reuse``: 127.0.0.1 is the trusted proxy, 127.0.0.2 a peer that is none."""

    def __init__(self, url: str) -> None:
        self.url, self.clients = url, {}

    def send(
        self,
        path: str,
        *,
        token: str,
        forwarded_for: str,
        peer: str = "127.0.0.1",
        login: bool = False,
        reuse: bool = False,
    ):
        if peer not in self.clients:
            self.clients[peer] = httpx.Client(transport=httpx.HTTPTransport(local_address=peer), timeout=10)
        headers = {"Connection": "keep-alive" if reuse else "close", "X-Forwarded-For": forwarded_for}
        if login:
            return self.clients[peer].post(f"{self.url}{path}", data={"token": token}, headers=headers)
        headers["Authorization"] = f"Bearer {token}"
        return self.clients[peer].get(f"{self.url}{path}", headers=headers)

    def close(self) -> None:
        for client in self.clients.values():
            client.close()


def locked_out(response: httpx.Response) -> bool:
    return response.status_code == 429 and 0 < int(response.headers["retry-after"]) <= LOCKOUT_MS / 1000


def failures(metrics_url: str) -> dict[str, float]:
    text = httpx.get(f"{metrics_url}/metrics").text
    return {
        m[1]: float(m[2])
        for m in re.finditer(r'gatehouse_auth_failures_total\{surface="(\w+)"\} (\S+)', text)
    }


def test_failed_attempts_lock_out_one_address_in_every_worker_until_the_lockout_ends(processes):
    # Given an API with two workers behind a trusted proxy on 127.0.0.1
    env = {"BACKEND_ROLE": "api", "API_WORKERS": "2", "TRUSTED_PROXIES": "127.0.0.1/32"}
    metrics_port = free_port()  # where /metrics is served (never on the public port)
    _, url = processes.api(env={**env, "AUTH_LOCKOUT_MS": str(LOCKOUT_MS), "METRICS_PORT": str(metrics_port)})
    peers = Peers(url)
    try:
        check(url, peers, f"http://127.0.0.1:{metrics_port}")
    finally:
        peers.close()


def check(url: str, peers: Peers, metrics_url: str) -> None:
    attacker, neighbour = (
        "198.51.100.7, 203.0.113.9",
        "198.51.100.7, 203.0.113.10",
    )  # right-most hop is the client

    # When one client sends 20 wrong bearer tokens through the proxy
    answers = [peers.send(ACCOUNTS, token=f"wrong-{n}", forwarded_for=attacker) for n in range(FAILURES)]
    locked_at = time.monotonic()

    # Then each was a 401, and from then on every request of it answers 429 with Retry-After,
    # in whichever worker, even with the right token
    assert {a.status_code for a in answers} == {401}
    for _ in range(8):
        refused = peers.send(ACCOUNTS, token=ADMIN_TOKEN, forwarded_for=attacker)
        assert locked_out(refused), refused.text
        assert refused.headers["content-type"] == "application/problem+json"
        assert refused.json()["code"] == "TOO_MANY_ATTEMPTS"
    # … while the right token from another address is served
    assert peers.send(ACCOUNTS, token=ADMIN_TOKEN, forwarded_for=neighbour).status_code == 200

    # When a peer that is no trusted proxy sends 20 wrong tokens, each claiming another address
    for n in range(FAILURES):
        assert (
            peers.send(
                ACCOUNTS, token="wrong", forwarded_for=f"192.0.2.{n}", peer="127.0.0.2", reuse=True
            ).status_code
            == 401
        )
    # Then its header was ignored: the peer itself is locked out
    assert locked_out(peers.send(ACCOUNTS, token=ADMIN_TOKEN, forwarded_for="192.0.2.99", peer="127.0.0.2"))

    # When a client fails to sign in to the console 20 times
    sign_in = "198.51.100.7, 203.0.113.11"
    for _ in range(FAILURES):
        assert (
            peers.send(
                "/console/login", token="wrong", forwarded_for=sign_in, login=True, reuse=True
            ).status_code
            == 401
        )
    # Then its next sign-in, with the admin token, is refused; another address signs in
    refused = peers.send("/console/login", token=ADMIN_TOKEN, forwarded_for=sign_in, login=True)
    assert locked_out(refused), refused.text
    assert "too many failed authentication attempts" in refused.text
    assert (
        peers.send("/console/login", token=ADMIN_TOKEN, forwarded_for=neighbour, login=True).status_code
        == 303
    )

    # And every failure was counted, by surface, over both workers
    assert failures(metrics_url) == {"api": 2 * FAILURES, "console": FAILURES}

    # And the lockout ends AUTH_LOCKOUT_MS after it began, not before
    wait_until(
        lambda: peers.send(ACCOUNTS, token=ADMIN_TOKEN, forwarded_for=attacker).status_code == 200,
        timeout=LOCKOUT_MS / 1000 + 10,
        interval=0.1,
        what="the lockout to end",
    )
    assert time.monotonic() - locked_at >= LOCKOUT_MS / 1000 - 0.1
