"""`make run` (dev/run.py) on embedded servers: up, usable, stopped cleanly, data kept."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import uuid
from datetime import date, timedelta
from pathlib import Path

import httpx
import psycopg
import pytest

from tests.support.processes import REPO, Proc, free_port, wait_until
from tests.support.wb_sandbox import quiet_schedules

pytest.importorskip("pgserver", reason="the embedded servers need the 'embedded' dependency group")


@pytest.fixture
def var_dir():
    # World-traversable: embedded PostgreSQL runs as its own system user when we are root.
    path = Path(tempfile.mkdtemp(prefix="gh-run-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def start_run(var: Path, logs: Path, api_port: int, sandbox_port: int, mail_port: int | None = None) -> Proc:
    env = {
        "PATH": os.environ["PATH"],
        "HOME": os.environ.get("HOME", "/tmp"),
        "API_PORT": str(api_port),  # API_HOST unset: loopback
        "WB_SANDBOX_PORT": str(sandbox_port),
        "MAIL_SINK_PORT": str(mail_port or free_port()),
        "API_WORKERS": "1",
        "SHUTDOWN_TIMEOUT_MS": "5000",
        **quiet_schedules(),  # real cron ticks would add jobs mid-test; the test fires one itself
    }  # no DATABASE_URL / REDIS_URL: the embedded servers start
    return Proc("make-run", [sys.executable, str(REPO / "dev" / "run.py"), "--var", str(var)], env, logs)


def banner(proc: Proc) -> dict[str, str]:
    def parsed():
        if not proc.alive():
            raise AssertionError(f"dev/run.py exited early:\n{proc.log()}")
        text = proc.log()
        if "Gatehouse is up" not in text:
            return None
        return dict(re.findall(r"^(admin token|DATABASE_URL|REDIS_URL):\s+(\S+)$", text, re.M))

    return wait_until(parsed, timeout=90, what="the make-run banner")


def stop(proc: Proc) -> None:
    proc.signal(signal.SIGINT)  # Ctrl-C
    assert proc.wait(timeout=60) == 0, proc.log()
    assert proc.tree() == set(), "a child of make run outlived it"


def listening_addresses(port: int) -> set[str]:
    """The local addresses (hex, as /proc/net/tcp* has them) something listens on at ``port``."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            address, hex_port = fields[1].rsplit(":", 1)
            if fields[3] == "0A" and int(hex_port, 16) == port:
                found.add(address)
    return found


def test_make_run_starts_everything_on_embedded_servers_and_finds_its_data_again(var_dir, tmp_path):
    api_port, sandbox_port = free_port(), free_port()

    # Given a first run on a machine without DATABASE_URL / REDIS_URL
    first = start_run(var_dir, tmp_path / "first.log", api_port, sandbox_port)
    try:
        seen = banner(first)
        # … where the API listens on loopback only, and nothing printed needs decoding
        assert listening_addresses(api_port) == {"0100007F"}  # 127.0.0.1
        assert not re.findall(r"^.*(?:Warning|WARNING).*$", first.log(), re.M)
        assert httpx.get(f"http://127.0.0.1:{api_port}/readyz", timeout=5).json()["status"] == "ready"
        assert httpx.get(f"http://127.0.0.1:{sandbox_port}/__sandbox/health", timeout=5).status_code == 200
        # … where the demo account's user import and a scheduled sync work against the sandbox
        api, admin = f"http://127.0.0.1:{api_port}", {"Authorization": f"Bearer {seen['admin token']}"}
        with psycopg.connect(seen["DATABASE_URL"]) as conn:
            [(demo,)] = conn.execute("SELECT id FROM accounts").fetchall()
        yesterday = (date.today() - timedelta(days=1)).isoformat()
        imported = httpx.post(
            f"{api}/v1/accounts/{demo}/digitization/imports",
            json={
                "kind": "feeds",
                "dateFrom": (date.today() - timedelta(days=3)).isoformat(),
                "dateTo": yesterday,
            },
            headers=admin,
        ).json()["jobId"]
        assert httpx.post(f"{api}/v1/admin/schedules/rnp-ads/run", headers=admin).status_code == 202

        def finished():
            # Other scheduled ticks may fire meanwhile (their cron is real); look at these two only.
            with psycopg.connect(seen["DATABASE_URL"]) as conn:
                rows = conn.execute(
                    "SELECT state FROM jobs WHERE id = %s OR type = 'rnp:ads-sync-account'", (imported,)
                ).fetchall()
            return len(rows) == 2 and all(state == "completed" for (state,) in rows)

        # WB's real limits: the sales feed's second call waits a minute (burst 1), plus our headroom.
        wait_until(finished, timeout=180, what="the import and the ads sync to complete")
        # … and in which something is stored
        account = uuid.uuid4()
        with psycopg.connect(seen["DATABASE_URL"], autocommit=True) as conn:
            conn.execute("INSERT INTO accounts (id, name) VALUES (%s, 'kept')", (account,))
    finally:
        if first.alive():
            stop(first)
    pg_pid = (
        int((var_dir / "pg" / "postmaster.pid").read_text().split()[0])
        if (var_dir / "pg" / "postmaster.pid").exists()
        else None
    )
    assert pg_pid is None or not Path(f"/proc/{pg_pid}").exists(), "embedded PostgreSQL still runs"

    # When it runs again
    second = start_run(var_dir, tmp_path / "second.log", api_port, sandbox_port)
    try:
        again = banner(second)
        # Then it finds its data and the same admin token
        with psycopg.connect(again["DATABASE_URL"]) as conn:
            assert conn.execute("SELECT name FROM accounts WHERE id = %s", (account,)).fetchone() == ("kept",)
        assert again["admin token"] == seen["admin token"]
    finally:
        if second.alive():
            stop(second)
        subprocess.run(["pkill", "-f", str(var_dir)], check=False)


@pytest.mark.parametrize(
    ("busy", "setting"), [("api", "API_PORT"), ("sandbox", "WB_SANDBOX_PORT"), ("mail", "MAIL_SINK_PORT")]
)
def test_make_run_with_a_port_taken_stops_before_starting_anything_and_names_the_setting(
    var_dir, tmp_path, busy, setting
):
    # Given another process listening on one of make run's ports (on every interface)
    ports = {"api": free_port(), "sandbox": free_port(), "mail": free_port()}
    with socket.socket() as squatter:
        squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        squatter.bind(("0.0.0.0", ports[busy]))
        squatter.listen()

        # When make run starts
        run = start_run(var_dir, tmp_path / "run.log", ports["api"], ports["sandbox"], ports["mail"])
        try:
            code = run.wait(timeout=30)
        finally:
            run.close()

    # Then it exits non-zero at once, naming the port and the setting that moves it, and claims nothing
    log = run.log()
    assert code != 0, log
    assert f"port {ports[busy]}" in log and setting in log, log
    assert "is up" not in log, log
    assert not (var_dir / "pg").exists(), "the embedded servers started anyway"
