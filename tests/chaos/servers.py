"""The chaos suite's own stores: a private Redis (wiped by a restart) beside tests.support.pg_server's PostgreSQL."""

from __future__ import annotations

import contextlib
import subprocess
from pathlib import Path

import redis

from tests.support.processes import free_port, wait_until


class RedisServer:
    """A redis-server on its own port with no persistence: a restart (kill -9, start) wipes its data."""

    def __init__(self, binary: str, root: Path) -> None:
        self.binary = binary
        self.root = root
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen | None = None
        self.starts = 0

    def start(self) -> None:
        log = open(self.root / f"redis-{self.starts}.log", "wb")  # noqa: SIM115 - owned by the process
        self.starts += 1
        self.proc = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(self.root), "--maxclients", "2000"],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        wait_until(self.answers, timeout=20, what="the chaos Redis to answer")

    def kill(self) -> None:
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()
            self.proc.wait(timeout=10)
            self.proc = None

    def answers(self) -> bool:
        try:
            return bool(redis.Redis.from_url(self.url, socket_timeout=1, socket_connect_timeout=1).ping())
        except redis.RedisError:
            return False
