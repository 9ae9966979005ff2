"""Fixtures shared by every test: real PostgreSQL and Redis, never fakes.

- PostgreSQL: DATABASE_URL names the server (default 127.0.0.1:5432, user
  postgres); the session creates its own database, migrates it to head and
  drops it at the end. Each test starts from empty tables.
- Redis: REDIS_URL names the server (default 127.0.0.1:6379); tests use its
  database 15 (GATEHOUSE_TEST_REDIS_DB, for a second test run beside this one)
  and flush it before and after each test.
- ``make test`` runs the tests on two processes (pytest-xdist, a test file
  each at a time): each has its own database, and its own Redis database
  counted down from that one (15, 14).

Where nothing answers at those URLs, the session starts the embedded PostgreSQL
and Redis of ``make run`` under var/test-stores, runs against them and stops
them at the end (``tests.support.stores``). Only a test that needs what the
machine truly lacks (a browser, podman) is skipped, and the end of the run says
what was skipped and how to get it; under CI=true that is a failure instead.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg
import pytest
import redis
from sqlalchemy import text

from gatehouse.composition import Components, bootstrap
from gatehouse.db import make_engine
from gatehouse.migrate import upgrade
from gatehouse.settings import Settings, load_settings
from tests.support.processes import REPO, Processes
from tests.support.stores import SessionStores, StoreUnavailable

IN_CI = os.environ.get("CI") == "true"
XDIST_WORKER = os.environ.get("PYTEST_XDIST_WORKER")  # "gw0", "gw1"… in a process of `pytest -n N`
TEST_REDIS_DB = int(os.environ.get("GATEHOUSE_TEST_REDIS_DB", "15")) - int((XDIST_WORKER or "gw0")[2:])
_base = Settings()
# The configured servers, or embedded ones started on first use where nothing answers there.
STORES = SessionStores.from_settings(_base.database_url, _base.redis_url)

# Timings for tests: the production rules at millisecond scale.
NO_WB = "http://127.0.0.1:9"  # the discard port: connection refused
FAST = dict(
    job_lease_ms=3_000,
    job_heartbeat_ms=500,
    retry_delay_scale=200 / 60_000,  # the 60 s ladder as 200, 400, 800 … ms
    reconcile_grace_ms=500,
    shutdown_timeout_ms=10_000,
    worker_idle_poll_ms=20,
    worker_quiet_poll_ms=20,
    broker_heartbeat_timeout_ms=3_000,
    broker_maintenance_chance=100_000,
    # No test ever reaches the real WB: a process that calls WB without a sandbox (a new account's
    # account-verify job) meets a loopback port nobody listens on, and fails there.
    wb_api_base_url=NO_WB,
)
ADMIN_TOKEN = "test-admin-token-0123456789abcdef"  # ADMIN_TOKEN_MIN (32) characters or more
CONSOLE_SECRET = "test-console-secret"
TOKEN_KEY = "q4uJHOU5SmbaEwcXmJ6NyajP8mZTD55dLIb592WKtPo="  # a Fernet key for tests only


def unavailable(what: str, exc: Exception) -> None:
    message = f"{what} is not reachable ({exc}); set DATABASE_URL / REDIS_URL or start it"
    if IN_CI:
        pytest.fail(message)
    pytest.skip(message)


def missing_tool(message: str) -> None:
    """A test needs something this machine lacks (``message``: "no chromium — how to get it").

    Skipped here, and counted in the run's closing summary; a failure under CI=true.
    """
    if IN_CI:
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="session")
def pg_server() -> str:
    """The session's PostgreSQL server (URL of its ``postgres`` database)."""
    try:
        return STORES.postgres_url()
    except StoreUnavailable as exc:
        unavailable("PostgreSQL", exc)


@pytest.fixture(scope="session")
def redis_server() -> str:
    try:
        return STORES.redis_url()
    except StoreUnavailable as exc:
        unavailable("Redis", exc)


def with_database(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{name}"))


def with_redis_db(url: str, db: int) -> str:
    parts = urlsplit(url)
    if parts.scheme == "unix":  # unix:///path/redis.sock?db=N (urlunsplit would drop the empty host's //)
        query = dict(parse_qsl(parts.query), db=str(db))
        return f"unix://{parts.path}?{urlencode(query)}"
    return urlunsplit(parts._replace(path=f"/{db}"))


def _libpq(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://", 1)


@pytest.fixture(scope="session")
def database_url(pg_server: str) -> Iterator[str]:
    name = f"gatehouse_test_{uuid.uuid4().hex[:10]}"
    try:
        admin = psycopg.connect(_libpq(pg_server), autocommit=True, connect_timeout=3)
    except psycopg.OperationalError as exc:
        unavailable("PostgreSQL", exc)
    with admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    url = with_database(pg_server, name)
    engine = make_engine(load_settings(database_url=url), bounded_waits=False)
    upgrade(engine)
    engine.dispose()
    yield url
    with psycopg.connect(_libpq(pg_server), autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def redis_url(redis_server: str) -> str:
    url = with_redis_db(redis_server, TEST_REDIS_DB)
    try:
        redis.Redis.from_url(url, socket_connect_timeout=3).ping()
    except redis.RedisError as exc:
        unavailable("Redis", exc)
    return url


@pytest.fixture
def clean(database_url: str, redis_url: str) -> Iterator[None]:
    """Empty tables and an empty Redis database before and after the test."""

    def wipe() -> None:
        with psycopg.connect(_libpq(database_url), autocommit=True) as conn:
            tables = [
                r[0]
                for r in conn.execute(
                    "SELECT tablename FROM pg_tables WHERE schemaname = 'public' AND tablename <> 'alembic_version'"
                )
            ]
            # DELETE, not TRUNCATE: on these few rows it takes 1 ms where TRUNCATE takes 200
            # (new files for every table), twice per test. The replica role skips the foreign
            # key triggers, so the order of the tables does not matter.
            with conn.transaction():
                conn.execute("SET LOCAL session_replication_role = replica")
                conn.execute("; ".join(f'DELETE FROM "{t}"' for t in tables if t != "module_registrations"))
                # Every module installed and enabled, as the migration leaves them.
                conn.execute("UPDATE module_registrations SET installed = true, enabled = true")
        redis.Redis.from_url(redis_url).flushdb()

    wipe()
    yield
    wipe()


@pytest.fixture
def settings(database_url: str, redis_url: str) -> Settings:
    return load_settings(
        database_url=database_url,
        redis_url=redis_url,
        admin_token=ADMIN_TOKEN,
        console_secret=CONSOLE_SECRET,
        session_cookie_secure=False,
        token_encryption_key=TOKEN_KEY,
        **FAST,
    )


@pytest.fixture
def gh(settings: Settings, clean: None) -> Iterator[Components]:
    """The producer-side composition, in this process."""
    gatehouse = bootstrap(settings)
    yield gatehouse
    gatehouse.close()


@pytest.fixture
def sql(gh: Components):
    """Run a SQL statement on the test database; returns the rows."""

    def run(statement: str, **params: object) -> list:
        with gh.engine.begin() as conn:
            result = conn.execute(text(statement), params)
            return list(result) if result.returns_rows else []

    return run


def base_process_env(database_url: str, redis_url: str) -> dict[str, str]:
    """Environment of the real processes a test starts: the test stores, fast timings, probe jobs."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/tmp"),
        "PYTHONPATH": str(REPO),
        "DATABASE_URL": database_url,
        "REDIS_URL": redis_url,
        "JOB_MODULES": "gatehouse_worker.jobs,tests.support.probe",
        "LOG_LEVEL": "INFO",
        "API_WORKERS": "1",  # a test that needs more (a state shared by workers) asks for them
        "ADMIN_TOKEN": ADMIN_TOKEN,
        "CONSOLE_SECRET": CONSOLE_SECRET,
        # The console over plain http on loopback: a Secure cookie would never be sent back.
        "SESSION_COOKIE_SECURE": "false",
        "TOKEN_ENCRYPTION_KEY": TOKEN_KEY,
    }
    env.update({name.upper(): str(value) for name, value in FAST.items()})
    return env


@pytest.fixture
def process_env(settings: Settings) -> dict[str, str]:
    return base_process_env(settings.database_url, settings.redis_url)


@pytest.fixture
def processes(process_env: dict[str, str], tmp_path, clean: None) -> Iterator[Processes]:
    procs = Processes(process_env, tmp_path)
    yield procs
    for log in procs.close():
        print(log)  # shown by pytest when the test failed


@contextlib.contextmanager
def shared_api(database_url: str, redis_url: str, workdir: Path, **env: str) -> Iterator[str]:
    """One `gatehouse-api` (BACKEND_ROLE=api, plus ``env``) for a module whose tests only send it requests.

    A gunicorn start costs a test about 1.5 s; the tables and Redis are still wiped around each test
    (`clean`), which a running API does not mind: it holds no state of its own between requests.
    """
    procs = Processes(base_process_env(database_url, redis_url), workdir)
    try:
        yield procs.api(env={"BACKEND_ROLE": "api", **env})[1]
    finally:
        for log in procs.close():
            print(log)


@pytest.fixture(scope="module")
def module_api(database_url: str, redis_url: str, tmp_path_factory) -> Iterator[str]:
    """The URL of a `shared_api` with the default settings."""
    with shared_api(database_url, redis_url, tmp_path_factory.mktemp("api")) as url:
        yield url


# -- the end of the run: stop the embedded servers, say what ran where and what did not run ----


def pytest_configure(config) -> None:
    if config.getoption("numprocesses", None) and not hasattr(config, "workerinput"):
        # The controller of `pytest -n N` resolves the stores before it starts its test processes:
        # embedded ones are started once and exported (DATABASE_URL / REDIS_URL), so its processes
        # find them answering instead of each starting its own over the same directory.
        for resolve in (STORES.postgres_url, STORES.redis_url):
            with contextlib.suppress(StoreUnavailable):  # the tests say so, each where it needs it
                resolve()


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session) -> None:
    # After the session's fixtures are torn down (their databases dropped), before the summary.
    STORES.stop()


def pytest_unconfigure(config) -> None:
    STORES.stop()  # an interrupted run too; nothing left to do after sessionfinish


def pytest_terminal_summary(terminalreporter) -> None:
    if lines := STORES.lines():
        terminalreporter.section("stores")
        for line in lines:
            terminalreporter.line(line)
    if lines := not_run(terminalreporter.stats.get("skipped", [])):
        terminalreporter.section("not run on this machine")
        for line in lines:
            terminalreporter.line(line)


def not_run(skipped_reports) -> list[str]:
    """One line per reason a test was skipped (its message says how to get what was missing), most first."""
    skipped: dict[str, list[str]] = {}
    for report in skipped_reports:
        if isinstance(report.longrepr, tuple):
            reason = report.longrepr[2].removeprefix("Skipped: ")
            skipped.setdefault(reason, []).append(report.nodeid.split("::")[0])
    lines = []
    for reason, files in sorted(skipped.items(), key=lambda item: -len(item[1])):
        where = ", ".join(sorted({str(Path(f).parent) for f in files}))
        lines.append(f"skipped {len(files)} test{'s' * (len(files) != 1)} ({where}): {reason}")
    return lines
