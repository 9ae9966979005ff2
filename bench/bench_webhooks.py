"""Webhook deliveries/s on real worker processes vs a bare httpx POST loop of the same concurrency.

Both sides POST to the same local receiver, a minimal asyncio HTTP/1.1 server in
its own process that answers ``204`` at once (keep-alive, no body), so what the
receiver costs is common to both:

- floor: 2 processes × THREADS threads of a bare loop of ``httpx.Client.post``
  (one client per process, shared by its threads, with the workers' connection
  limits), the same body (a real delivery's signed body) and the same Standard
  Webhooks headers, to the same ENDPOINTS URLs in turn. The workers send through
  httpx's transport (``gatehouse.webhooks.sender``), which skips the Client's
  layers: the bench prints what each costs per POST on its own (``httpx``);
- webhooks: ``gatehouse-worker --processes 2 --threads THREADS`` delivering
  ``webhook.deliver`` jobs, measured twice (POOLS): as a pool of its own
  (``--queues webhook.deliver``, the deployment the README recommends for
  webhook volume; the target is its) and as a worker of every queue, whose 18
  other idle consumers' polls cost it CPU (reported). ENDPOINTS endpoints (one
  receiver, one URL path each), all subscribed to ``webhook.test``; N/ENDPOINTS events raised in one
  unit of work (``tx.publish``, gatehouse.uow), each fanned out by the
  outbox to every endpoint: N deliveries, batched per endpoint into job rows of
  WEBHOOK_BATCH_SIZE (the default, 50) deliveries each, committed before the
  clock runs (untimed; its time is printed). That unit of work holds the job
  messages instead of sending them at its commit; the clock runs from sending every
  job message in one Redis pipeline to the last delivery's ``delivered_at``.
  WEBHOOK_MAX_PER_ENDPOINT stays 4: ENDPOINTS × 4 slots ≥ 2 × THREADS threads, so
  the per-endpoint limit is not the bottleneck (slot waits, if any, are counted
  and printed).

ROUNDS rounds per pool, alternating which side goes first, after a warm-up of each; the
ratio is the median of the rounds' webhooks/floor. Where the time goes: per
delivery, the CPU of each process group (workers, their PostgreSQL backends,
Redis — server-wide —, the receiver, the floor's clients), PostgreSQL
transactions and row writes (pg_stat_database of the bench's own database), the
attempt's HTTP time as the sender recorded it, and slot waits. The machine is
shared: "others" is its busy CPU time less these groups' (whatever else ran).

``python -m bench.bench_webhooks receiver`` / ``floor`` are the helper processes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime

import httpx
import psutil
import psycopg

from bench.support import (
    REPO,
    Result,
    bench_settings,
    percentile,
    process_env,
    send_pipelined,
    worker_processes,
)
from gatehouse.composition import Components, bootstrap
from gatehouse.events import Event, EventBus
from gatehouse.job_types import WEBHOOK_DELIVER
from gatehouse.jobs import JobMessage
from gatehouse.settings import Settings
from gatehouse.uow import UnitOfWork
from gatehouse.webhooks import sender, signing
from gatehouse.webhooks.safety import Allowlist, Guard

PROCESSES, THREADS = 2, 8
ENDPOINTS = 8
MAX_PER_ENDPOINT = 4  # the default, set explicitly
BATCH_SIZE = 50  # WEBHOOK_BATCH_SIZE's default, set explicitly
N = 4_000  # deliveries per run: N / ENDPOINTS events, each to every endpoint
WARMUP = 400
ROUNDS = 6
# The workers poll their idle queues as in production (WORKER_IDLE_POLL_MS, WORKER_QUIET_POLL_MS
# defaults), not at bench_settings' 20 ms: each poll of each idle queue costs both sides CPU.
POLLS = {
    name: Settings.model_fields[name].default for name in ("worker_idle_poll_ms", "worker_quiet_poll_ms")
}
# The pools measured: name, CLI options, target. A pool of its own for the webhooks (README,
# "Processes") polls 2 idle queues, not 20: the target is its. A worker of every queue is reported.
POOLS = (
    ("webhook pool", ("--queues", WEBHOOK_DELIVER.queue), 0.5),
    ("every queue", (), None),
)
EVENT_TYPE = "webhook.test"
COUNT_PATH = "/_count"


# --- the receiver (its own process) ---------------------------------------------------------------


class _Answer(asyncio.Protocol):
    """HTTP/1.1 keep-alive, one request at a time per connection: read head and body, answer 204."""

    count = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        self.buf = b""

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while (end := self.buf.find(b"\r\n\r\n")) >= 0:
            head = self.buf[:end]
            length = 0
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            if len(self.buf) < end + 4 + length:
                return
            self.buf = self.buf[end + 4 + length :]
            if head.split(b" ", 2)[1] == COUNT_PATH.encode():
                body = str(_Answer.count).encode()
                self.transport.write(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body))
            else:
                _Answer.count += 1
                self.transport.write(b"HTTP/1.1 204 No Content\r\n\r\n")


def receiver_main() -> None:
    async def serve() -> None:
        server = await asyncio.get_running_loop().create_server(_Answer, "127.0.0.1", 0, backlog=1024)
        print(server.sockets[0].getsockname()[1], flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)  # until stdin closes

    asyncio.run(serve())


# --- the floor's clients (their own processes) -------------------------------------------------------


def floor_main() -> None:
    """stdin: a JSON config line, then ``run <n>`` lines; stdout: ``ready``, then one JSON line per run."""
    config = json.loads(sys.stdin.readline())
    urls, body, headers, threads = (
        config["urls"],
        config["body"].encode(),
        config["headers"],
        config["threads"],
    )
    client = httpx.Client(limits=sender.LIMITS)

    def loop(n: int, offset: int, failures: list[int]) -> None:
        bad = 0
        for i in range(n):
            response = client.post(urls[(offset + i) % len(urls)], content=body, headers=headers)
            bad += not 200 <= response.status_code < 300
        failures.append(bad)

    def run(n: int) -> dict[str, float]:
        failures: list[int] = []
        workers = [
            threading.Thread(target=loop, args=(n // threads + (t < n % threads), t, failures))
            for t in range(threads)
        ]
        start = time.perf_counter()
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        return {"elapsed": time.perf_counter() - start, "failed": sum(failures)}

    run(threads * 20)  # warm: every thread's connection open
    print("ready", flush=True)
    for line in sys.stdin:
        if line.startswith("run "):
            print(json.dumps(run(int(line.split()[1]))), flush=True)


# --- the bench ---------------------------------------------------------------------------------------


class Helper:
    """``python -m bench.bench_webhooks <role>``, talking over stdin/stdout lines."""

    def __init__(self, role: str, env: dict[str, str]) -> None:
        self.popen = subprocess.Popen(
            [sys.executable, "-m", "bench.bench_webhooks", role],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=REPO,
            env=env,
        )
        self.process = psutil.Process(self.popen.pid)

    def say(self, line: str) -> None:
        self.popen.stdin.write(line + "\n")
        self.popen.stdin.flush()

    def hear(self) -> str:
        line = self.popen.stdout.readline()
        if not line:
            raise RuntimeError(f"bench helper {self.popen.args[-1]} exited with {self.popen.wait()}")
        return line.strip()

    def stop(self) -> None:
        with contextlib.suppress(OSError):
            self.popen.stdin.close()
        try:
            self.popen.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait()


def cpu_s(processes: list[psutil.Process]) -> dict[int, float]:
    seconds = {}
    for p in processes:
        with contextlib.suppress(psutil.Error):
            t = p.cpu_times()
            seconds[p.pid] = t.user + t.system
    return seconds


class Cpu:
    """CPU seconds of process groups between two snapshots (a process new at the second counts whole)."""

    def __init__(self, groups: dict[str, Callable[[], list[psutil.Process]]]) -> None:
        self.groups = groups

    def snapshot(self) -> dict[str, dict[int, float]]:
        seconds = {name: cpu_s(find()) for name, find in self.groups.items()}
        t = psutil.cpu_times()
        seconds["machine"] = {0: sum(t) - t.idle - getattr(t, "iowait", 0.0)}  # every process's, busy
        return seconds

    @staticmethod
    def delta(before: dict[str, dict[int, float]], after: dict[str, dict[int, float]]) -> dict[str, float]:
        return {name: sum(s - before[name].get(pid, 0.0) for pid, s in after[name].items()) for name in after}


@dataclass
class Run:
    rate: float
    seconds: float
    cpu: dict[str, float]
    extra: dict[str, float]


class Bench:
    def __init__(self, gh: Components, receiver: Helper, port: int) -> None:
        self.gh = gh
        self.receiver = receiver
        self.db = psycopg.connect(gh.settings.libpq_url, autocommit=True)
        self.urls = [f"http://127.0.0.1:{port}/hooks/{i}" for i in range(ENDPOINTS)]
        for url in self.urls:
            gh.webhook_handlers.create_endpoint(url, event_types=[EVENT_TYPE], description="bench")
        # The producer's event bus with its one subscriber, the webhooks' outbox (as bootstrap wires it).
        self.bus = EventBus(emits=gh.modules.emits)
        self.bus.subscribe(gh.webhooks.outbox)
        self.count_url = f"http://127.0.0.1:{port}{COUNT_PATH}"
        self.http = httpx.Client()

    def received(self) -> int:
        return int(self.http.get(self.count_url).text)

    def reset(self) -> None:
        for table in ("webhook_attempts", "webhook_deliveries", "jobs"):
            self.db.execute(f"DELETE FROM {table}")
        self.db.execute("VACUUM ANALYZE webhook_attempts, webhook_deliveries, jobs")

    def publish(self, n: int) -> tuple[list[JobMessage], float]:
        """n / ENDPOINTS events, each fanned out to every endpoint, in one transaction (untimed).

        Returns the job messages unsent: its unit of work holds them (its ``send`` keeps them) for
        the one Redis pipeline the clock starts at; the producer's own would send them at the commit.
        """
        if n % ENDPOINTS:
            raise ValueError(f"{n} deliveries is not a multiple of {ENDPOINTS} endpoints")
        start = time.perf_counter()
        events = [
            Event(
                EVENT_TYPE,
                {
                    "seq": i,
                    "productId": str(uuid.uuid4()),
                    "sku": f"SKU-{i:08d}",
                    "changes": {"price": {"from": 1999, "to": 1799}, "stock": {"from": 12, "to": 11}},
                    "message": "Gatehouse bench event",
                },
            )
            for i in range(n // ENDPOINTS)
        ]
        jobs: list[JobMessage] = []
        held = UnitOfWork(self.gh.engine, self.gh.statements, self.bus, jobs.extend)
        with held.begin() as tx:
            tx.publish(*events)
        [(raised,)] = self.db.execute("SELECT count(*) FROM webhook_deliveries").fetchall()
        if raised != n:
            raise RuntimeError(f"{raised} deliveries raised, {n} expected")
        return jobs, time.perf_counter() - start

    def sample_request(self) -> tuple[str, dict[str, str]]:
        """A real delivery's body and headers as one attempt signs them (for the floor)."""
        message_id, payload = self.db.execute(
            "SELECT message_id, payload FROM webhook_deliveries ORDER BY created_at LIMIT 1"
        ).fetchone()
        body = signing.body_of(payload)
        headers = signing.sign(message_id, datetime.now(UTC), body, [signing.new_secret()])
        return body, {**headers, "content-type": "application/json"}

    def pg_stats(self) -> tuple[int, int, int]:
        return self.db.execute(
            "SELECT xact_commit + xact_rollback, tup_inserted, tup_updated FROM pg_stat_database "
            "WHERE datname = current_database()"
        ).fetchone()

    def wait_delivered(self, n: int, timeout_s: float = 300) -> int:
        """Poll until n deliveries are delivered; returns how many polls it took."""
        deadline, polls = time.monotonic() + timeout_s, 0
        while True:
            polls += 1
            states = dict(
                self.db.execute("SELECT status, count(*) FROM webhook_deliveries GROUP BY status").fetchall()
            )
            if states.get("delivered", 0) >= n:
                return polls
            if states.get("dead") or states.get("failed"):
                raise RuntimeError(f"deliveries failed: {states}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"not all delivered after {timeout_s} s: {states}")
            time.sleep(0.02)

    def wait_jobs_settled(self, timeout_s: float = 60) -> None:
        deadline = time.monotonic() + timeout_s
        while self.db.execute(
            "SELECT EXISTS (SELECT 1 FROM jobs WHERE state IN ('waiting', 'active', 'delayed'))"
        ).fetchone()[0]:
            if time.monotonic() > deadline:
                raise RuntimeError(f"jobs still live after {timeout_s} s")
            time.sleep(0.02)

    def webhooks(self, n: int, cpu: Cpu) -> Run:
        self.reset()
        jobs, publish_s = self.publish(n)
        received, stats, before = self.received(), self.pg_stats(), cpu.snapshot()
        start = send_pipelined(self.gh, WEBHOOK_DELIVER.queue, jobs)  # one round trip, as bench_gate
        polls = self.wait_delivered(n)
        after = cpu.snapshot()
        self.wait_jobs_settled()
        end, attempts = self.db.execute(
            "SELECT extract(epoch FROM max(delivered_at))::float, sum(attempts) FROM webhook_deliveries"
        ).fetchone()
        durations = [d for (d,) in self.db.execute("SELECT duration_ms FROM webhook_attempts").fetchall()]
        messages, waits = self.db.execute(
            "SELECT sum(message_number), count(*) FILTER (WHERE message_number > 1) FROM jobs"
        ).fetchone()
        states = dict(self.db.execute("SELECT state, count(*) FROM jobs GROUP BY state").fetchall())
        if states != {"completed": len(jobs)}:
            raise RuntimeError(f"jobs not all completed: {states}")
        posts = self.received() - received
        time.sleep(1.2)  # PostgreSQL flushes a backend's statistics at most once a second
        xacts, inserted, updated = (b - a for a, b in zip(stats, self.pg_stats(), strict=True))
        seconds = end - start
        return Run(
            n / seconds,
            seconds,
            Cpu.delta(before, after),
            {
                "publish_s": publish_s,
                "attempts": attempts / n,
                "messages": messages / n,
                "jobs": len(jobs),
                "slot_waits": waits,
                "posts": posts / n,
                "http_p50_ms": statistics.median(durations),
                "http_p95_ms": percentile(durations, 95),
                "xacts": (xacts - polls - 2) / n,  # less this bench's own polls and reads
                "inserted": inserted / n,
                "updated": updated / n,
            },
        )

    def floor(self, n: int, clients: list[Helper], cpu: Cpu) -> Run:
        received, before = self.received(), cpu.snapshot()
        start = time.perf_counter()
        shares = [n // len(clients) + (i < n % len(clients)) for i in range(len(clients))]
        for client, share in zip(clients, shares, strict=True):
            client.say(f"run {share}")
        answers = [json.loads(client.hear()) for client in clients]
        seconds = time.perf_counter() - start
        after = cpu.snapshot()
        if failed := sum(a["failed"] for a in answers):
            raise RuntimeError(f"floor: {failed} requests got no 2xx")
        return Run(
            n / seconds, seconds, Cpu.delta(before, after), {"posts": (self.received() - received) / n}
        )

    def close(self) -> None:
        self.http.close()
        self.db.close()


@contextlib.contextmanager
def helpers(settings, role: str, count: int) -> Iterator[list[Helper]]:
    started: list[Helper] = []
    try:
        for _ in range(count):
            started.append(Helper(role, process_env(settings)))
        yield started
    finally:
        for helper in started:
            helper.stop()


def pg_backends(db: psycopg.Connection) -> list[psutil.Process]:
    pids = db.execute(
        "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
    ).fetchall()
    found = []
    for (pid,) in pids:
        with contextlib.suppress(psutil.Error):
            found.append(psutil.Process(pid))
    return found


def redis_server() -> list[psutil.Process]:
    return [p for p in psutil.process_iter(["name"]) if p.info["name"] == "redis-server"]


def tree(pid: int) -> list[psutil.Process]:
    with contextlib.suppress(psutil.Error):
        top = psutil.Process(pid)
        return [top, *top.children(recursive=True)]
    return []


def httpx_costs(urls: list[str], body: str, headers: dict[str, str], n: int = 2_000) -> dict[str, float]:
    """CPU µs per POST in this process, one thread: the floor's ``Client.post`` and the workers' sender."""
    client, transport = (
        httpx.Client(limits=sender.LIMITS),
        sender.transport(Guard(Allowlist.parse(["127.0.0.0/8"]))),
    )
    targets = [httpx.URL(u) for u in urls]
    ways = {
        "httpx.Client.post": lambda i: client.post(urls[i % len(urls)], content=body, headers=headers),
        "sender.post (transport)": lambda i: sender.post(
            transport, targets[i % len(urls)], body, headers, 15
        ),
    }
    spent = dict.fromkeys(ways, 0.0)
    try:
        for _ in range(2):  # twice, alternating, after a warm-up of each
            for name, way in ways.items():
                way(0)
                start = time.process_time()
                for i in range(n // 2):
                    way(i)
                spent[name] += time.process_time() - start
    finally:
        client.close()
        transport.close()
    return {name: seconds / n * 1e6 for name, seconds in spent.items()}


def measure(
    bench: Bench, settings, args: tuple[str, ...], clients: list[Helper], groups: dict
) -> list[tuple[Run, Run]]:
    """ROUNDS rounds of floor and webhooks, alternating which goes first, on a pool started with ``args``."""
    with worker_processes(settings, processes=PROCESSES, threads=THREADS, args=args) as workers:
        bench.webhooks(WARMUP, Cpu({}))  # warm-up: pools, scripts, connections of both processes
        cpu = Cpu({**groups, "workers": lambda: tree(workers.popen.pid)})
        bench.floor(WARMUP, clients, cpu)
        rounds = []
        for i in range(ROUNDS):
            if i % 2 == 0:
                floor = bench.floor(N, clients, cpu)
                measured = bench.webhooks(N, cpu)
            else:
                measured = bench.webhooks(N, cpu)
                floor = bench.floor(N, clients, cpu)
            rounds.append((floor, measured))
            print(
                f"round {i + 1} ({'floor' if i % 2 == 0 else 'webhooks'} first): "
                f"floor {floor.rate:6.0f}/s ({floor.seconds:5.2f} s), "
                f"webhooks {measured.rate:6.0f} deliveries/s ({measured.seconds:5.2f} s), "
                f"ratio {measured.rate / floor.rate:.3f}",
                flush=True,
            )
    return rounds


def report(rounds: list[tuple[Run, Run]]) -> tuple[float, float]:
    """Prints where the time went; returns the median ratio and deliveries/s."""
    ratios = sorted(m.rate / f.rate for f, m in rounds)
    extra = {k: statistics.median(m.extra[k] for _, m in rounds) for k in rounds[0][1].extra}
    print(
        f"medians    : floor {statistics.median(f.rate for f, _ in rounds):.0f} POST/s, "
        f"webhooks {statistics.median(m.rate for _, m in rounds):.0f} deliveries/s in {extra['jobs']:.0f} "
        f"webhook.deliver jobs (publish+commit, untimed: {extra['publish_s']:.2f} s per run)"
    )
    print(
        f"per delivery (medians): {extra['attempts']:.2f} attempts, {extra['messages']:.2f} job messages, "
        f"{extra['posts']:.2f} POSTs received, slot waits {extra['slot_waits']:.0f} per run; "
        f"HTTP as the sender timed it p50 {extra['http_p50_ms']:.0f} ms, p95 {extra['http_p95_ms']:.0f} ms"
    )
    print(
        f"             PostgreSQL: {extra['xacts']:.1f} transactions, {extra['inserted']:.1f} rows inserted, "
        f"{extra['updated']:.1f} rows updated"
    )
    names = ["workers", "postgres", "redis", "receiver", "floor", "bench"]
    cores = psutil.cpu_count()
    print(
        "CPU µs per delivery/POST (medians; redis is the whole server; others: the machine's busy time "
        "less these, i.e. whatever else runs on this shared machine):"
    )
    print(
        "             " + " ".join(f"{name:>8}" for name in names) + f"    total   others  wall×{cores} cores"
    )
    for label, side in (("floor", 0), ("webhooks", 1)):
        runs = [r[side] for r in rounds]
        values = [statistics.median(r.cpu.get(name, 0.0) / N * 1e6 for r in runs) for name in names]
        others = statistics.median(
            (r.cpu["machine"] - sum(r.cpu.get(name, 0.0) for name in names)) / N * 1e6 for r in runs
        )
        capacity = statistics.median(r.seconds * cores / N * 1e6 for r in runs)
        print(
            f"  {label:<10} "
            + " ".join(f"{v:8.0f}" for v in values)
            + f" {sum(values):8.0f} {others:8.0f} {capacity:8.0f}"
        )
    idle = statistics.median(f.cpu.get("workers", 0.0) / f.seconds for f, _ in rounds)
    print(f"             the idle workers (while the floor ran) used {idle:.2f} cores, polling their queues")
    ratio = statistics.median(ratios)
    print(f"ratio webhooks/floor: {ratio:.3f} (rounds {ratios[0]:.3f}–{ratios[-1]:.3f})")
    return ratio, statistics.median(m.rate for _, m in rounds)


def main() -> list[Result]:
    overrides = {
        "webhook_allowed_hosts": ["127.0.0.0/8"],
        "webhook_max_per_endpoint": MAX_PER_ENDPOINT,
        "webhook_batch_size": BATCH_SIZE,
    }
    results: list[Result] = []
    with bench_settings(**overrides) as settings, helpers(settings, "receiver", 1) as [receiver]:
        settings = settings.model_copy(update=POLLS)
        port = int(receiver.hear())
        gh = bootstrap(settings)
        bench = Bench(gh, receiver, port)
        try:
            bench.publish(ENDPOINTS)  # one event's deliveries, never sent: the floor's request
            body, headers = bench.sample_request()
            config = json.dumps({"urls": bench.urls, "body": body, "headers": headers, "threads": THREADS})
            print(
                f"setup      : {N} deliveries per run = {N // ENDPOINTS} webhook.test events × {ENDPOINTS} "
                f"endpoints (one receiver, a URL path each), WEBHOOK_MAX_PER_ENDPOINT={MAX_PER_ENDPOINT} "
                f"({ENDPOINTS * MAX_PER_ENDPOINT} slots for {PROCESSES * THREADS} threads), "
                f"WEBHOOK_BATCH_SIZE={BATCH_SIZE}; workers: WORKER_IDLE_POLL_MS={POLLS['worker_idle_poll_ms']}, "
                f"WORKER_QUIET_POLL_MS={POLLS['worker_quiet_poll_ms']}"
            )
            print(
                f"             floor: {PROCESSES} processes × {THREADS} threads of httpx.Client.post, "
                f"{len(body)}-byte body, {len(headers)} headers"
            )
            costs = httpx_costs(bench.urls, body, headers)
            print(
                "httpx      : CPU µs per POST, one thread: "
                + ", ".join(f"{k} {v:.0f}" for k, v in costs.items())
            )
            with helpers(settings, "floor", PROCESSES) as clients:
                for client in clients:
                    client.say(config)
                for client in clients:
                    if client.hear() != "ready":
                        raise RuntimeError("floor client not ready")
                groups = {
                    "postgres": lambda: pg_backends(bench.db),
                    "redis": redis_server,
                    "receiver": lambda: [receiver.process],
                    "floor": lambda: [c.process for c in clients],
                    "bench": lambda: [psutil.Process()],
                }
                for name, args, target in POOLS:
                    print(
                        f"--- {name}: gatehouse-worker --processes {PROCESSES} --threads {THREADS} {' '.join(args)}",
                        flush=True,
                    )
                    ratio, rate = report(measure(bench, settings, args, clients, groups))
                    results += [
                        Result("bench_webhooks", f"webhooks/floor deliveries/s, {name}", ratio, target),
                        Result("bench_webhooks", f"webhooks, {name}", rate, unit="deliveries/s"),
                    ]
        finally:
            bench.close()
            gh.close()
    return results


if __name__ == "__main__":
    role = sys.argv[1] if len(sys.argv) > 1 else ""
    {"receiver": receiver_main, "floor": floor_main}.get(role, main)()
