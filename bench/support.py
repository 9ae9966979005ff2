"""A throwaway database and Redis database for a benchmark run, and an in-process worker."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import redis
from dramatiq import Worker
from dramatiq.brokers.redis import RedisBroker

from gatehouse.crypto import generate_key
from gatehouse.db import make_engine
from gatehouse.dispatch import Dispatcher
from gatehouse.jobs import JobMessage
from gatehouse.migrate import upgrade
from gatehouse.settings import Settings, load_settings
from gatehouse.workers import liveness_key

BENCH_REDIS_DB = 14
BIN = Path(sys.executable).parent  # the venv's scripts (gatehouse-worker)
REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Result:
    """One figure a benchmark reports, against its target: what ``make bench`` collects into its report.

    ``value`` and ``target`` are in the same unit; ``higher_is_better`` says which
    side of the target passes (a ratio to a floor: higher; a latency: lower).
    """

    bench: str  # the module, e.g. "bench_catalog"
    name: str  # the figure, e.g. "bulk/floor (price patch)"
    value: float
    target: float | None = None
    unit: str = "ratio"
    higher_is_better: bool = True

    @property
    def met(self) -> bool | None:
        if self.target is None:
            return None
        return self.value >= self.target if self.higher_is_better else self.value <= self.target


@contextlib.contextmanager
def bench_settings(*, redis_db: int = BENCH_REDIS_DB, **overrides: object) -> Iterator[Settings]:
    """A throwaway database (migrated, dropped after) and Redis database ``redis_db`` (flushed before
    and after: 14 unless another bench runs there at the same time)."""
    base = Settings()
    server = (base.database_url or "postgresql://postgres@127.0.0.1:5432/postgres").replace(
        "postgresql+psycopg://", "postgresql://"
    )
    name = f"gatehouse_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    redis_url = (base.redis_url or "redis://127.0.0.1:6379/0").rsplit("/", 1)[0] + f"/{redis_db}"
    settings = load_settings(
        database_url=server.rsplit("/", 1)[0] + f"/{name}",
        redis_url=redis_url,
        worker_idle_poll_ms=20,
        worker_quiet_poll_ms=20,
        token_encryption_key=generate_key(),
        console_secret=uuid.uuid4().hex,
        session_cookie_secure=False,
        **overrides,
    )
    engine = make_engine(settings, bounded_waits=False)
    upgrade(engine)
    engine.dispose()
    redis.Redis.from_url(redis_url).flushdb()
    try:
        yield settings
    finally:
        redis.Redis.from_url(redis_url).flushdb()
        with psycopg.connect(server, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextlib.contextmanager
def running_worker(broker, threads: int = 8) -> Iterator[Worker]:
    worker = Worker(broker, worker_threads=threads, worker_timeout=20)
    broker.emit_after("process_boot")
    worker.start()
    try:
        yield worker
    finally:
        worker.stop(timeout=30_000)


def percentile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


def latencies_ms(call: Callable[[Any], object], args: Sequence[Any]) -> list[float]:
    """``call(arg)`` for each of ``args``, after a warm-up call with the last: each one's time in ms."""
    call(args[-1])
    times = []
    for arg in args:
        t0 = time.perf_counter()
        call(arg)
        times.append((time.perf_counter() - t0) * 1000)
    return times


def _env_value(value: object) -> str:
    if hasattr(value, "get_secret_value"):
        value = value.get_secret_value()
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(map(str, value))
    if isinstance(value, dict):
        return json.dumps(value)
    return str(value)


def process_env(settings: Settings, **extra: object) -> dict[str, str]:
    """The environment of a real Gatehouse process with these settings (every field set explicitly,
    e.g. by ``bench_settings``: the stores, the key, WORKER_IDLE_POLL_MS), plus ``extra``.

    PYTHONPATH is the repo root, so ``bench.*`` job modules are importable there.
    """
    fields = {name: getattr(settings, name) for name in settings.model_fields_set}
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/tmp"),
        "PYTHONPATH": str(REPO),
    }
    env.update({name.upper(): _env_value(v) for name, v in {**fields, **extra}.items() if v is not None})
    return env


class WorkerProcesses:
    """``gatehouse-worker --processes N --threads M`` in its own session, its output in a log file."""

    def __init__(
        self, settings: Settings, *, processes: int, threads: int, args: Sequence[str] = (), **extra: object
    ) -> None:
        self.settings = settings
        self.processes = processes
        self.log_path = Path(tempfile.mkstemp(prefix="bench-worker-", suffix=".log")[1])
        argv = [
            str(BIN / "gatehouse-worker"),
            "--processes",
            str(processes),
            "--threads",
            str(threads),
            *args,
        ]
        with open(self.log_path, "wb") as log:
            self.popen = subprocess.Popen(
                argv,
                env=process_env(settings, **extra),
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: a failed stop can kill the whole tree
                cwd=REPO,
            )

    def log_tail(self, chars: int = 4000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:]

    def alive(self) -> int:
        """How many worker processes have a liveness key (written at boot, before they consume)."""
        client = redis.Redis.from_url(self.settings.redis_url)
        pattern = liveness_key(self.settings.broker_namespace, "*")
        try:
            return sum(1 for _ in client.scan_iter(match=pattern, count=1000))
        finally:
            client.close()

    def wait_alive(self, timeout_s: float = 60) -> None:
        deadline = time.monotonic() + timeout_s
        while self.alive() < self.processes:
            if self.popen.poll() is not None:
                raise RuntimeError(
                    f"gatehouse-worker exited with {self.popen.returncode}:\n{self.log_tail()}"
                )
            if time.monotonic() > deadline:
                raise RuntimeError(f"gatehouse-worker not alive after {timeout_s} s:\n{self.log_tail()}")
            time.sleep(0.05)

    def stop(self) -> int:
        """SIGTERM to the top process (it stops its children), wait; kill the group if it hangs."""
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout=self.settings.shutdown_timeout_ms / 1000 + 30)
            except subprocess.TimeoutExpired:
                print(f"gatehouse-worker did not stop on SIGTERM; killing it. Log:\n{self.log_tail()}")
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.popen.pid, signal.SIGKILL)  # what is left of the group (nothing, normally)
        rc = self.popen.wait()
        if rc != 0:
            print(f"gatehouse-worker exited with {rc}. Log:\n{self.log_tail()}")
        else:
            self.log_path.unlink(missing_ok=True)
        return rc


@contextlib.contextmanager
def worker_processes(
    settings: Settings, *, processes: int = 2, threads: int = 4, args: Sequence[str] = (), **extra: object
) -> Iterator[WorkerProcesses]:
    """Real worker processes for a benchmark: started, alive (every process's liveness key), stopped.

    ``args`` are more options of the CLI (``--queues …``), ``extra`` more settings for them
    (``job_modules="gatehouse_worker.jobs,bench.x"``).
    """
    workers = WorkerProcesses(settings, processes=processes, threads=threads, args=args, **extra)
    try:
        workers.wait_alive()
        yield workers
    finally:
        workers.stop()


def send_pipelined(gh, queue: str, messages: list[JobMessage]) -> float:
    """Every job message in one Redis pipeline, one round trip; returns when that round trip began.

    The broker's dispatch script is queued client-side (no consumer sees any message yet), so the
    producer is no part of what a benchmark times from here.
    """
    s = gh.settings
    gh.broker.flush(queue)  # empty anyway; also caches what the broker reads from Redis once
    pipe = gh.redis.pipeline(transaction=False)
    queued = RedisBroker(
        client=pipe,
        namespace=s.broker_namespace,
        heartbeat_timeout=s.broker_heartbeat_timeout_ms,
        maintenance_chance=s.broker_maintenance_chance,
        middleware=[],
    )
    dispatcher = Dispatcher(queued)
    for message in messages:
        dispatcher.send(message)
    start = time.time()
    pipe.execute()
    return start


def console_cookie(client, token: str) -> dict[str, str]:
    """The header of a console session signed in with ``token`` on a falcon test ``client``."""
    from gatehouse_api.console.session import COOKIE

    login = client.simulate_post(
        "/console/login",
        body=f"token={token}",
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    return {"Cookie": f"{COOKIE}={login.cookies[COOKIE].value}"}
