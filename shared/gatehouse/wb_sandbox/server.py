"""gatehouse-wb-sandbox: a real HTTP server standing in for the WB API.

Standard library only (it runs from either image). This first version answers
WB's ``/ping``; the WB issue grows it into the full stand-in.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import threading
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from gatehouse.entrypoint import settings_or_exit

log = logging.getLogger("gatehouse.wb_sandbox")


class Handler(BaseHTTPRequestHandler):
    server_version = "gatehouse-wb-sandbox"

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s " + format, self.address_string(), *args)

    def _json(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path.split("?")[0] in ("/ping", "/__sandbox/health"):
            self._json(200, {"TS": datetime.now(UTC).isoformat(), "Status": "OK"})
        else:
            self._json(404, {"title": "not found", "status": 404, "detail": self.path})


def serve(bind: str) -> ThreadingHTTPServer:
    host, port = bind.rsplit(":", 1)
    server = ThreadingHTTPServer((host, int(port)), Handler)
    server.daemon_threads = True
    return server


def main() -> None:
    settings = settings_or_exit("gatehouse-wb-sandbox", stores=False)
    parser = argparse.ArgumentParser(prog="gatehouse-wb-sandbox", description=__doc__)
    parser.add_argument("--bind", default=settings.wb_sandbox_bind, help="host:port (default %(default)s)")
    args = parser.parse_args()
    logging.basicConfig(level=settings.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    server = serve(args.bind)
    stopper = threading.Thread(target=server.shutdown)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stopper.start())
    log.info("WB sandbox listening on http://%s", args.bind)
    server.serve_forever()
    server.server_close()
    sys.exit(0)
