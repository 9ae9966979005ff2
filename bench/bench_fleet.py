"""Fleet: every default schedule ticked by "run now" over FLEET_ACCOUNTS accounts (10,000) on real processes, scaled to a day.

A simulated day, compressed: the day's 386 per-account ticks (48 incremental,
1 backfill, 288 ads, 1 finance, 24 inventory, 24 catalog) and the sweeps' ticks
are represented by one tick of each schedule per round (FLEET_ROUNDS, 2: round 1
is each account's first sync, later rounds find the data there, as every tick of
a real day but the first), fired with "run now"
(``POST /v1/admin/schedules/{name}/run``, what the console's button does), each
drained before the next; the last round's per-tick costs are then multiplied by
the schedule's ticks per day (derived, and printed as such). The WB sandbox runs
in its own process at FLEET_TIME_SCALE (600: WB's rate-limit periods divided by
600, the workers' token buckets scaled to match), one ``gatehouse-api`` (2
workers × 4 threads, BACKEND_ROLE=api) and one ``gatehouse-worker --processes 2
--threads 8`` with the production poll intervals. In the background, the whole
time: user feed imports (FLEET_IMPORTS_PER_S) and status polls
(``GET /v1/jobs/{id}`` of those imports, FLEET_POLLS_PER_S), by account keys.

Spread (FLEET_SPREAD): the schedules spread a tick's children over a window
(default half the cadence: ads 150 s, incremental 15 min, the daily ones 12 h).
With ``0`` (the default) the processes get SCHEDULES with ``spread_ms: 0`` for
every per-account schedule, so every child is due at the tick and a drain
measures the fleet's throughput (the daily ticks' 12 h windows would make an
every-schedule run last a day). With ``tree`` each keeps its own window: the
drain then spans the window, and what it measures is whether the fleet keeps
up with it: each child's start past its due (``dueAtMs``), p50 and p99, and
Redis holding the delayed messages.

The ads sync's worker CPU per job has a floor too (``ads_floor_ms``): the same
WB calls and upserts for FLOOR_ACCOUNTS accounts done bare in the bench's own
process (one pooled httpx client, one psycopg connection, the same statements),
its CPU per account; issue 34's targets are 8 ms a job and 3× that floor.

Everything is measured from outside the code, so it measures whatever the tree
does: fan-out time is from the first child row's ``created_at`` (the rows of
the schedule's job type created after the tick was sent) to the end of the
tick's fan-out job (``fan-out:<schedule>``, whose row is not a child): the rows
of a chunk share their transaction's ``created_at``, and the fan-out job ends
when its last chunk is committed and enqueued. Its floor is a bare batched
``INSERT`` (chunks of 1,000, one statement each) of the same rows into an empty
copy of ``jobs`` with the same indexes, in the same run. Drain is the tick to
its last child's ``finished_at``. Worker (and API) CPU is the processes'
utime+stime from /proc/<pid>/stat over the tick, divided by the jobs finished
in it. Redis is every key of the bench's database with ``MEMORY USAGE``, at the
fullest moment (a tick's children all written, their messages queued or
delayed) and at rest. Retention: ``gatehouse-prune`` runs at the end (its
counts are printed), and the jobs table's steady size is derived from each job
type's retention (``JobType.retention``, else the JOB_RETENTION_* settings)
plus the hourly prune's interval, and the day's rows.

Knobs (env): FLEET_ACCOUNTS, FLEET_ROUNDS, FLEET_SCHEDULES (comma-separated
names; default every schedule), FLEET_TIME_SCALE, FLEET_WORKER_PROCESSES,
FLEET_WORKER_THREADS, FLEET_IMPORTS_PER_S, FLEET_POLLS_PER_S, FLEET_IDLE_S,
FLEET_DRAIN_TIMEOUT_S, FLEET_SPREAD, GATEHOUSE_BENCH_REDIS_DB. The run is its drains, about
jobs × 40 ms of worker CPU / cores, and with FLEET_SPREAD=tree at least each
tick's window. Measured on a loaded 2-core machine: ``FLEET_ACCOUNTS=300``
(every schedule, twice) 6 minutes; ``FLEET_SCHEDULES=rnp-ads FLEET_ROUNDS=1
FLEET_SPREAD=tree`` 3 minutes at 3,000 accounts, 10.5 at 10,000; every
schedule twice at 10,000 is 120,000 jobs, 40 minutes or more.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import signal
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

import httpx
import psycopg
import redis
from periodiq import cron
from psycopg.types.json import Jsonb

from bench.bench_load import Api, free_port, token
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
from gatehouse.crypto import TokenCipher
from gatehouse.gate.vocabulary import DUE_AT_FIELD
from gatehouse.schedules import DEFAULTS, Schedule, cadence_ms
from gatehouse.settings import Settings
from gatehouse.wb import tables
from gatehouse.wb.limits import WB_LIMITS
from gatehouse_worker.jobs.autobidder import WITH_STATS


def _env(name: str, default: float) -> float:
    return float(os.environ.get(name, default))


ACCOUNTS = int(_env("FLEET_ACCOUNTS", 10_000))
TIME_SCALE = _env("FLEET_TIME_SCALE", 600)
PROCESSES = int(_env("FLEET_WORKER_PROCESSES", 2))
THREADS = int(_env("FLEET_WORKER_THREADS", 8))
IMPORTS_PER_S = _env("FLEET_IMPORTS_PER_S", 2)
POLLS_PER_S = _env("FLEET_POLLS_PER_S", 20)
IDLE_S = _env("FLEET_IDLE_S", 8)
DRAIN_TIMEOUT_S = _env("FLEET_DRAIN_TIMEOUT_S", 1800)
# The per-account ticks' spread: "0" (default) writes every child due at once (SCHEDULES spread_ms 0 for the
# processes), so a drain measures the fleet's throughput; "tree" keeps each schedule's own window (the ads tick:
# 150 s), so a drain measures the window and whether the fleet keeps up with it (jobs' start past their due).
SPREAD = os.environ.get("FLEET_SPREAD", "0")
# Round 1 is each account's first sync of each kind (its initial import); later rounds see data that is
# already there, as every tick of a real day but the first does. The per-day figures use the last round.
ROUNDS = int(_env("FLEET_ROUNDS", 2))
KEYED = 500  # accounts with a key: the background's clients
CHUNK = 1_000  # rows per statement of the fan-out floor
ADMIN_TOKEN = "bench-fleet-admin-0123456789abcdef"
PERIOD = {"dateFrom": "2026-11-01", "dateTo": "2026-11-29"}
LIVE = "('waiting', 'active', 'delayed')"
UUID_RE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def ticks_per_day(spec: str) -> int:
    """How often a cron (UTC) fires in a day, counted minute by minute."""
    parsed, day = cron(spec), datetime(2026, 12, 1)
    return sum(parsed.validate(day + timedelta(minutes=m)) for m in range(24 * 60))


def chosen_schedules() -> list[Schedule]:
    names = os.environ.get("FLEET_SCHEDULES")
    if not names:
        return list(DEFAULTS)
    by_name = {s.name: s for s in DEFAULTS}
    return [by_name[n.strip()] for n in names.split(",") if n.strip()]


# -- the fleet ------------------------------------------------------------------------------------


def seed_accounts(settings: Settings, accounts: int | None = None) -> None:
    """``accounts`` (default ACCOUNTS) accounts with WB tokens (the sandbox's seller is the raw token),
    KEYED with a key.

    No bulk path exists in the accounts' store, so this is COPY (a bench may write SQL directly).
    """
    accounts = ACCOUNTS if accounts is None else accounts
    cipher = TokenCipher(settings)
    with psycopg.connect(settings.libpq_url, autocommit=True) as conn:
        with conn.cursor().copy("COPY accounts (id, name, wb_token_encrypted) FROM STDIN") as copy:
            for i in range(accounts):
                copy.write_row((account_id(i), f"fleet-{i}", cipher.encrypt(f"fleet-{i}")))
        conn.execute(
            "INSERT INTO api_keys (id, account_id, secret_sha256)"
            " SELECT lpad(to_hex(i), 16, '0'), md5('fleet' || i)::uuid,"
            "        encode(sha256(convert_to('s' || i, 'UTF8')), 'hex')"
            " FROM generate_series(0, %s - 1) i",
            [min(KEYED, accounts)],
        )
        conn.execute("ANALYZE")


def account_id(i: int) -> str:
    """Account ``i``'s id, as the seed SQL writes it: md5('fleet' || i)::uuid."""
    return str(uuid.UUID(hashlib.md5(f"fleet{i}".encode()).hexdigest()))


@contextlib.contextmanager
def sandbox_process(settings: Settings) -> Iterator[str]:
    """``gatehouse-wb-sandbox`` in its own process (its HTTP server would share the bench's GIL otherwise)."""
    url = f"http://127.0.0.1:{free_port()}"
    argv = [str(BIN / "gatehouse-wb-sandbox"), "--bind", url.removeprefix("http://")]
    argv += ["--time-scale", str(TIME_SCALE), "--rows-per-day", "2"]
    with tempfile.TemporaryFile() as log:
        popen = subprocess.Popen(
            argv,
            env=process_env(settings),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd=REPO,
        )
        try:
            deadline = time.monotonic() + 30
            while True:
                with contextlib.suppress(httpx.HTTPError):
                    if httpx.get(f"{url}/__sandbox/health", timeout=1).status_code == 200:
                        break
                if popen.poll() is not None or time.monotonic() > deadline:
                    log.seek(0)
                    raise RuntimeError(f"gatehouse-wb-sandbox did not start:\n{log.read().decode()[-3000:]}")
                time.sleep(0.05)
            yield url
        finally:
            popen.send_signal(signal.SIGTERM)
            try:
                popen.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(popen.pid, signal.SIGKILL)
                popen.wait()


def tree_cpu_s(root: int) -> float:
    """utime + stime of ``root`` and every descendant (from /proc/<pid>/stat), in seconds."""
    parents, cpu = {}, {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()  # after "pid (comm) "
        parents[int(entry.name)] = int(fields[1])
        cpu[int(entry.name)] = int(fields[11]) + int(fields[12])
    members, frontier = {root}, [root]
    while frontier:
        pid = frontier.pop()
        for child, parent in parents.items():
            if parent == pid and child not in members:
                members.add(child)
                frontier.append(child)
    return sum(cpu.get(pid, 0) for pid in members) / os.sysconf("SC_CLK_TCK")


def redis_usage(client: redis.Redis) -> tuple[int, int, dict[str, list[int]]]:
    """Keys and bytes (MEMORY USAGE) of the database, and per key family (ids replaced by {id})."""
    keys = list(client.scan_iter(count=5_000))
    sizes: list[int] = []
    for start in range(0, len(keys), 5_000):
        pipe = client.pipeline(transaction=False)
        for key in keys[start : start + 5_000]:
            pipe.memory_usage(key, samples=0)
        sizes.extend(size or 0 for size in pipe.execute())
    families: dict[str, list[int]] = {}
    for key, size in zip(keys, sizes, strict=True):
        family = UUID_RE.sub("{id}", key.decode(errors="replace"))
        family = re.sub(r":\d{8,}", ":{n}", family)
        entry = families.setdefault(family, [0, 0])
        entry[0] += 1
        entry[1] += size
    return len(keys), sum(sizes), families


def table_sizes(conn: psycopg.Connection) -> dict[str, tuple[int, int]]:
    """(rows, bytes with indexes and TOAST) of every table of the schema."""
    tables = [r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")]
    sizes = {}
    for table in tables:
        if table in ("fleet_floor", "alembic_version"):
            continue
        rows, size = conn.execute(
            f'SELECT count(*), pg_total_relation_size(%s) FROM "{table}"', [f'public."{table}"']
        ).fetchone()
        sizes[table] = (rows, size)
    return sizes


def row_writes(conn: psycopg.Connection) -> dict[str, int]:
    """Rows inserted, updated and deleted so far per table (pg_stat_user_tables; a backend publishes its
    counts once idle a second, so read them after a pause)."""
    return dict(
        conn.execute(
            "SELECT relname, n_tup_ins + n_tup_upd + n_tup_del FROM pg_stat_user_tables"
            " WHERE relname <> 'fleet_floor'"
        ).fetchall()
    )


@dataclass
class Background:
    """User imports and status polls by KEYED account keys, paced, while the ticks run."""

    url: str
    keyed: int
    stop: threading.Event = field(default_factory=threading.Event)
    jobs: list[tuple[str, int]] = field(default_factory=list)
    polls: list[tuple[float, float]] = field(default_factory=list)  # (monotonic at start, seconds)
    errors: list[str] = field(default_factory=list)
    imports: int = 0
    api_cpu_s: float = 0.0  # the API's processes over the run

    def run(self) -> list[threading.Thread]:
        threads = [threading.Thread(target=self._imports, daemon=True)]
        threads += [threading.Thread(target=self._polls, args=(k,), daemon=True) for k in range(2)]
        for t in threads:
            t.start()
        return threads

    def _paced(self, per_s: float) -> Iterator[int]:
        n, start = 0, time.monotonic()
        while not self.stop.is_set():
            wait = start + n / per_s - time.monotonic()
            if wait > 0:
                self.stop.wait(wait)
            yield n
            n += 1

    def _imports(self) -> None:
        with httpx.Client(base_url=self.url, timeout=30) as client:
            for n in self._paced(IMPORTS_PER_S):
                i = n % self.keyed
                response = client.post(
                    f"/v1/accounts/{account_id(i)}/digitization/imports",
                    json={"kind": "feeds", **PERIOD},
                    headers={"Authorization": f"Bearer {token(i)}"},
                )
                if response.status_code != 202:
                    self.errors.append(f"import {response.status_code}: {response.text[:200]}")
                    continue
                self.imports += 1
                self.jobs.append((response.json()["jobId"], i))

    def _polls(self, k: int) -> None:
        with httpx.Client(base_url=self.url, timeout=30) as client:
            for n in self._paced(POLLS_PER_S / 2):
                if not self.jobs:
                    continue
                job, i = self.jobs[(n * 2 + k) % len(self.jobs)]
                t0 = time.monotonic()
                response = client.get(f"/v1/jobs/{job}", headers={"Authorization": f"Bearer {token(i)}"})
                self.polls.append((t0, time.monotonic() - t0))
                if response.status_code != 200:
                    self.errors.append(f"poll {response.status_code}: {response.text[:200]}")


@dataclass
class Tick:
    schedule: Schedule
    children: int = 0
    fan_out_s: float = float("nan")
    first_child_s: float = float("nan")  # from the tick's send to its first child row
    floor_s: float = float("nan")
    drain_s: float = float("nan")
    skipped: int = 0
    failed: int = 0
    window: tuple[float, float] = (0.0, 0.0)  # monotonic, send to drained
    worker_cpu_s: float = 0.0
    finished_in_window: int = 0
    wb_calls: int = 0
    wb_429: int = 0
    tables: dict[str, tuple[int, int]] = field(default_factory=dict)  # (rows, bytes) added
    job_rows: int = 0
    job_bytes_per_row: float = float("nan")
    writes: dict[str, int] = field(default_factory=dict)  # rows inserted, updated, deleted per table
    note: str = ""
    round: int = 1
    spread_s: float = 0.0  # the window its children are due over
    late_s: tuple[float, float] = (float("nan"), float("nan"))  # p50, p99 of a child's start past its due


def floor_insert(conn: psycopg.Connection, job_type: str, since: datetime) -> float:
    """Seconds for a bare batched INSERT of the tick's child rows (new ids) into an empty copy of jobs."""
    rows = conn.execute(
        "SELECT type, queue, tier, account_id, payload, max_attempts FROM jobs"
        " WHERE type = %s AND created_at >= %s",
        [job_type, since],
    ).fetchall()
    conn.execute("TRUNCATE fleet_floor")
    start = time.perf_counter()
    for at in range(0, len(rows), CHUNK):
        chunk = rows[at : at + CHUNK]
        conn.execute(
            "INSERT INTO fleet_floor (id, type, queue, tier, account_id, state, payload, max_attempts)"
            " SELECT gen_random_uuid(), t, q, r, a, 'waiting', p, m"
            " FROM unnest(%s::text[], %s::text[], %s::text[], %s::uuid[], %s::jsonb[], %s::int[])"
            " AS x(t, q, r, a, p, m)",
            [[row[k] for row in chunk] for k in range(4)]
            + [[json.dumps(row[4]) for row in chunk], [row[5] for row in chunk]],
        )
    return time.perf_counter() - start


def run_tick(
    schedule: Schedule, *, api: str, conn: psycopg.Connection, workers_pid: int, sandbox: httpx.Client,
    peak: dict,
) -> Tick:  # fmt: skip
    tick = Tick(schedule, spread_s=(0 if SPREAD == "0" else schedule.spread) / 1000)
    expected = ACCOUNTS if schedule.per_account else 1
    name = schedule.job_type.name
    before = table_sizes(conn)
    writes0 = row_writes(conn)
    cpu0 = tree_cpu_s(workers_pid)
    finished0 = conn.execute("SELECT count(*) FROM jobs WHERE finished_at IS NOT NULL").fetchone()[0]
    sandbox.delete("/__sandbox/log")
    sent_at = conn.execute("SELECT clock_timestamp()").fetchone()[0]
    t0 = time.monotonic()
    response = httpx.post(
        f"{api}/v1/admin/schedules/{schedule.name}/run",
        headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
        timeout=30,
    )
    if response.status_code != 202 and response.status_code != 200:
        tick.note = f"run now answered {response.status_code} {response.json().get('code')}"
        return tick
    deadline = t0 + DRAIN_TIMEOUT_S
    fanned = False
    while True:
        made, live = conn.execute(
            f"SELECT count(*), count(*) FILTER (WHERE state IN {LIVE}) FROM jobs"
            " WHERE type = %s AND created_at >= %s",
            [name, sent_at],
        ).fetchone()
        if not fanned and made >= expected:
            fanned = True
            keys, size, _ = redis_usage(peak["client"])
            if size > peak["bytes"]:
                peak.update(keys=keys, bytes=size, schedule=schedule.name)
        if made >= expected and live == 0:
            break
        if time.monotonic() > deadline:
            tick.note = f"not drained after {DRAIN_TIMEOUT_S:.0f} s: {made} of {expected} rows, {live} live"
            break
        time.sleep(0.2)
    tick.window = (t0, time.monotonic())
    tick.worker_cpu_s = tree_cpu_s(workers_pid) - cpu0
    finished1 = conn.execute("SELECT count(*) FROM jobs WHERE finished_at IS NOT NULL").fetchone()[0]
    tick.finished_in_window = finished1 - finished0
    first, last, done, n, skipped, failed = conn.execute(
        "SELECT min(created_at), max(created_at), max(finished_at), count(*),"
        " count(*) FILTER (WHERE result ->> 'skipped' = 'true'), count(*) FILTER (WHERE state = 'failed')"
        " FROM jobs WHERE type = %s AND created_at >= %s",
        [name, sent_at],
    ).fetchone()
    tick.children, tick.skipped, tick.failed = n, skipped, failed
    if n:
        # A chunk's rows share their transaction's created_at, so the last chunk ends when the fan-out job does.
        fan_out_end = conn.execute(
            "SELECT max(finished_at) FROM jobs WHERE type = %s AND created_at >= %s",
            [f"fan-out:{schedule.name}", sent_at],
        ).fetchone()[0]
        tick.fan_out_s = ((fan_out_end or last) - first).total_seconds()
        tick.first_child_s = (first - sent_at).total_seconds()
        tick.drain_s = (done - sent_at).total_seconds() if done else float("nan")
        tick.floor_s = floor_insert(conn, name, sent_at)
        late = conn.execute(
            "SELECT percentile_cont(ARRAY[0.5, 0.99]) WITHIN GROUP (ORDER BY late) FROM ("
            "  SELECT extract(epoch FROM started_at) - (payload ->> %s)::float8 / 1000 AS late FROM jobs"
            "  WHERE type = %s AND created_at >= %s AND started_at IS NOT NULL) x",
            [DUE_AT_FIELD, name, sent_at],
        ).fetchone()[0]
        tick.late_s = tuple(late) if late else tick.late_s
    log = sandbox.get("/__sandbox/log").json()
    tick.wb_calls, tick.wb_429 = len(log), sum(entry.get("status") == 429 for entry in log)
    after = table_sizes(conn)
    tick.tables = {
        t: (after[t][0] - before.get(t, (0, 0))[0], after[t][1] - before.get(t, (0, 0))[1])
        for t in after
        if after[t] != before.get(t)
    }
    time.sleep(1.2)  # every backend idle a second: its table counts published
    writes1 = row_writes(conn)
    tick.writes = {t: writes1[t] - writes0.get(t, 0) for t in writes1 if writes1[t] != writes0.get(t, 0)}
    tick.job_rows = n
    tick.job_bytes_per_row = (after["jobs"][1] - before["jobs"][1]) / max(
        after["jobs"][0] - before["jobs"][0], 1
    )
    return tick


def retention(settings: Settings, schedule: Schedule) -> tuple[float, float]:
    """Days the schedule's completed and failed job rows are kept (its job type's retention, else the
    settings'), plus the hour maintenance:prune may take to come round; inf: kept for ever."""
    interval = cadence_ms(next(s.cron for s in DEFAULTS if s.job_type.name == "maintenance:prune"))
    kept = schedule.job_type.retention
    ages = (
        kept.age_ms("completed", settings.job_retention_completed),
        kept.age_ms("failed", settings.job_retention_failed),
    )
    return tuple((age + interval) / 86_400_000 if age else float("inf") for age in ages)


def run_prune(settings: Settings) -> str:
    """``gatehouse-prune`` at the end of the run: what retention deletes of it (its output)."""
    done = subprocess.run(
        [str(BIN / "gatehouse-prune")],
        env=process_env(settings),
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
    )
    return f"gatehouse-prune (rc {done.returncode}): {(done.stdout + done.stderr).strip()[-1500:]}"


# -- the report -----------------------------------------------------------------------------------


def fmt_bytes(n: float) -> str:
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if abs(n) < 1024 or unit == "TB":
            return f"{n:,.1f} {unit}" if unit != "B" else f"{n:,.0f} B"
        n /= 1024
    return f"{n:,.1f} TB"


def poll_stats(polls: list[tuple[float, float]], ticks: list[Tick], idle: tuple[float, float]) -> dict:
    during = [s for t0, s in polls if any(a <= t0 <= b for a, b in (t.window for t in ticks))]
    quiet = [s for t0, s in polls if idle[0] <= t0 <= idle[1]]

    def p(values: list[float], q: float) -> float:
        return percentile(values, q) * 1000 if len(values) >= 2 else float("nan")

    return {
        "tick": (len(during), p(during, 50), p(during, 99)),
        "idle": (len(quiet), p(quiet, 50), p(quiet, 99)),
    }


def main() -> list[Result]:
    redis_db = int(os.environ.get("GATEHOUSE_BENCH_REDIS_DB", BENCH_REDIS_DB))
    schedules = chosen_schedules()
    day = {s.name: ticks_per_day(s.cron) for s in schedules}
    scaled_limits = {name: {"period_ms": period / TIME_SCALE} for name, (period, _, _) in WB_LIMITS.items()}
    with (
        bench_settings(redis_db=redis_db, admin_token=ADMIN_TOKEN, wb_limits=scaled_limits) as base,
        sandbox_process(base) as wb_url,
    ):
        # The production poll intervals (bench_settings shortens them), so the workers' CPU is a deployment's.
        production = {
            name: Settings.model_fields[name].default
            for name in ("worker_idle_poll_ms", "worker_quiet_poll_ms")
        }
        unspread = {s.name: {"spread_ms": 0} for s in schedules if s.per_account and SPREAD == "0"}
        settings = base.model_copy(update={"wb_api_base_url": wb_url, "schedules": unspread, **production})
        started = time.perf_counter()
        seed_accounts(settings)
        print(
            f"{ACCOUNTS:,} accounts seeded in {time.perf_counter() - started:.1f} s; WB sandbox at time scale "
            f"{TIME_SCALE:g}; gatehouse-worker --processes {PROCESSES} --threads {THREADS}; background "
            f"{IMPORTS_PER_S:g} user imports/s and {POLLS_PER_S:g} status polls/s by {min(KEYED, ACCOUNTS)} accounts",
            flush=True,
        )
        client = redis.Redis.from_url(settings.redis_url)
        peak = {"client": client, "keys": 0, "bytes": 0, "schedule": None}
        api = Api(settings.model_copy(update={"backend_role": "api"}))
        background = Background(api.url, min(KEYED, ACCOUNTS))
        try:
            with (
                worker_processes(settings, processes=PROCESSES, threads=THREADS) as workers,
                psycopg.connect(settings.libpq_url, autocommit=True) as conn,
                httpx.Client(base_url=wb_url, timeout=60) as sandbox,
            ):
                conn.execute("CREATE TABLE fleet_floor (LIKE jobs INCLUDING ALL)")
                api_cpu0 = tree_cpu_s(api.popen.pid)
                threads = background.run()
                idle_start = time.monotonic()
                time.sleep(IDLE_S)  # the idle baseline: background only
                idle = (idle_start, time.monotonic())
                ticks = []
                for round_ in range(1, ROUNDS + 1):
                    for schedule in schedules:
                        tick = run_tick(
                            schedule, api=api.url, conn=conn, workers_pid=workers.popen.pid, sandbox=sandbox,
                            peak=peak,
                        )  # fmt: skip
                        tick.round = round_
                        ticks.append(tick)
                        print(
                            f"round {round_} {schedule.name:26} {tick.children:6,} jobs  fan-out {tick.fan_out_s:6.2f} s "
                            f"(floor {tick.floor_s:5.2f} s)  drain {tick.drain_s:7.1f} s  "
                            f"{tick.wb_calls:6,} WB calls {tick.note}",
                            flush=True,
                        )
                background.stop.set()
                for t in threads:
                    t.join(timeout=60)
                background.api_cpu_s = tree_cpu_s(api.popen.pid) - api_cpu0
                floor_ms = (
                    ads_floor_ms(settings, wb_url) if any(s.name == "rnp-ads" for s in schedules) else None
                )
                rest_keys, rest_bytes, families = redis_usage(client)
                pruned = run_prune(settings)
                final = table_sizes(conn)
                live_left = conn.execute(f"SELECT count(*) FROM jobs WHERE state IN {LIVE}").fetchone()[0]
        finally:
            background.stop.set()
            api.stop()
        kept = {s.name: retention(settings, s) for s in schedules}
    return report(ticks, day, background, idle, peak, (rest_keys, rest_bytes, families), final, kept,
                  pruned, live_left, floor_ms)  # fmt: skip


# Issue 34: the ads sync's worker CPU per job, at most this (ms) and this many times its floor.
ADS_CPU_TARGET_MS, ADS_FLOOR_TARGET = 8.0, 3.0
FLOOR_ACCOUNTS = 200


def ads_floor_ms(settings: Settings, wb_url: str) -> float:
    """CPU ms per account of the ads sync's work done bare, in this process: the same WB calls
    (campaigns, then fullstats of those with statistics) over one pooled httpx client, and the
    same upserts (gatehouse.wb.tables' statements) on one psycopg connection, for FLOOR_ACCOUNTS
    accounts whose data the ticks already imported (as a tick's round 2 finds it)."""
    today = datetime.now().date()
    begin, end = (today - timedelta(days=1)).isoformat(), today.isoformat()
    accounts = [(account_id(i), f"fleet-{i}") for i in range(min(FLOOR_ACCOUNTS, ACCOUNTS))]
    with httpx.Client(timeout=60) as http, psycopg.connect(settings.libpq_url, autocommit=True) as conn:

        def call(path: str, token: str, **params: str) -> object:
            while True:  # a 429's wait is not CPU: wait it out
                answer = http.get(
                    f"{wb_url}/advert-api{path}", params=params, headers={"Authorization": token}
                )
                if answer.status_code != 429:
                    answer.raise_for_status()
                    return answer.json()
                time.sleep(float(answer.headers.get("X-Ratelimit-Retry", "0.05")))

        started = time.process_time()
        for account, token in accounts:
            campaigns = call("/api/advert/v2/adverts", token)["adverts"]
            conn.execute(tables.CAMPAIGNS.sql, {"account": account, "rows": Jsonb(campaigns)})
            ids = ",".join(str(c["id"]) for c in campaigns if c["status"] in WITH_STATS)
            if ids:
                stats = call("/adv/v3/fullstats", token, ids=ids, beginDate=begin, endDate=end)
                days = [{"advertId": s["advertId"], "day": d} for s in stats for d in s.get("days", [])]
                conn.execute(tables.CAMPAIGN_STATS.sql, {"account": account, "rows": Jsonb(days)})
        return (time.process_time() - started) / len(accounts) * 1000


def report(
    ticks, day, background, idle, peak, rest, final, kept, pruned, live_left, floor_ms
) -> list[Result]:
    name = "bench_fleet"
    results: list[Result] = []
    last = [t for t in ticks if t.round == ROUNDS]  # the per-day figures: data already there, as most ticks
    print(
        f"\nper tick ({ACCOUNTS:,} accounts; times from the rows' created_at/finished_at, the database's clock):"
    )
    print(
        f"{'round schedule':28} {'jobs':>7} {'to 1st':>7} {'fan-out':>8} {'floor':>7} {'ratio':>6} {'drain':>8} "
        f"{'spread':>7} {'late p50/p99':>13} {'skip':>6} {'fail':>6} {'cpu ms/job':>10} {'WB calls':>9} {'429':>5}"
    )
    for t in ticks:
        per_account = t.schedule.per_account and t.children
        ratio = t.fan_out_s / t.floor_s if per_account else float("nan")
        cpu = t.worker_cpu_s / t.finished_in_window * 1000 if t.finished_in_window else float("nan")
        share = max(t.children, 1)
        print(
            f"{t.round} {t.schedule.name:26} {t.children:7,} {t.first_child_s:6.2f}s {t.fan_out_s:7.2f}s "
            f"{t.floor_s:6.3f}s {ratio:6.1f} {t.drain_s:7.1f}s {t.spread_s:6.0f}s {t.late_s[0]:6.1f}/{t.late_s[1]:5.1f}s "
            f"{t.skipped / share:6.1%} {t.failed / share:6.1%} "
            f"{cpu:10.1f} {t.wb_calls:9,} {t.wb_429:5,}  {t.note}"
        )
        if per_account and t.round == ROUNDS:
            results += [
                Result(name, f"fan-out/floor, {t.schedule.name}", ratio, higher_is_better=False),
                # issue 25 §2: a 10,000-account tick's rows within 5 s, scaled to this run's size
                Result(name, f"fan-out s, {t.schedule.name}", t.fan_out_s, 5 * ACCOUNTS / 10_000, "s", False),
                Result(name, f"drain s, {t.schedule.name}", t.drain_s, unit="s", higher_is_better=False),
                Result(name, f"worker CPU ms/job, {t.schedule.name}", cpu, unit="ms", higher_is_better=False),
            ]
            if t.schedule.name == "rnp-ads" and floor_ms:
                print(
                    f"  rnp-ads: worker CPU {cpu:.1f} ms/job (target {ADS_CPU_TARGET_MS:g}); its floor, the same WB "
                    f"calls and upserts bare in one process, {floor_ms:.2f} ms/account: {cpu / floor_ms:.1f}x "
                    f"(target {ADS_FLOOR_TARGET:g}x)"
                )
                results += [
                    Result(name, "worker CPU ms/job, rnp-ads (target)", cpu, ADS_CPU_TARGET_MS, "ms", False),
                    Result(
                        name, "worker CPU/floor, rnp-ads", cpu / floor_ms, ADS_FLOOR_TARGET, "ratio", False
                    ),
                ]
    print(
        "  to 1st: the tick's send to its first child row; ratio: fan-out / floor (a bare batched INSERT of the"
        " same rows);\n  drain: the tick's send to its last child's end; spread: the window its children are due over"
        " (FLEET_SPREAD); late: a child's start past its due;\n  cpu ms/job: the worker processes' utime+stime (/proc/<pid>/stat) over the tick / jobs"
        " finished in it (the background's user imports included)"
    )
    total = sum(t.children for t in ticks)
    skipped, failed = sum(t.skipped for t in ticks), sum(t.failed for t in ticks)
    print(
        f"all ticks: {total:,} jobs, {skipped / max(total, 1):.2%} skipped, {failed / max(total, 1):.2%} failed"
    )
    results += [
        Result(name, "skipped share", skipped / max(total, 1) * 100, unit="%", higher_is_better=False),
        Result(name, "failed share", failed / max(total, 1) * 100, unit="%", higher_is_better=False),
    ]
    polls = poll_stats(background.polls, ticks, idle)
    (nt, t50, t99), (ni, i50, i99) = polls["tick"], polls["idle"]
    print(
        f"status poll (GET /v1/jobs/{{id}}): idle {ni} polls p50 {i50:.1f} ms p99 {i99:.1f} ms; during ticks {nt} "
        f"polls p50 {t50:.1f} ms p99 {t99:.1f} ms; p99 tick/idle {t99 / i99:.2f}"
    )
    requests = len(background.polls) + background.imports + len(ticks)
    api_ms = background.api_cpu_s / max(requests, 1) * 1000
    print(
        f"background: {background.imports} user imports, {len(background.polls)} polls, "
        f"{len(background.errors)} errors {background.errors[:3]}; API CPU {api_ms:.1f} ms per request "
        f"(gatehouse-api's utime+stime over the run / its {requests:,} requests)"
    )
    results += [
        Result(name, "status poll p99 during tick / idle", t99 / i99, higher_is_better=False),
        Result(name, "status poll p99 during tick", t99, unit="ms", higher_is_better=False),
        Result(name, "status poll p99 idle", i99, unit="ms", higher_is_better=False),
        Result(name, "API CPU ms per request", api_ms, unit="ms", higher_is_better=False),
    ]

    # Per simulated day (derived): each schedule's growth in the last round × its ticks per day.
    print(
        f"\nper simulated day ({ACCOUNTS:,} accounts; derived: round {ROUNDS}'s per-tick growth × ticks/day: "
        f"{', '.join(f'{s} ×{n}' for s, n in day.items())})"
    )
    per_day: dict[str, list[float]] = {}
    for t in last:
        for table, (rows, size) in t.tables.items():
            entry = per_day.setdefault(table, [0.0, 0.0])
            entry[0] += rows * day[t.schedule.name]
            entry[1] += size * day[t.schedule.name]
    for table, (rows, size) in sorted(per_day.items(), key=lambda kv: -kv[1][1]):
        print(f"  {table:28} {rows:14,.0f} rows  {fmt_bytes(size):>12}  ({rows / 86_400:,.1f} rows/s)")
    job_rows_day = sum(t.children * day[t.schedule.name] for t in last if t.schedule.per_account)
    jobs_added = [t.tables.get("jobs", (0, 0)) for t in ticks]
    bytes_per_row = sum(b for _, b in jobs_added) / max(sum(r for r, _ in jobs_added), 1)
    wb_per_min = sum(t.wb_calls * day[t.schedule.name] for t in last) / 1_440
    print(
        "  rows written (inserted + updated + deleted, pg_stat_user_tables) per job of each tick, round",
        ROUNDS,
    )
    for t in last:
        if t.children:
            top = sorted(t.writes.items(), key=lambda kv: -kv[1])[:4]
            print(
                f"    {t.schedule.name:26} {sum(t.writes.values()) / t.children:7.1f} per job "
                f"(jobs {t.writes.get('jobs', 0) / t.children:.1f}; {', '.join(f'{k} {v:,}' for k, v in top)})"
            )
    writes_per_s = sum(sum(t.writes.values()) * day[t.schedule.name] for t in last) / 86_400
    print(
        f"  rows written per second, day average: {writes_per_s:,.1f} ({writes_per_s / ACCOUNTS * 1000:.2f} per 1,000 accounts)"
    )
    print(
        f"  job rows per account per day: {job_rows_day / ACCOUNTS:.0f}; {bytes_per_row:.0f} B per job row with "
        f"its indexes (jobs' growth / its rows, every tick); WB calls {wb_per_min:,.0f}/min "
        f"({wb_per_min / ACCOUNTS:.2f} per account)"
    )
    results += [
        Result(name, "jobs bytes per row", bytes_per_row, unit="B", higher_is_better=False),
        Result(
            name,
            "WB calls per account per minute",
            wb_per_min / ACCOUNTS,
            unit="calls",
            higher_is_better=False,
        ),
        Result(
            name,
            "PostgreSQL rows written per s per 1,000 accounts",
            writes_per_s / ACCOUNTS * 1000,
            unit="rows/s",
            higher_is_better=False,
        ),
    ]

    # Steady state with retention (derived): per schedule, each account keeps its rows of the retention window
    # (+ the prune's interval), and at least its latest finished run, which is never pruned.
    print(
        f"\nsteady state with retention (each job type's, + 1 h for the hourly prune to come round); {pruned}"
    )
    steady_rows = 0.0
    for t in last:
        if not t.schedule.per_account or not t.children:
            continue
        completed_d, failed_d = kept[t.schedule.name]
        fail = t.failed / t.children
        per_account = day[t.schedule.name] * t.children / ACCOUNTS
        rows = ACCOUNTS * (max(per_account * (1 - fail) * completed_d, 1) + per_account * fail * failed_d)
        steady_rows += rows
        print(
            f"  {t.schedule.name:26} {rows:12,.0f} rows: {per_account:g} a day per account, completed kept "
            f"{completed_d:.3g} d (at least the latest), {fail:.2%} failed kept {failed_d:.3g} d"
        )
    print(
        f"  jobs, scheduled: {steady_rows:,.0f} rows ≈ {fmt_bytes(steady_rows * bytes_per_row)} at {bytes_per_row:.0f} B"
        " a row (+ user jobs: their rate × their retention)"
    )
    print(
        f"  without retention: {job_rows_day:,.0f} rows/day ≈ {fmt_bytes(job_rows_day * bytes_per_row)}/day, "
        f"{fmt_bytes(job_rows_day * bytes_per_row * 30)} per 30 days"
    )
    results += [
        Result(name, "job rows per account per day", job_rows_day / ACCOUNTS, unit="rows", higher_is_better=False),
        Result(name, "steady-state job bytes per account", steady_rows * bytes_per_row / ACCOUNTS, unit="B",
               higher_is_better=False),
    ]  # fmt: skip
    print("  tables at the end of the run:")
    for table, (rows, size) in sorted(final.items(), key=lambda kv: -kv[1][1])[:12]:
        print(f"    {table:28} {rows:12,} rows  {fmt_bytes(size):>12}")

    keys, size, families = rest
    print(
        f"\nRedis: at rest {keys:,} keys, {fmt_bytes(size)} ({keys / ACCOUNTS:.2f} keys, {size / ACCOUNTS:.0f} B per "
        f"account); fullest (after {peak['schedule']}'s fan-out) {peak['keys']:,} keys, {fmt_bytes(peak['bytes'])} "
        f"({peak['bytes'] / ACCOUNTS:.0f} B per account); by key at rest:"
    )
    for family, (n, b) in sorted(families.items(), key=lambda kv: -kv[1][1])[:8]:
        print(f"    {family:60} {n:8,} keys {fmt_bytes(b):>10}")
    if live_left:
        print(f"  ({live_left} jobs still live at the end)")
    results += [
        Result(
            name,
            "Redis bytes per account, fullest",
            peak["bytes"] / ACCOUNTS,
            unit="B",
            higher_is_better=False,
        ),
        Result(name, "Redis bytes per account, at rest", size / ACCOUNTS, unit="B", higher_is_better=False),
    ]
    return results


if __name__ == "__main__":
    main()
