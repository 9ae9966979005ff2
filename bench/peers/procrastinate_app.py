"""procrastinate's app (procrastinate --app bench.peers.procrastinate_app.app worker …)."""

from __future__ import annotations

import os

import procrastinate

app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=os.environ["PEERS_DSN"]))


@app.task(name="noop")
def noop() -> None:
    return None
