"""`make test` on a machine where nothing answers at DATABASE_URL / REDIS_URL: embedded servers, then none left."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import psutil
import psycopg
import pytest
import redis

from tests.support.processes import REPO

pytest.importorskip("pgserver", reason="the embedded servers need the 'embedded' dependency group")

CLOSED_PG = "postgresql://postgres@127.0.0.1:1/postgres"  # port 1: nothing listens, a refusal at once
CLOSED_REDIS = "redis://127.0.0.1:1/0"
# One test on the stores in this process, one on real API and worker processes.
SUBSET = (
    "tests/integration/test_job_store.py::test_a_created_job_is_sent_after_its_write_and_a_live_duplicate_is_not "
    "tests/e2e/test_job_api.py::test_50_concurrent_identical_posts_make_one_job_and_one_message"
)


def pg_answers(url: str) -> bool:
    try:
        psycopg.connect(url, connect_timeout=3).close()
        return True
    except psycopg.Error:
        return False


def redis_answers(url: str) -> bool:
    try:
        return bool(redis.Redis.from_url(url, socket_connect_timeout=3).ping())
    except (redis.RedisError, OSError):
        return False


def processes_under(path: Path) -> list[str]:
    """Processes started from, or working in, ``path`` (a server left running would be one)."""
    found = []
    for proc in psutil.process_iter(["pid", "cmdline", "cwd"]):
        with_path = " ".join(proc.info["cmdline"] or []) + " " + (proc.info["cwd"] or "")
        if str(path) in with_path:
            found.append(f"{proc.info['pid']}: {with_path}")
    return found


@pytest.fixture
def stores_dir():
    path = Path(tempfile.mkdtemp(prefix="gh-test-stores-"))
    path.chmod(0o755)  # embedded PostgreSQL runs as its own system user when we are root
    yield path
    leftovers = processes_under(path)
    for line in leftovers:  # never leave a server behind, even when the test failed
        os.kill(int(line.split(":")[0]), 9)
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.timeout(240)
def test_make_test_runs_on_embedded_servers_when_nothing_answers_and_stops_them(stores_dir):
    # Given a machine where nothing answers at the configured PostgreSQL and Redis
    assert not pg_answers(CLOSED_PG) and not redis_answers(CLOSED_REDIS)
    env = {
        **os.environ,
        "DATABASE_URL": CLOSED_PG,
        "REDIS_URL": CLOSED_REDIS,
        "GATEHOUSE_TEST_STORES": str(stores_dir),
        "GATEHOUSE_TEST_REDIS_DB": "3",
    }
    env.pop("PYTEST_CURRENT_TEST", None)

    # When `make test` runs a few tests
    result = subprocess.run(
        ["make", "--no-print-directory", "test", f"ARGS=-q -p no:cacheprovider {SUBSET}"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=200,
    )
    out = result.stdout + result.stderr

    # Then they ran, and passed, on embedded servers under the stores directory …
    assert result.returncode == 0, out
    passed = re.search(r"(\d+) passed", out)
    assert passed and int(passed.group(1)) == 2, out
    assert not re.search(r"\d+ (failed|error|skipped)", out), out
    pg = re.search(r"^PostgreSQL: embedded at (\S+) \(nothing answered at (\S+);.*, stopped\)$", out, re.M)
    rd = re.search(r"^Redis: embedded at (\S+) \(nothing answered at (\S+);.*, stopped\)$", out, re.M)
    assert pg and rd, out
    assert (pg.group(2), rd.group(2)) == (CLOSED_PG, CLOSED_REDIS)
    assert str(stores_dir) in pg.group(1) and str(stores_dir) in rd.group(1)
    # … which no longer answer, and no process of theirs is left
    assert not pg_answers(pg.group(1)) and not redis_answers(rd.group(1))
    assert processes_under(stores_dir) == []
    assert not (stores_dir / "pg" / "postmaster.pid").exists()
