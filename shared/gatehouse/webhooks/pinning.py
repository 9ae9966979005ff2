"""Webhook connections go to the address that was checked, never to a name resolved again.

httpx hands its network backend the URL's host; left alone, the backend resolves it
at connect time, after (and apart from) the SSRF check: a name that answered a public
address to the check can answer 127.0.0.1 to the connect (DNS rebinding). This
backend resolves once per new connection, checks every address (``Guard.addresses``),
and connects to a checked one, in the resolver's order. Everything above the socket
still sees the URL's host: httpx writes it in the ``Host`` header, and TLS sends it as
the server name and verifies the certificate against it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import httpcore

from gatehouse.webhooks.safety import Guard


class PinnedBackend(httpcore.NetworkBackend):
    def __init__(self, inner: httpcore.NetworkBackend, guard: Guard) -> None:
        self.inner, self.guard = inner, guard

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        # UrlRefused (not an httpcore error) goes up through httpx unchanged, before any connect.
        *first, last = self.guard.addresses(host, port)
        for address in first:
            try:
                return self.inner.connect_tcp(address, port, timeout, local_address, socket_options)
            except (httpcore.ConnectError, httpcore.ConnectTimeout):
                continue  # the next checked address, as a resolving connect would
        return self.inner.connect_tcp(last, port, timeout, local_address, socket_options)

    def sleep(self, seconds: float) -> None:
        self.inner.sleep(seconds)
