"""Soak: the ads schedule every minute over SOAK_ACCOUNTS accounts for SOAK_MINUTES, retention scaled down, observed.

The steady state with retention, measured rather than derived: 3,000 accounts
(SOAK_ACCOUNTS) with the ``rnp-ads`` schedule every minute (its children spread
over half of it, as in production) and every other per-account schedule off,
``RETENTION_SCALE=0.0333`` (a scheduled sync's completed run kept 2 minutes
instead of an hour; every other retention scaled alike, and the background's
user imports' completed runs kept 3 h, 6 minutes scaled, rather than 7 days,
5.6 h scaled: longer than a soak) and the prune every minute, on real processes: the WB sandbox at time scale 600, one
``gatehouse-api``, one ``gatehouse-worker --processes 2 --threads 8``, the
scheduler, and bench_fleet's background of user imports and status polls.
Autovacuum must be on: where DATABASE_URL's server runs without it (a CI
machine's may), the soak starts a private PostgreSQL of its own with it on.

Every SOAK_SAMPLE_S (60) it samples: the size with indexes of ``jobs``,
``job_attempts``, ``account_datasets`` and the ads tables, their dead tuples
against their live rows, the rows pruned from ``jobs``, Redis's used memory,
the workers' CPU per job run (their utime+stime over the runs started, counted
by ``job_attempts`` inserts), and the status polls' p99. It plots them
(bench/soak.png) and passes when, from the end of the first third to the end,
no table grows more than 10 %, dead tuples stay under 20 % of live rows, and the
poll p99 stays within 1.5× of the first third's.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import redis

from bench.bench_fleet import (
    KEYED,
    TIME_SCALE,
    Background,
    sandbox_process,
    seed_accounts,
    tree_cpu_s,
)
from bench.bench_load import Api
from bench.support import (
    BENCH_REDIS_DB,
    BIN,
    REPO,
    Result,
    bench_settings,
    percentile,
    process_env,
    worker_processes,
)
from gatehouse.schedules import DEFAULTS
from gatehouse.settings import Settings
from gatehouse.wb.limits import WB_LIMITS
from tests.support import pg_server

MINUTES = float(os.environ.get("SOAK_MINUTES", 30))
ACCOUNTS = int(os.environ.get("SOAK_ACCOUNTS", 3_000))
SAMPLE_S = float(os.environ.get("SOAK_SAMPLE_S", 60))
RETENTION_SCALE = 0.0333
TABLES = ("jobs", "job_attempts", "account_datasets", "wb_campaigns", "wb_campaign_stats")
ADMIN_TOKEN = "bench-soak-admin-0123456789abcdefgh"
# The pass line (issue 34 §3)
MAX_GROWTH, MAX_DEAD, MAX_P99 = 0.10, 0.20, 1.5
PLOT = Path(__file__).with_name("soak.png")


@dataclass
class Sample:
    at_s: float  # since the start
    sizes: dict[str, int]  # bytes with indexes
    dead: dict[str, float]  # dead tuples / live rows
    pruned: int  # jobs rows deleted so far
    redis_bytes: int
    cpu_ms_per_run: float
    poll_p99_ms: float


def soak_settings(base: Settings, wb_url: str) -> Settings:
    off = {s.name: {"enabled": False} for s in DEFAULTS if s.per_account and s.name != "rnp-ads"}
    schedules = {**off, "rnp-ads": {"cron": "* * * * *"}, "prune": {"cron": "* * * * *"}}
    return base.model_copy(
        update={
            "wb_api_base_url": wb_url,
            "schedules": schedules,
            "retention_scale": RETENTION_SCALE,
            # The background's user imports keep their completed runs the settings' 7 days: 5.6 h at this
            # scale, longer than any soak, so their rows would grow to its end. 3 h is 6 minutes here: they
            # reach their steady state within the first third, as the ads runs (2 min) do.
            "job_retention_completed": "3h",  # (as the processes read it: a retention needs its unit)
            "worker_idle_poll_ms": Settings.model_fields["worker_idle_poll_ms"].default,
            "worker_quiet_poll_ms": Settings.model_fields["worker_quiet_poll_ms"].default,
        }
    )


def sample(
    conn: psycopg.Connection, client: redis.Redis, started: float, cpu_ms: float, p99: float
) -> Sample:
    sizes, dead = {}, {}
    for table in TABLES:
        size, live, dead_rows = conn.execute(
            "SELECT pg_total_relation_size(c.oid), coalesce(s.n_live_tup, 0), coalesce(s.n_dead_tup, 0)"
            " FROM pg_class c LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid WHERE c.relname = %s",
            [table],
        ).fetchone()
        sizes[table], dead[table] = size, dead_rows / max(live, 1)
    pruned = conn.execute("SELECT n_tup_del FROM pg_stat_user_tables WHERE relname = 'jobs'").fetchone()[0]
    return Sample(
        time.monotonic() - started, sizes, dead, pruned, client.info("memory")["used_memory"], cpu_ms, p99
    )


def runs_started(conn: psycopg.Connection) -> int:
    return conn.execute(
        "SELECT n_tup_ins FROM pg_stat_user_tables WHERE relname = 'job_attempts'"
    ).fetchone()[0]


@contextlib.contextmanager
def autovacuuming_postgres() -> Iterator[None]:
    """The configured PostgreSQL when its autovacuum is on; else a private server of this run's (a
    fresh initdb, autovacuum on) that DATABASE_URL points at meanwhile. A CI machine's may run with
    it off, and the steady state without it is not the one a deployment sees."""
    configured = Settings().database_url or "postgresql://postgres@127.0.0.1:5432/postgres"
    with psycopg.connect(configured.replace("postgresql+psycopg://", "postgresql://")) as conn:
        on = conn.execute("SHOW autovacuum").fetchone()[0] == "on"
    if on:
        yield
        return
    bin_dir, user = pg_server.binaries(), pg_server.server_user()
    if bin_dir is None:
        raise SystemExit("autovacuum is off at DATABASE_URL and no PostgreSQL binaries to run one with it on")
    root = Path(tempfile.mkdtemp(prefix="gatehouse-soak-pg-"))
    if user is not None:
        entry = pwd.getpwnam(user)
        os.chown(root, entry.pw_uid, entry.pw_gid)
    server = pg_server.PgServer(bin_dir, root, user)
    saved = os.environ.get("DATABASE_URL")
    try:
        server.init()
        server.start()
        print(f"autovacuum is off at DATABASE_URL: the soak runs on a private PostgreSQL ({server.url()})")
        os.environ["DATABASE_URL"] = server.url()
        yield
    finally:
        if saved is None:
            os.environ.pop("DATABASE_URL", None)
        else:
            os.environ["DATABASE_URL"] = saved
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


def main() -> list[Result]:
    redis_db = int(os.environ.get("GATEHOUSE_BENCH_REDIS_DB", BENCH_REDIS_DB))
    limits = {name: {"period_ms": period / TIME_SCALE} for name, (period, _, _) in WB_LIMITS.items()}
    samples: list[Sample] = []
    with (
        autovacuuming_postgres(),
        bench_settings(redis_db=redis_db, admin_token=ADMIN_TOKEN, wb_limits=limits) as base,
        sandbox_process(base) as wb_url,
    ):
        settings = soak_settings(base, wb_url)
        seed_accounts(settings, ACCOUNTS)
        with psycopg.connect(settings.libpq_url, autocommit=True) as conn:
            autovacuum = conn.execute("SHOW autovacuum").fetchone()[0]
        print(
            f"{ACCOUNTS:,} accounts; autovacuum {autovacuum}; RETENTION_SCALE {RETENTION_SCALE}; {MINUTES:g} min"
        )
        if autovacuum != "on":
            raise SystemExit("autovacuum is off: the soak measures the steady state with it on")
        api = Api(settings.model_copy(update={"backend_role": "api"}))
        background = Background(api.url, min(KEYED, ACCOUNTS))
        scheduler = subprocess.Popen(
            [str(BIN / "gatehouse-scheduler")], env=process_env(settings), stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, start_new_session=True, cwd=REPO,
        )  # fmt: skip
        try:
            with (
                worker_processes(settings, processes=2, threads=8) as workers,
                psycopg.connect(settings.libpq_url, autocommit=True) as conn,
            ):
                client = redis.Redis.from_url(settings.redis_url)
                threads = background.run()
                started = time.monotonic()
                cpu, runs, polled = tree_cpu_s(workers.popen.pid), runs_started(conn), 0
                while time.monotonic() - started < MINUTES * 60:
                    time.sleep(SAMPLE_S)
                    cpu_now, runs_now = tree_cpu_s(workers.popen.pid), runs_started(conn)
                    window = [ms * 1000 for _, ms in background.polls[polled:]]
                    polled = len(background.polls)
                    cpu_ms = (cpu_now - cpu) / max(runs_now - runs, 1) * 1000
                    cpu, runs = cpu_now, runs_now
                    samples.append(
                        sample(conn, client, started, cpu_ms, percentile(window, 99) if window else 0)
                    )
                    s = samples[-1]
                    print(
                        f"{s.at_s / 60:5.1f} min  jobs {s.sizes['jobs'] / 2**20:7.1f} MB  dead "
                        f"{max(s.dead.values()):5.1%}  pruned {s.pruned:8,}  Redis {s.redis_bytes / 2**20:6.1f} MB  "
                        f"cpu {cpu_ms:5.1f} ms/run  poll p99 {s.poll_p99_ms:6.1f} ms",
                        flush=True,
                    )
                background.stop.set()
                for t in threads:
                    t.join(timeout=60)
        finally:
            background.stop.set()
            scheduler.terminate()
            scheduler.wait(timeout=30)
            api.stop()
    return report(samples)


def report(samples: list[Sample]) -> list[Result]:
    name = "bench_soak"
    third = samples[max(len(samples) // 3 - 1, 0)]
    later = samples[len(samples) // 3 :]
    results = []
    for table in TABLES:
        growth = samples[-1].sizes[table] / max(third.sizes[table], 1) - 1
        print(
            f"  {table:20} {third.sizes[table] / 2**20:8.1f} MB at a third -> {samples[-1].sizes[table] / 2**20:8.1f} MB at the end: {growth:+.1%}"
        )
        results.append(
            Result(name, f"growth after the first third, {table}", growth * 100, MAX_GROWTH * 100, "%", False)
        )
    dead = max(max(s.dead.values()) for s in later)
    first_p99 = max(s.poll_p99_ms for s in samples[: len(samples) // 3] or samples[:1])
    p99 = max(s.poll_p99_ms for s in later)
    print(f"  dead tuples, worst after the first third: {dead:.1%} of live rows (pass < {MAX_DEAD:.0%})")
    print(
        f"  status poll p99: first third {first_p99:.1f} ms, later worst {p99:.1f} ms ({p99 / max(first_p99, 1e-9):.2f}x; pass <= {MAX_P99}x)"
    )
    results += [
        Result(
            name,
            "dead tuples / live rows, worst after the first third",
            dead * 100,
            MAX_DEAD * 100,
            "%",
            False,
        ),
        Result(
            name, "status poll p99 later / first third", p99 / max(first_p99, 1e-9), MAX_P99, "ratio", False
        ),
        Result(
            name,
            "worker CPU ms per run (median)",
            sorted(s.cpu_ms_per_run for s in samples)[len(samples) // 2],
            unit="ms",
            higher_is_better=False,
        ),
    ]
    plot(samples)
    return results


def plot(samples: list[Sample]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    minutes = [s.at_s / 60 for s in samples]
    fig, axes = plt.subplots(2, 3, figsize=(15, 8))
    for table in TABLES:
        axes[0][0].plot(minutes, [s.sizes[table] / 2**20 for s in samples], label=table)
        axes[0][1].plot(minutes, [s.dead[table] * 100 for s in samples], label=table)
    axes[0][0].set_title("size with indexes (MB)")
    axes[0][1].set_title("dead tuples (% of live rows)")
    axes[0][1].axhline(MAX_DEAD * 100, color="red", linestyle=":")
    axes[0][2].plot(minutes, [s.pruned for s in samples])
    axes[0][2].set_title("jobs rows pruned (cumulative)")
    axes[1][0].plot(minutes, [s.redis_bytes / 2**20 for s in samples])
    axes[1][0].set_title("Redis used memory (MB)")
    axes[1][1].plot(minutes, [s.cpu_ms_per_run for s in samples])
    axes[1][1].set_title("worker CPU per job run (ms)")
    axes[1][2].plot(minutes, [s.poll_p99_ms for s in samples])
    axes[1][2].set_title("status poll p99 (ms)")
    axes[0][0].legend(fontsize=7)
    for ax in axes.flat:
        ax.set_xlabel("minutes")
    fig.tight_layout()
    fig.savefig(PLOT, dpi=80)
    print(f"  plotted to {PLOT}")
