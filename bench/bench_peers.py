"""The job path against its peers: Gatehouse, PgQueuer, procrastinate, Celery and bare Dramatiq side by side.

Every system runs trivial jobs on real worker processes, the nearest equivalent of
``gatehouse-worker --processes 2 --threads 8`` each, against the same PostgreSQL
(a throwaway database of its own) and Redis (its own keys in the bench's Redis
database), one system after the other within each round, so load and drift favour none:

- Gatehouse: ``gatehouse-worker --processes 2 --threads 8 --queues bench-peers`` (a
  dedicated pool for the job type), jobs submitted through ``JobHandlers.submit``;
- PgQueuer 1.6: 2 worker processes with its defaults (10 rows per fetch, batched
  completions), jobs enqueued with ``Queries.enqueue``;
- procrastinate 3: 2 ``procrastinate worker --concurrency 8`` processes, ``defer_async``;
- Celery 5 (Redis broker only, no result backend): 2 ``celery worker --pool threads
  --concurrency 8`` processes, ``delay``;
- bare Dramatiq: ``dramatiq --processes 2 --threads 8``, no middleware, ``send``.

Each round and system measures:

- **backlog**: PEERS_BACKLOG jobs enqueued first, then the workers started; the
  start-up is from the spawn to the first job taken off the queue, the drain rate
  from then to the last job done;
- **one by one**: with those workers warm, one producer submits PEERS_JOBS jobs one
  at a time; jobs/s from the first submit to the last job done (end to end).

Done is each system's own durable state where it has one (Gatehouse: no live row;
PgQueuer: its queue table empty; procrastinate: no todo/doing job); Celery and bare
Dramatiq have none, so their body counts itself with one Redis INCR. The outside
polls every 10 ms. On a machine shared with other work the rates swing with its
load; the CPU the worker processes spent per drained job (psutil) swings less. Prints jobs/s per system and mode (the median of PEERS_ROUNDS
rounds) and the ratio Gatehouse/peer; the figure with a target is the backlog drain
against PgQueuer's (≥ 1.0).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import psycopg
import redis

from bench.support import BIN, REPO, Result, bench_settings, process_env

ROUNDS = int(os.environ.get("PEERS_ROUNDS", "2"))
BACKLOG = int(os.environ.get("PEERS_BACKLOG", "5000"))
JOBS = int(os.environ.get("PEERS_JOBS", "2000"))
REDIS_DB = int(os.environ.get("PEERS_REDIS_DB", "14"))
SYSTEMS = os.environ.get("PEERS_SYSTEMS", "gatehouse,pgqueuer,procrastinate,celery,dramatiq").split(",")
PROCESSES, THREADS = 2, 8
POLL_S = 0.01
DEADLINE_S = 600  # a run that takes longer than this has hung: fail it
DONE_KEY = "peers:done"


class Workers:
    """Worker processes of one system, each in its own session, their output in one log file."""

    def __init__(self, argvs: list[list[str]], env: dict[str, str]) -> None:
        self.log = Path(tempfile.mkstemp(prefix="bench-peers-", suffix=".log")[1])
        self.spawned = time.perf_counter()
        with open(self.log, "wb") as out:
            self.procs = [
                subprocess.Popen(
                    argv, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=REPO, start_new_session=True
                )
                for argv in argvs
            ]

    def cpu_s(self) -> float:
        """CPU seconds (user + system) the worker processes and their children have used so far."""
        total = 0.0
        for p in self.procs:
            with contextlib.suppress(psutil.NoSuchProcess):
                top = psutil.Process(p.pid)
                for proc in [top, *top.children(recursive=True)]:
                    with contextlib.suppress(psutil.NoSuchProcess):
                        times = proc.cpu_times()
                        total += times.user + times.system
        return total

    def check(self) -> None:
        for p in self.procs:
            if p.poll() is not None:
                raise RuntimeError(f"{p.args[0]} exited with {p.returncode}:\n{self.log.read_text()[-3000:]}")

    def stop(self) -> None:
        for p in self.procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        self.log.unlink(missing_ok=True)


def wait_for(check: Callable[[], bool], workers: Workers, what: str) -> float:
    deadline = time.perf_counter() + DEADLINE_S
    while not check():
        workers.check()
        if time.perf_counter() > deadline:
            raise RuntimeError(f"{what}: not within {DEADLINE_S} s:\n{workers.log.read_text()[-3000:]}")
        time.sleep(POLL_S)
    return time.perf_counter()


@contextlib.contextmanager
def database(server: str) -> Iterator[str]:
    """A throwaway database on the bench's PostgreSQL server: its DSN."""
    name = f"peers_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield server.rsplit("/", 1)[0] + f"/{name}"
    finally:
        with psycopg.connect(server, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


class System:
    """One system under test: how to fill its queue, start its workers, submit a job, see progress."""

    name: str
    total = 0  # how many jobs the current measurement waits for

    def fill(self, n: int) -> None: ...
    def workers(self) -> Workers: ...
    def submit(self, n: int) -> None: ...
    def waiting(self) -> int: ...
    def done(self) -> int: ...
    def reset(self) -> None: ...
    def close(self) -> None: ...


class Gatehouse(System):
    name = "Gatehouse"

    def __init__(self, settings) -> None:
        from bench.peers.gatehouse_noop import NOOP
        from gatehouse_worker.wiring import build

        self.settings, self.noop = settings, NOOP
        self.gh = build(settings)
        self.db = psycopg.connect(settings.libpq_url, autocommit=True)

    def fill(self, n: int) -> None:
        with self.gh.uow.begin() as tx:
            self.gh.jobs.create_many(tx, self.noop, [(uuid.uuid4(), {}) for _ in range(n)])

    def workers(self) -> Workers:
        env = process_env(self.settings, job_modules="gatehouse_worker.jobs,bench.peers.gatehouse_noop")
        argv = [str(BIN / "gatehouse-worker"), "--processes", str(PROCESSES), "--threads", str(THREADS)]
        return Workers([[*argv, "--queues", self.noop.queue]], env)

    def submit(self, n: int) -> None:
        for _ in range(n):
            self.gh.job_handlers.submit(self.noop, account_id=None)

    def waiting(self) -> int:
        return self.db.execute("SELECT count(*) FROM jobs WHERE state = 'waiting'").fetchone()[0]

    def done(self) -> int:
        live = "SELECT count(*) FROM jobs WHERE state IN ('waiting', 'active', 'delayed')"
        return self.total - self.db.execute(live).fetchone()[0]

    def reset(self) -> None:
        self.db.execute("DELETE FROM jobs")

    def close(self) -> None:
        self.db.close()
        self.gh.close()


class PgQueuer(System):
    name = "PgQueuer"

    def __init__(self, dsn: str) -> None:
        from pgqueuer.adapters.drivers.psycopg import PsycopgDriver
        from pgqueuer.adapters.persistence.queries import Queries

        self.dsn = dsn
        self.loop = asyncio.new_event_loop()
        self.conn = self.loop.run_until_complete(psycopg.AsyncConnection.connect(dsn, autocommit=True))
        self.queries = Queries(PsycopgDriver(self.conn))
        self.loop.run_until_complete(self.queries.install())
        self.db = psycopg.connect(dsn, autocommit=True)

    def fill(self, n: int) -> None:
        self.loop.run_until_complete(self.queries.enqueue(["noop"] * n, [None] * n, [0] * n))

    def workers(self) -> Workers:
        argv = [sys.executable, "-m", "bench.peers.pgqueuer_worker"]
        return Workers([argv] * PROCESSES, {**os.environ, "PEERS_DSN": self.dsn, "PYTHONPATH": str(REPO)})

    def submit(self, n: int) -> None:
        async def one_by_one() -> None:
            for _ in range(n):
                await self.queries.enqueue("noop", None)

        self.loop.run_until_complete(one_by_one())

    def waiting(self) -> int:
        return self.db.execute("SELECT count(*) FROM pgqueuer WHERE status = 'queued'").fetchone()[0]

    def done(self) -> int:
        return self.total - self.db.execute("SELECT count(*) FROM pgqueuer").fetchone()[0]

    def reset(self) -> None:
        self.db.execute("DELETE FROM pgqueuer")

    def close(self) -> None:
        self.db.close()
        self.loop.run_until_complete(self.conn.close())
        self.loop.close()


class Procrastinate(System):
    name = "procrastinate"

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        os.environ["PEERS_DSN"] = dsn  # the app module reads it at import
        from bench.peers import procrastinate_app

        self.app = procrastinate_app.app
        self.loop = asyncio.new_event_loop()
        self.loop.run_until_complete(self.app.open_async())
        self.loop.run_until_complete(self.app.schema_manager.apply_schema_async())
        self.task = procrastinate_app.noop
        self.db = psycopg.connect(dsn, autocommit=True)

    def fill(self, n: int) -> None:
        async def many() -> None:
            await self.task.batch_defer_async(*({} for _ in range(n)))

        self.loop.run_until_complete(many())

    def workers(self) -> Workers:
        argv = [
            str(BIN / "procrastinate"),
            "--app",
            "bench.peers.procrastinate_app.app",
            "worker",
            "--concurrency",
            str(THREADS),
        ]
        return Workers([argv] * PROCESSES, {**os.environ, "PEERS_DSN": self.dsn, "PYTHONPATH": str(REPO)})

    def submit(self, n: int) -> None:
        async def one_by_one() -> None:
            for _ in range(n):
                await self.task.defer_async()

        self.loop.run_until_complete(one_by_one())

    def waiting(self) -> int:
        sql = "SELECT count(*) FROM procrastinate_jobs WHERE status = 'todo'"
        return self.db.execute(sql).fetchone()[0]

    def done(self) -> int:
        sql = "SELECT count(*) FROM procrastinate_jobs WHERE status = 'succeeded'"
        return self.db.execute(sql).fetchone()[0]

    def reset(self) -> None:
        self.db.execute("DELETE FROM procrastinate_jobs")

    def close(self) -> None:
        self.db.close()
        self.loop.run_until_complete(self.app.close_async())
        self.loop.close()


class RedisCounted(System):
    """A system without a durable done state: its body INCRs DONE_KEY."""

    def __init__(self, redis_url: str) -> None:
        self.redis_url = redis_url
        self.redis = redis.Redis.from_url(redis_url)
        os.environ["PEERS_REDIS_URL"], os.environ["PEERS_DONE_KEY"] = redis_url, DONE_KEY

    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            "PEERS_REDIS_URL": self.redis_url,
            "PEERS_DONE_KEY": DONE_KEY,
            "PYTHONPATH": str(REPO),
        }

    def done(self) -> int:
        return int(self.redis.get(DONE_KEY) or 0)

    def reset(self) -> None:
        self.redis.delete(DONE_KEY)

    def close(self) -> None:
        self.redis.close()


class Celery(RedisCounted):
    name = "Celery"

    def __init__(self, redis_url: str) -> None:
        super().__init__(redis_url)
        from bench.peers import celery_app

        self.task = celery_app.noop

    def fill(self, n: int) -> None:
        with self.task.app.producer_or_acquire() as producer:
            for _ in range(n):
                self.task.apply_async(producer=producer)

    def workers(self) -> Workers:
        argv = [
            str(BIN / "celery"),
            "-A",
            "bench.peers.celery_app",
            "worker",
            "--pool",
            "threads",
            "--concurrency",
            str(THREADS),
            "--loglevel",
            "WARNING",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
        ]
        return Workers([[*argv, "-n", f"w{i}@%h"] for i in range(PROCESSES)], self.env())

    def submit(self, n: int) -> None:
        for _ in range(n):
            self.task.delay()

    def waiting(self) -> int:
        return self.redis.llen("celery")


class Dramatiq(RedisCounted):
    name = "bare Dramatiq"

    def __init__(self, redis_url: str) -> None:
        super().__init__(redis_url)
        from bench.peers import dramatiq_app

        self.actor = dramatiq_app.noop

    def fill(self, n: int) -> None:
        for _ in range(n):
            self.actor.send()

    def workers(self) -> Workers:
        argv = [
            str(BIN / "dramatiq"),
            "bench.peers.dramatiq_app",
            "--processes",
            str(PROCESSES),
            "--threads",
            str(THREADS),
        ]
        return Workers([argv], self.env())

    def submit(self, n: int) -> None:
        for _ in range(n):
            self.actor.send()

    def waiting(self) -> int:
        return self.redis.llen("peers-dramatiq:peers")


def measure(system: System) -> tuple[float, float, float, float]:
    """(start-up s, backlog drain jobs/s, one-by-one jobs/s, worker CPU µs per drained job) of one round."""
    system.reset()
    system.total = BACKLOG
    system.fill(BACKLOG)
    workers = system.workers()
    try:
        first = wait_for(lambda: system.waiting() < BACKLOG, workers, f"{system.name}: first job")
        cpu = workers.cpu_s()
        last = wait_for(lambda: system.done() >= BACKLOG, workers, f"{system.name}: backlog")
        cpu_us = (workers.cpu_s() - cpu) / BACKLOG * 1e6
        startup, drain = first - workers.spawned, BACKLOG / (last - first)
        system.reset()
        system.total = JOBS
        start = time.perf_counter()
        system.submit(JOBS)
        last = wait_for(lambda: system.done() >= JOBS, workers, f"{system.name}: one by one")
        return startup, drain, JOBS / (last - start), cpu_us
    finally:
        workers.stop()


def main() -> list[Result]:
    print(
        f"{ROUNDS} round(s); backlog {BACKLOG:,} jobs, one by one {JOBS:,}; "
        f"{PROCESSES} processes x {THREADS} threads each; load average {os.getloadavg()[0]:.1f}"
    )
    with bench_settings(redis_db=REDIS_DB) as settings:
        server = settings.libpq_url
        with database(server) as pgq_dsn, database(server) as proc_dsn:
            makers = {
                "gatehouse": lambda: Gatehouse(settings),
                "pgqueuer": lambda: PgQueuer(pgq_dsn),
                "procrastinate": lambda: Procrastinate(proc_dsn),
                "celery": lambda: Celery(settings.redis_url),
                "dramatiq": lambda: Dramatiq(settings.redis_url),
            }
            systems = [makers[name]() for name in SYSTEMS]
            runs: dict[str, list[tuple[float, float, float, float]]] = {s.name: [] for s in systems}
            try:
                for r in range(ROUNDS):
                    for system in systems:
                        runs[system.name].append(measure(system))
                        s, d, o, c = runs[system.name][-1]
                        print(
                            f"  round {r + 1} {system.name:14s}: start-up {s * 1000:5.0f} ms, "
                            f"backlog {d:6.0f} jobs/s ({c:4.0f} µs CPU/job), one by one {o:6.0f} jobs/s",
                            flush=True,
                        )
            finally:
                for system in systems:
                    system.close()
    med = {name: [statistics.median(r[i] for r in rs) for i in range(4)] for name, rs in runs.items()}
    names = list(med)
    print(f"\n{'':34s}" + "".join(f"{n:>15s}" for n in names))
    rows = (
        ("one producer, one by one (jobs/s)", 2, "{:15.0f}"),
        (f"backlog of {BACKLOG:,} (jobs/s)", 1, "{:15.0f}"),
        ("start-up to first job (ms)", 0, "{:15.0f}"),
        ("worker CPU per drained job (µs)", 3, "{:15.0f}"),
    )
    for label, i, fmt in rows:
        scale = 1000 if i == 0 else 1
        print(f"{label:34s}" + "".join(fmt.format(med[n][i] * scale) for n in names))
    results = []
    if "Gatehouse" in med:
        ours = med["Gatehouse"]
        for n in names[1:] if names[0] == "Gatehouse" else [n for n in names if n != "Gatehouse"]:
            one, back = ours[2] / med[n][2], ours[1] / med[n][1]
            cpu = ours[3] / med[n][3]
            print(f"Gatehouse/{n}: one by one {one:.2f}, backlog {back:.2f}, worker CPU per job {cpu:.2f}")
            target = 1.0 if n == "PgQueuer" else None
            results.append(Result("bench_peers", f"backlog drain, gatehouse/{n}", back, target))
            results.append(Result("bench_peers", f"one by one, gatehouse/{n}", one))
            results.append(Result("bench_peers", f"worker CPU per job, gatehouse/{n}", cpu))
        print(f"Gatehouse worker start-up to first job: {ours[0] * 1000:.0f} ms (target < 300)")
        results.append(
            Result("bench_peers", "gatehouse start-up", ours[0] * 1000, 300, "ms", higher_is_better=False)
        )
        results.append(Result("bench_peers", "gatehouse backlog drain", ours[1], unit="jobs/s"))
    return results


if __name__ == "__main__":
    main()
