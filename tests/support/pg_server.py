"""A PostgreSQL server of one test alone: its own data directory and TCP port.

A test may stop it (as a crash would) and start it again on the same port and
data; the machine's own server is never touched. Binaries come from the
system install (``/usr/lib/postgresql/<version>/bin``) or, failing that, the
``pgserver`` wheel of the dev environment. PostgreSQL refuses to run as root,
so as root the server runs as a system user (``postgres`` if the machine has
one, else ``pgserver``, the user the wheel itself creates and uses as root),
with its data in a fresh directory under the system temp dir that it owns.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from tests.support.processes import free_port, wait_until

SYSTEM_BINS = Path("/usr/lib/postgresql")


def _version(path: Path) -> tuple[int, ...]:
    return tuple(int(p) for p in path.name.split(".") if p.isdigit())


def binaries() -> Path | None:
    """The bin directory of a PostgreSQL install, newest system one first."""
    if SYSTEM_BINS.is_dir():
        for version in sorted(SYSTEM_BINS.iterdir(), key=_version, reverse=True):
            if (version / "bin" / "pg_ctl").exists() and (version / "bin" / "initdb").exists():
                return version / "bin"
    with contextlib.suppress(ImportError):
        from pgserver._commands import POSTGRES_BIN_PATH

        if (POSTGRES_BIN_PATH / "pg_ctl").exists():
            if os.geteuid() == 0:  # as pgserver does: let its non-root user run them
                import stat

                from pgserver.utils import ensure_folder_permissions, ensure_prefix_permissions

                readable = stat.S_IRGRP | stat.S_IROTH
                ensure_prefix_permissions(POSTGRES_BIN_PATH)
                ensure_folder_permissions(POSTGRES_BIN_PATH, readable | stat.S_IXGRP | stat.S_IXOTH)
                ensure_folder_permissions(POSTGRES_BIN_PATH.parent / "lib", readable)
            return POSTGRES_BIN_PATH
    return None


def server_user() -> str | None:
    """The system user the server runs as: None (this one) unless we are root."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "pgserver"):
        with contextlib.suppress(KeyError):
            pwd.getpwnam(name)
            return name
    with contextlib.suppress(ImportError, subprocess.CalledProcessError):
        from pgserver.utils import ensure_user_exists

        ensure_user_exists("pgserver")
        return "pgserver"
    return None


class PgServer:
    def __init__(self, bin_dir: Path, root: Path, user: str | None) -> None:
        self.bin = bin_dir
        self.root = root
        self.data = root / "data"
        self.log_path = root / "server.log"
        self.user = user
        self.port = free_port()

    def _run(self, *args: str, timeout: float = 60) -> None:
        result = subprocess.run(
            [str(self.bin / args[0]), *args[1:]],
            user=self.user,
            cwd=self.root,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if result.returncode != 0:
            raise RuntimeError(
                f"{' '.join(args)} exited with {result.returncode}:\n{result.stdout}\n{result.stderr}\n{self.log()}"
            )

    def init(self) -> None:
        self._run(
            "initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "--encoding=UTF8", "--no-sync"
        )

    def start(self) -> None:
        """Start on this server's port and data; returns once it accepts connections."""
        options = (
            f"-c listen_addresses=127.0.0.1 -c port={self.port} -c unix_socket_directories='' "
            # No fsync (the machine does not crash, only the server): every commit
            # still reaches the OS before it is acknowledged, so a crash loses none.
            "-c fsync=off -c max_connections=100"
        )
        self._run(
            "pg_ctl", "-D", str(self.data), "-l", str(self.log_path), "-w", "-t", "30", "-o", options, "start"
        )
        wait_until(self.answers, timeout=30, what="the private PostgreSQL to answer")

    def stop_immediately(self) -> None:
        """Stop as a crash would: no checkpoint, every connection cut at once."""
        self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
                self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "-t", "20", "stop", timeout=30)

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def answers(self) -> bool:
        try:
            with psycopg.connect(self.url(), connect_timeout=1) as conn:
                conn.execute("SELECT 1")
            return True
        except psycopg.OperationalError:
            return False

    def create_database(self, name: str) -> str:
        with psycopg.connect(self.url(), autocommit=True, connect_timeout=5) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def log(self) -> str:
        with contextlib.suppress(OSError):
            return self.log_path.read_text(errors="replace")
        return ""


@contextlib.contextmanager
def private_postgres() -> Iterator[PgServer]:
    """An initialised, running private server; stopped and removed afterwards. Skips without binaries."""
    bin_dir = binaries()
    if bin_dir is None:
        pytest.skip("no PostgreSQL binaries (/usr/lib/postgresql/*/bin or the pgserver wheel)")
    user = server_user()
    if os.geteuid() == 0 and user is None:
        pytest.skip("running as root and no non-root system user to run PostgreSQL as")
    # The system temp dir, not pytest's (mode 0700, which the server's user could not enter).
    root = Path(tempfile.mkdtemp(prefix="gatehouse-pg-"))
    if user is not None:
        entry = pwd.getpwnam(user)
        os.chown(root, entry.pw_uid, entry.pw_gid)
    server = PgServer(bin_dir, root, user)
    try:
        server.init()
        server.start()
        yield server
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)
