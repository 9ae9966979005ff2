"""gatehouse-wb-sandbox: a local stand-in for the Wildberries seller API.

Serves the WB endpoints our jobs call on one port, every WB host behind a path
prefix (``/finance-api/...``) or none, with deterministic data per seller (the
token's ``sid``), WB's per-seller rate limits, fault switches and a request log
under ``/__sandbox/``. Its answers and the requests it accepts follow WB's
OpenAPI YAML (``openapi/``), checked at start. Standard library, openapi-core
and the domain package (settings, WB's limit table). Development and tests
only: it is in neither Gatehouse image (compose and the dev overlay run
dev/wb_sandbox/Dockerfile).
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from gatehouse.entrypoint import settings_or_exit
from gatehouse_wb_sandbox import control, gateway, problems, selfcheck
from gatehouse_wb_sandbox.calls import Reply
from gatehouse_wb_sandbox.state import Sandbox, SandboxConfig

log = logging.getLogger("gatehouse_wb_sandbox")


class SandboxServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], sandbox: Sandbox, *, bind_and_activate: bool = True) -> None:
        self.sandbox = sandbox
        super().__init__(address, Handler, bind_and_activate=bind_and_activate)


class Handler(BaseHTTPRequestHandler):
    server_version = "gatehouse-wb-sandbox"
    protocol_version = "HTTP/1.1"  # keep-alive: every reply has a Content-Length (or is a 204)
    timeout = 60  # an idle keep-alive connection does not hold its thread forever
    disable_nagle_algorithm = True  # headers and body go out in two writes; do not wait for an ACK between
    server: SandboxServer

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s " + format, self.address_string(), *args)

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PATCH(self) -> None:
        self._handle("PATCH")

    def do_PUT(self) -> None:
        self._handle("PUT")

    def do_DELETE(self) -> None:
        self._handle("DELETE")

    def _handle(self, method: str) -> None:
        url = urlsplit(self.path)
        query = dict(parse_qsl(url.query, keep_blank_values=True))
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        sandbox = self.server.sandbox
        try:
            if url.path.startswith("/__sandbox/"):
                reply = control.handle(sandbox, method, url.path, query, raw)
            else:
                request = gateway.Request(
                    method,
                    url.path,
                    query,
                    raw,
                    self.headers.get("Authorization"),
                    self.headers.get("X-Gatehouse-Job"),
                    self.headers.get("X-Gatehouse-Run"),
                    self.headers.get("Content-Type"),
                )
                reply = gateway.handle(sandbox, request)
        except Exception:
            log.exception("WB sandbox failed on %s %s", method, self.path)
            reply = Reply(500, {"title": "sandbox bug", "status": 500}, problems.PROBLEM)
        self._send(reply)

    def _send(self, reply: Reply) -> None:
        data = b"" if reply.body is None else json.dumps(reply.body, ensure_ascii=False).encode()
        self.send_response(reply.status)
        for name, value in reply.headers.items():
            self.send_header(name, value)
        if reply.status != 204:
            self.send_header("Content-Type", f"{reply.content_type}; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def serve(bind: str, config: SandboxConfig | None = None) -> SandboxServer:
    """A bound server; call ``serve_forever`` to run it.

    ``bind`` is ``host:port`` (port 0 picks a free one) or, as gunicorn's, ``fd://N``:
    a listening socket it inherits (`make run` binds its ports itself, so they are its children's).
    Raises ``selfcheck.ContractError`` (a ValueError) when a route's sample answer breaks WB's YAML.
    """
    sandbox = Sandbox(config or SandboxConfig())
    selfcheck.verify(sandbox)
    if bind.startswith("fd://"):
        inherited = socket.socket(fileno=int(bind.removeprefix("fd://")))
        server = SandboxServer(inherited.getsockname()[:2], sandbox, bind_and_activate=False)
        server.socket.close()
        server.socket = inherited
        return server
    host, port = bind.rsplit(":", 1)
    return SandboxServer((host, int(port)), sandbox)


def _parser(default_bind: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gatehouse-wb-sandbox", description=__doc__)
    parser.add_argument(
        "--bind", default=default_bind, help="host:port, or fd://N, a listening socket (default %(default)s)"
    )
    parser.add_argument(
        "--time-scale",
        type=float,
        default=1.0,
        help="divide every rate-limit period by S (60: 1/min becomes 1/s)",
    )
    parser.add_argument(
        "--limits", type=Path, help='JSON {bucket: {"period_ms", "limit", "burst"}} over WB\'s table'
    )
    parser.add_argument(
        "--page-size", type=int, default=80_000, help="statistics rows per call (default %(default)s)"
    )
    parser.add_argument(
        "--rows-per-day", type=int, default=5, help="orders per seller and day (default %(default)s)"
    )
    parser.add_argument(
        "--seed", type=int, default=0, help="seeds the data and the fault dice (default %(default)s)"
    )
    parser.add_argument("--error-rate", type=float, default=0.0, help="chance of a 500/502/503 per call")
    parser.add_argument("--latency-ms", type=int, default=0, help="added to every WB call")
    return parser


def main() -> None:
    settings = settings_or_exit("gatehouse-wb-sandbox", require=())
    args = _parser(f"127.0.0.1:{settings.wb_sandbox_port}").parse_args()
    logging.basicConfig(level=settings.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    config = SandboxConfig(
        time_scale=args.time_scale,
        limits_file=args.limits,
        page_size=args.page_size,
        rows_per_day=args.rows_per_day,
        seed=args.seed,
        error_rate=args.error_rate,
        latency_ms=args.latency_ms,
    )
    try:
        server = serve(args.bind, config)
    except (OSError, ValueError) as exc:  # busy port, bad limits file or flag values, a broken answer
        sys.exit(f"gatehouse-wb-sandbox: {exc}")
    stopper = threading.Thread(target=server.shutdown)  # shutdown() blocks: not from the signal handler

    def stop(*_: object) -> None:
        if stopper.ident is None:  # a second signal changes nothing
            stopper.start()

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, stop)
    log.info(
        "WB sandbox listening on http://%s:%d (time scale %s, data anchor %s)",
        *server.server_address[:2],
        args.time_scale,
        server.sandbox.spec.anchor,
    )
    server.serve_forever()
    server.server_close()
    sys.exit(0)
