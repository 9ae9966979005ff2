"""API load: job creates and status reads by locust on gatehouse-api at 0, 10,000 and 100,000 live jobs, vs their floors.

The generator is locust, headless, in its own process (``locust -f <file> --headless``; its
gevent monkey-patching stays there), with ``FastHttpUser`` users (geventhttpclient: the
cheapest Python HTTP client per request, which matters when the generator shares 2 cores with
what it measures) and no wait time: a closed loop of USERS concurrent clients. Its CSV stats
give each request name's count, requests/s, p50 and p99.

The API is a real ``gatehouse-api`` (gunicorn, 2 workers × 4 threads, BACKEND_ROLE=api: no
consumers in it, nothing else runs jobs) on a throwaway database. Seeded in SQL
(generate_series): LOAD_ACCOUNTS accounts with an account key each (the clients), FLOOR_ACCOUNTS
for the create floor, and at each level that many live jobs (waiting, a fifth delayed) spread
over 5 job types of SEED_ACCOUNTS other accounts (the one-live-per-(account, type) index holds),
plus STATUS_TARGETS finished jobs of the client accounts that the status reads fetch.

At each level, in this order, every phase at the same concurrency (USERS):

- status floor: USERS threads of a bare primary-key ``SELECT`` (``gatehouse.jobs.SQL_GET``) loop
  in raw psycopg;
- status: ``GET /v1/jobs/{id}`` of the targets, each with its account's key;
- create floor: USERS threads of a bare loop of the API's own ``INSERT … ON CONFLICT … DO
  NOTHING RETURNING`` (``gatehouse.jobs.SQL_CREATE``) and one Redis ``LPUSH`` (one row, one
  enqueue: what a create minimally costs); its rows are deleted after (and the table vacuumed);
- create: ``POST /v1/accounts/{id}/digitization/imports`` (feeds, report) and
  ``POST /v1/accounts/{id}/autobidder/sync`` in turn, every request a new (account, type) pair, so
  each one writes a new row and enqueues it (the counts of rows made vs requests are printed;
  alreadyRunning answers are the rest). Nothing consumes, so the live rows grow during the
  phase: the level is what the table holds when it starts, and the count at its end is printed.

Once, before the levels, the HTTP ceiling: ``GET /healthz`` (no key, no store) by the same locust
at the same concurrency — what gunicorn, Falcon and the generator cost with no work behind them.
Its ratio to the status floor bounds what any route can reach on this machine.

Printed: throughput and p50/p99 of each side, the ratios to the floor, and p99 at 100,000 live
rows vs at 0. Targets: create ≥ 0.5 of its floor, status ≥ 0.5 of its floor, p99 at 100,000 live
rows within 1.5× of p99 at 0.
"""

from __future__ import annotations

import csv
import hashlib
import itertools
import json
import os
import signal
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from pathlib import Path

import httpx
import psycopg
import redis
from psycopg.types.json import Jsonb

from bench.support import BENCH_REDIS_DB, BIN, REPO, Result, bench_settings, percentile, process_env
from gatehouse import job_types as jt
from gatehouse.jobs import SQL_CREATE, SQL_GET

USERS = 16
LEVELS = (0, 10_000, 100_000)
LOAD_ACCOUNTS = 10_000
FLOOR_ACCOUNTS = 10_000
SEED_ACCOUNTS = 20_000  # × 5 job types: room for 100,000 live jobs
STATUS_TARGETS = 2_000
PHASE_S = 15  # each locust phase
FLOOR_S = 6  # each floor
WARMUP = 200
SEED_TYPES = [jt.IMPORT_USER_FEEDS, jt.IMPORT_USER_REPORT, jt.AUTOBIDDER_SYNC_USER]
SEED_TYPES += [jt.REGISTRY["digitization:sync-account"], jt.REGISTRY["rnp:ads-sync-account"]]
CREATE_TYPES = [jt.IMPORT_USER_FEEDS, jt.IMPORT_USER_REPORT, jt.AUTOBIDDER_SYNC_USER]
LIVE = "state IN ('waiting', 'active', 'delayed')"
PERIOD = {"dateFrom": "2026-09-01", "dateTo": "2026-11-29"}

# The locust side, written to a temporary file and run by ``locust`` in its own process.
LOCUSTFILE = '''
import itertools, json, os

from locust import FastHttpUser, constant, task

CONFIG = json.loads(open(os.environ["BENCH_LOAD_CONFIG"]).read())
ACCOUNTS, TOKENS, TARGETS = CONFIG["accounts"], CONFIG["tokens"], CONFIG["targets"]
PERIOD = CONFIG["period"]
CREATES = [
    ("/v1/accounts/{}/digitization/imports", json.dumps({"kind": "feeds", **PERIOD}), "create: imports"),
    ("/v1/accounts/{}/digitization/imports", json.dumps({"kind": "report", **PERIOD}), "create: imports"),
    ("/v1/accounts/{}/autobidder/sync", "{}", "create: autobidder sync"),
]
_next = itertools.count()  # one process, gevent: each request takes the next index


def headers(account):
    return {"Authorization": "Bearer " + TOKENS[account], "Content-Type": "application/json"}


class Creator(FastHttpUser):
    """Request j: account j mod n, type (j mod n + j div n) mod 3: a new (account, type) pair
    for the first 3 n requests, consecutive requests on different accounts, the types mixed."""

    wait_time = constant(0)

    @task
    def create(self):
        j = next(_next)
        n = len(ACCOUNTS)
        account = j % n
        path, body, name = CREATES[(account + j // n) % 3]
        with self.client.post(
            path.format(ACCOUNTS[account]), data=body, headers=headers(account), name=name,
            catch_response=True,
        ) as response:
            if response.status_code != 202:
                response.failure(f"{response.status_code}: {response.text[:200]}")


class Ceiling(FastHttpUser):
    """GET /healthz: no key, no store: what gunicorn, Falcon and locust cost alone."""

    wait_time = constant(0)

    @task
    def health(self):
        self.client.get("/healthz", name="healthz")


class Reader(FastHttpUser):
    wait_time = constant(0)

    @task
    def status(self):
        job, account = TARGETS[next(_next) % len(TARGETS)]
        with self.client.get(
            f"/v1/jobs/{job}", headers=headers(account), name="status", catch_response=True
        ) as response:
            if response.status_code != 200:
                response.failure(f"{response.status_code}: {response.text[:200]}")
'''


def _uuid(kind: str, i: int) -> uuid.UUID:
    """The id the seed SQL gives row ``i`` of ``kind``: md5(kind || i)::uuid."""
    return uuid.UUID(hashlib.md5(f"{kind}{i}".encode()).hexdigest())


def token(i: int) -> str:
    """Client account ``i``'s key, as the seed SQL stores it (ghk_<id>_<secret>, SHA-256 of the secret)."""
    return f"ghk_{i:016x}_s{i}"


def seed_accounts(conn: psycopg.Connection) -> None:
    for kind, n in (("load", LOAD_ACCOUNTS), ("floor", FLOOR_ACCOUNTS), ("seed", SEED_ACCOUNTS)):
        conn.execute(
            "INSERT INTO accounts (id, name) SELECT md5(%(kind)s || i)::uuid, %(kind)s || '-' || i"
            " FROM generate_series(0, %(n)s - 1) i",
            {"kind": kind, "n": n},
        )
    conn.execute(
        "INSERT INTO api_keys (id, account_id, secret_sha256)"
        " SELECT lpad(to_hex(i), 16, '0'), md5('load' || i)::uuid,"
        "        encode(sha256(convert_to('s' || i, 'UTF8')), 'hex')"
        " FROM generate_series(0, %(n)s - 1) i",
        {"n": LOAD_ACCOUNTS},
    )


def seed_jobs(conn: psycopg.Connection, live: int) -> None:
    """An empty jobs table, then ``live`` live jobs of the seed accounts and the status targets."""
    conn.execute("TRUNCATE jobs")
    types = [(k, t.name, t.queue, t.tier) for k, t in enumerate(SEED_TYPES)]
    values = ", ".join(["(%s, %s, %s, %s)"] * len(types))
    conn.execute(
        f"""INSERT INTO jobs (id, type, queue, tier, account_id, state, resume_at, max_attempts,
                              created_at, updated_at)
        SELECT gen_random_uuid(), t.type, t.queue, t.tier, md5('seed' || (i / %s))::uuid,
               CASE WHEN (i / %s) %% 5 = 0 THEN 'delayed' ELSE 'waiting' END,
               CASE WHEN (i / %s) %% 5 = 0 THEN now() + interval '1 hour' END, 3,
               now() - i * interval '10 ms', now() - i * interval '10 ms'
        FROM generate_series(0, %s - 1) i JOIN (VALUES {values}) t(k, type, queue, tier) ON t.k = i %% %s""",
        [len(types), len(types), len(types), live, *itertools.chain(*types), len(types)],
    )
    conn.execute(
        """INSERT INTO jobs (id, type, queue, tier, account_id, state, max_attempts, progress, result,
                             created_at, updated_at, started_at, finished_at)
        SELECT md5('status' || i)::uuid, %s, %s, 'user', md5('load' || (i %% %s))::uuid, 'completed', 3,
               '{"phase": "completed"}', '{"rows": 120}', now(), now(), now(), now()
        FROM generate_series(0, %s - 1) i""",
        [jt.IMPORT_USER_FEEDS.name, jt.IMPORT_USER_FEEDS.queue, LOAD_ACCOUNTS, STATUS_TARGETS],
    )
    conn.execute("VACUUM ANALYZE jobs")


def count(conn: psycopg.Connection, sql: str) -> int:
    return conn.execute(sql).fetchone()[0]


def settled(conn: psycopg.Connection) -> int:
    """The live jobs once the API has answered what it still had queued (locust stops its users
    mid-request; gunicorn still serves what it accepted): the count, when two polls agree."""
    deadline = time.monotonic() + 30
    last = count(conn, f"SELECT count(*) FROM jobs WHERE {LIVE}")
    while time.monotonic() < deadline:
        time.sleep(0.5)
        now = count(conn, f"SELECT count(*) FROM jobs WHERE {LIVE}")
        if now == last:
            return now
        last = now
    raise RuntimeError("the API kept creating jobs 30 s after the load stopped")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Api:
    """``gatehouse-api`` (gunicorn, 2 workers × 4 threads, BACKEND_ROLE=api), its output in a log file."""

    def __init__(self, settings) -> None:
        self.url = f"http://127.0.0.1:{free_port()}"
        self.log_path = Path(tempfile.mkstemp(prefix="bench-load-api-", suffix=".log")[1])
        env = process_env(settings, backend_role="api", api_workers=2, api_threads=4)
        with open(self.log_path, "wb") as log:
            self.popen = subprocess.Popen(
                [str(BIN / "gatehouse-api"), "--bind", self.url.removeprefix("http://")],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                cwd=REPO,
            )
        deadline = time.monotonic() + 60
        while True:
            if self.popen.poll() is not None:
                raise RuntimeError(f"gatehouse-api exited with {self.popen.returncode}:\n{self.log_tail()}")
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"gatehouse-api not answering after 60 s:\n{self.log_tail()}")
            time.sleep(0.1)

    def log_tail(self, chars: int = 4000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:]

    def errors(self) -> list[str]:
        return [
            line for line in self.log_path.read_text(errors="replace").splitlines() if "Traceback" in line
        ]

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.popen.pid, signal.SIGKILL)
                self.popen.wait()
        self.log_path.unlink(missing_ok=True)


def locust(url: str, user_class: str, config: Path, workdir: Path) -> dict[str, dict[str, float]]:
    """One headless locust run of ``user_class`` for PHASE_S seconds: its stats per request name."""
    prefix = workdir / user_class
    argv = [
        str(BIN / "locust"),
        "-f",
        str(workdir / "locustfile.py"),
        "--headless",
        "-u",
        str(USERS),
        "-r",
        str(USERS * 100),  # every user at once
        "-t",
        f"{PHASE_S}s",
        "--host",
        url,
        "--csv",
        str(prefix),
        "--only-summary",
        "--loglevel",
        "WARNING",
        user_class,
    ]
    env = {**os.environ, "BENCH_LOAD_CONFIG": str(config)}
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=PHASE_S + 60, cwd=workdir)
    if "CPU usage above" in done.stderr + done.stdout:
        print("             (locust warned that its CPU usage was above 90 %: the generator was saturated)")
    stats = {}
    with open(f"{prefix}_stats.csv", newline="") as f:
        for row in csv.DictReader(f):
            stats[row["Name"]] = {
                "count": float(row["Request Count"]),
                "failures": float(row["Failure Count"]),
                "rps": float(row["Requests/s"]),
                "p50": float(row["50%"]),
                "p99": float(row["99%"]),
            }
    if "Aggregated" not in stats or stats["Aggregated"]["count"] == 0:
        raise RuntimeError(f"locust made no requests (rc {done.returncode}):\n{done.stderr[-4000:]}")
    if stats["Aggregated"]["failures"]:
        with open(f"{prefix}_failures.csv") as f:
            print(f"             failures:\n{f.read()[:2000]}")
    return stats


def floor(settings, op: str, targets: list[uuid.UUID]) -> dict[str, float]:
    """USERS threads of the bare loop for FLOOR_S seconds: ops/s, p50 and p99 in ms."""
    pairs = itertools.count()
    stop = threading.Event()
    latencies: list[list[float]] = [[] for _ in range(USERS)]
    ready = threading.Barrier(USERS + 1)

    def loop(i: int) -> None:
        own = latencies[i]
        with psycopg.connect(settings.libpq_url, autocommit=True) as conn:
            client = redis.Redis.from_url(settings.redis_url)
            conn.execute("SELECT 1")
            client.ping()
            ready.wait()
            n = 0
            while not stop.is_set():
                t0 = time.perf_counter()
                if op == "create":
                    j = next(pairs)
                    job_type = CREATE_TYPES[j // FLOOR_ACCOUNTS % 3]
                    params = {
                        "id": uuid.uuid4(),
                        "type": job_type.name,
                        "queue": job_type.queue,
                        "tier": job_type.tier,
                        "account_id": _uuid("floor", j % FLOOR_ACCOUNTS),
                        "max_attempts": 3,
                        "payload": Jsonb(PERIOD),
                    }
                    row = conn.execute(SQL_CREATE, params).fetchone()
                    client.lpush(
                        "bench:load:floor", json.dumps({"id": str(params["id"]), "row": row is not None})
                    )
                else:
                    conn.execute(SQL_GET, {"id": targets[(i + n * USERS) % len(targets)]}).fetchone()
                    n += 1
                own.append(time.perf_counter() - t0)
            client.close()

    threads = [threading.Thread(target=loop, args=(i,)) for i in range(USERS)]
    for t in threads:
        t.start()
    ready.wait()
    start = time.perf_counter()
    time.sleep(FLOOR_S)
    stop.set()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - start
    every = [x for own in latencies for x in own]
    return {
        "rps": len(every) / elapsed,
        "p50": percentile(every, 50) * 1000,
        "p99": percentile(every, 99) * 1000,
    }


def warm_up(url: str) -> None:
    """Both workers' pools, caches and code paths, on accounts the create phase reaches last."""
    with httpx.Client(base_url=url, timeout=10) as client:
        for k in range(WARMUP):
            i = LOAD_ACCOUNTS - 1 - k % 100
            auth = {"Authorization": f"Bearer {token(i)}"}
            if k < 100:
                client.post(f"/v1/accounts/{_uuid('load', i)}/autobidder/sync", json={}, headers=auth)
            client.get(f"/v1/jobs/{_uuid('status', i % STATUS_TARGETS)}", headers=auth)


def side(stats: dict[str, float]) -> str:
    return f"{stats['rps']:7.0f}/s  p50 {stats['p50']:6.1f} ms  p99 {stats['p99']:6.1f} ms"


def main() -> list[Result]:
    redis_db = int(os.environ.get("GATEHOUSE_BENCH_REDIS_DB", BENCH_REDIS_DB))
    levels = {}
    with bench_settings(redis_db=redis_db) as settings, tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        (workdir / "locustfile.py").write_text(LOCUSTFILE)
        config = workdir / "config.json"
        targets = [_uuid("status", i) for i in range(STATUS_TARGETS)]
        config.write_text(
            json.dumps(
                {
                    "accounts": [str(_uuid("load", i)) for i in range(LOAD_ACCOUNTS)],
                    "tokens": [token(i) for i in range(LOAD_ACCOUNTS)],
                    "targets": [[str(t), i % LOAD_ACCOUNTS] for i, t in enumerate(targets)],
                    "period": PERIOD,
                }
            )
        )
        with psycopg.connect(settings.libpq_url, autocommit=True) as conn:
            started = time.perf_counter()
            seed_accounts(conn)
            print(
                f"seeded {LOAD_ACCOUNTS + FLOOR_ACCOUNTS + SEED_ACCOUNTS:,} accounts ({LOAD_ACCOUNTS:,} with a key) "
                f"in {time.perf_counter() - started:.1f} s; {USERS} concurrent clients on every side",
                flush=True,
            )
            api = Api(settings)
            try:
                seed_jobs(conn, 0)
                warm_up(api.url)
                ceiling = locust(api.url, "Ceiling", config, workdir)["healthz"]
                ceiling_floor = floor(settings, "status", targets)
                print(f"http ceiling : {side(ceiling)}  GET /healthz (no key, no store)")
                print(
                    f"               {ceiling['rps'] / ceiling_floor['rps']:.2f} of the status floor "
                    f"({ceiling_floor['rps']:.0f}/s): no route can do better here",
                    flush=True,
                )
                for live in LEVELS:
                    started = time.perf_counter()
                    seed_jobs(conn, live)
                    seeded = time.perf_counter() - started
                    assert count(conn, f"SELECT count(*) FROM jobs WHERE {LIVE}") == live
                    r = {"status_floor": floor(settings, "status", targets)}
                    r["status"] = locust(api.url, "Reader", config, workdir)["status"]
                    r["create_floor"] = floor(settings, "create", targets)
                    floor_rows = count(conn, f"SELECT count(*) FROM jobs WHERE {LIVE}") - live
                    conn.execute(
                        "DELETE FROM jobs WHERE account_id IN"
                        " (SELECT md5('floor' || i)::uuid FROM generate_series(0, %s - 1) i)",
                        [FLOOR_ACCOUNTS],
                    )
                    conn.execute("VACUUM ANALYZE jobs")
                    redis.Redis.from_url(settings.redis_url).delete("bench:load:floor")
                    stats = locust(api.url, "Creator", config, workdir)
                    r["create"] = stats["Aggregated"]
                    after = settled(conn)
                    made = after - live
                    levels[live] = r
                    print(f"--- {live:,} live jobs (seeded in {seeded:.1f} s)", flush=True)
                    print(f"status floor : {side(r['status_floor'])}  (primary-key SELECT, raw psycopg)")
                    print(f"status       : {side(r['status'])}  GET /v1/jobs/{{id}}")
                    print(
                        f"create floor : {side(r['create_floor'])}  (INSERT … ON CONFLICT + LPUSH; "
                        f"{floor_rows:,} rows, deleted after)"
                    )
                    for name in ("create: imports", "create: autobidder sync"):
                        if name in stats:
                            print(f"  {name:23}: {side(stats[name])}")
                    requests = r["create"]["count"]
                    if made >= requests:
                        rows = f"every request a new job, +{made - requests:,.0f} served after locust stopped"
                    else:
                        rows = f"at least {requests - made:,.0f} answered alreadyRunning"
                    print(
                        f"create       : {side(r['create'])}  ({requests:,.0f} requests, {made:,} new rows: "
                        f"{rows}; live jobs {live:,} → {after:,})"
                    )
                    print(
                        f"ratios       : create/floor {r['create']['rps'] / r['create_floor']['rps']:.2f}, "
                        f"status/floor {r['status']['rps'] / r['status_floor']['rps']:.2f}",
                        flush=True,
                    )
                errors = api.errors()
                if errors:
                    print(f"gatehouse-api logged {len(errors)} tracebacks; the last:\n{api.log_tail()}")
            finally:
                api.stop()
    results = [
        Result(
            "bench_load", "http ceiling (GET /healthz)/status floor", ceiling["rps"] / ceiling_floor["rps"]
        )
    ]
    for live, r in levels.items():
        for kind in ("create", "status"):
            ratio = r[kind]["rps"] / r[f"{kind}_floor"]["rps"]
            results.append(Result("bench_load", f"{kind}/floor throughput, {live:,} live", ratio, 0.5))
    top, zero = levels[LEVELS[-1]], levels[0]
    for kind in ("create", "status"):
        ratio = top[kind]["p99"] / zero[kind]["p99"]
        print(
            f"{kind} p99 at {LEVELS[-1]:,} live vs at 0: {top[kind]['p99']:.1f} ms / {zero[kind]['p99']:.1f} ms "
            f"= {ratio:.2f} (target <= 1.5)"
        )
        results.append(
            Result(
                "bench_load", f"{kind} p99 {LEVELS[-1]:,} live / 0 live", ratio, 1.5, higher_is_better=False
            )
        )
    print(
        "targets: create/floor >= 0.5, status/floor >= 0.5 (each level); p99 at 100,000 live <= 1.5 × p99 at 0"
    )
    for kind in ("create", "status"):
        results.append(Result("bench_load", f"{kind} throughput, 0 live", zero[kind]["rps"], unit="req/s"))
        results.append(Result("bench_load", f"{kind} p99, 0 live", zero[kind]["p99"], unit="ms"))
        results.append(Result("bench_load", f"{kind} p99, {LEVELS[-1]:,} live", top[kind]["p99"], unit="ms"))
    return results


if __name__ == "__main__":
    main()
