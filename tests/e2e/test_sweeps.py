"""The sweeps end to end: a worker killed mid-sweep, the CLI as a real process, ticks fired through a real
API, and an API process that runs no timer or scheduler of its own."""

from __future__ import annotations

import json
import subprocess
import threading
import time
import uuid
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path

import httpx
from sqlalchemy import text

from gatehouse.composition import bootstrap
from tests.conftest import ADMIN_TOKEN
from tests.support.processes import BIN, REPO, wait_until
from tests.support.receiver import Receiver

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
CLI = str(BIN / "gatehouse-cart-abandonment-sweep")
# Batches of 50 (25 for 1,234 carts); a killed worker is found dead within about 2 s.
WORKER_ENV = {"SWEEP_BATCH_SIZE": "50", "WORKER_DEAD_AFTER_MS": "2000", "WORKER_HEARTBEAT_MS": "500"}
LOOPBACK = "127.0.0.0/8"  # the test's webhook receiver
THREAD_LOG_SHIM = REPO / "tests" / "support" / "thread_log"


def stale_carts(sql, n: int, *, age: str = "2 days") -> list[uuid.UUID]:
    rows = sql(
        "INSERT INTO carts (id, customer_ref, items, updated_at, created_at) "
        "SELECT gen_random_uuid(), 'customer-' || g, '[]', now() - interval '" + age + "', "
        "now() - interval '" + age + "' FROM generate_series(1, :n) AS g RETURNING id",
        n=n,
    )
    return [r.id for r in rows]


def abandoned(sql) -> int:
    return sql("SELECT count(*) FROM carts WHERE status = 'abandoned'")[0][0]


def audited(sql, action: str) -> int:
    return sql("SELECT count(*) FROM audit_log WHERE action = :a", a=action)[0][0]


def audited_twice(sql, action: str) -> list:
    return sql(
        "SELECT entity_id FROM audit_log WHERE action = :a GROUP BY entity_id HAVING count(*) > 1", a=action
    )


class OutboxGate:
    """Holds each sweep batch at its event's outbox rows and lets the batches through one at a time.

    A batch writes its flips and audit rows, then its ``carts.cart.abandoned`` event's webhook
    deliveries (the outbox statement needs ROW EXCLUSIVE on webhook_deliveries), then commits. While
    this holds EXCLUSIVE on webhook_deliveries the batch waits there, inside its transaction. To let
    one through, a second connection asks for EXCLUSIVE too (queued behind the batch), then the first
    lets go: the batch gets its lock and commits, and the second connection holds up the next batch.
    """

    def __init__(self, engine, sql) -> None:
        self.engine = engine
        self.sql = sql
        self.held = self._lock()

    def _lock(self):
        conn = self.engine.connect()
        conn.execute(text("LOCK TABLE webhook_deliveries IN EXCLUSIVE MODE"))
        return conn

    def waiting(self) -> int:
        return self.sql(
            "SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = 'webhook_deliveries'::regclass"
        )[0][0]

    def wait_for_a_batch(self) -> None:
        wait_until(lambda: self.waiting() == 1, timeout=30, what="a batch held at its outbox rows")

    def let_one_batch_through(self) -> None:
        self.wait_for_a_batch()
        taken: list = []
        thread = threading.Thread(target=lambda: taken.append(self._lock()))
        thread.start()
        wait_until(lambda: self.waiting() == 2, timeout=10, what="the next lock to queue")
        self.open()
        thread.join(timeout=30)
        [self.held] = taken

    def open(self) -> None:
        self.held.rollback()
        self.held.close()


def cli(process_env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [CLI, *args], env=process_env, capture_output=True, text=True, timeout=120, cwd=REPO
    )  # fmt: skip


def test_a_cart_sweep_killed_mid_run_ends_with_every_stale_cart_abandoned_once(
    processes, process_env, settings, gh, sql
):
    # Given 1,234 carts untouched for two days, 100 touched an hour ago, a webhook endpoint for
    # carts.cart.abandoned, and one worker
    stale, fresh = stale_carts(sql, 1_234), stale_carts(sql, 100, age="1 hour")
    fresh_before = sql("SELECT id, status, updated_at FROM carts WHERE id = ANY(:ids) ORDER BY id", ids=fresh)
    receiver = Receiver()
    wh = bootstrap(settings.model_copy(update={"webhook_allowed_hosts": [LOOPBACK]}))
    try:
        receiver.secrets.append(
            wh.webhook_handlers.create_endpoint(
                receiver.url, event_types=["carts.cart.abandoned"], description=""
            ).secret
        )
    finally:
        wh.close()
    env = {**WORKER_ENV, "WEBHOOK_ALLOWED_HOSTS": LOOPBACK}
    doomed = processes.start("doomed", "gatehouse-worker", "--processes", "1", "--threads", "1", env=env)

    # When the CLI queues the sweep without waiting, three batches commit, and the worker is killed -9
    # in the middle of the fourth, after its flips and audit rows, before its commit
    gate = OutboxGate(gh.engine, sql)
    queued = cli(process_env, "--no-wait")
    assert queued.returncode == 0, queued.stdout + queued.stderr
    assert "queued" in queued.stdout
    for _ in range(3):
        gate.let_one_batch_through()
    gate.wait_for_a_batch()
    at_kill = abandoned(sql)
    doomed.kill_tree()
    doomed.wait(timeout=10)
    time.sleep(0.3)  # the worker's children die with it (one signal to the whole group)
    gate.open()

    # Then only whole batches are committed: the one in flight rolled back with the process
    wait_until(lambda: not gate.waiting(), timeout=10, what="the dead batch to end")
    time.sleep(0.5)
    assert at_kill == 150, at_kill
    assert abandoned(sql) == audited(sql, "cart.abandon") == at_kill

    # When the CLI is run again (it follows the live sweep job) and a worker comes back
    again = subprocess.Popen(
        [CLI, "--timeout", "90"],
        env=process_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    # (its first line: it has found the live job, before the worker that ends it is up)
    following = again.stdout.readline()
    processes.start("survivor", "gatehouse-worker", "--processes", "1", "--threads", "2", env=env)
    out, err = again.communicate(timeout=120)
    out = following + out

    # Then the job is recovered and ends the sweep: every stale cart abandoned exactly once, no fresh one touched
    assert again.returncode == 0, out + err
    assert "already running" in out and f"abandoned {1_234 - at_kill} cart(s)" in out, out
    assert abandoned(sql) == 1_234
    assert (
        sql("SELECT count(*) FROM carts WHERE status = 'abandoned' AND id = ANY(:ids)", ids=stale)[0][0]
        == 1_234
    )
    assert audited(sql, "cart.abandon") == 1_234 and audited_twice(sql, "cart.abandon") == []
    assert (
        sql("SELECT id, status, updated_at FROM carts WHERE id = ANY(:ids) ORDER BY id", ids=fresh)
        == fresh_before
    )
    [job] = sql("SELECT state, attempt, result FROM jobs WHERE type = 'carts.abandonment-sweep'")
    assert (job.state, job.attempt, job.result["abandoned"]) == ("completed", 1, 1_234 - at_kill)

    # The events: one per committed batch (3 + 22), each stale cart in exactly one of them
    def events() -> dict[str, list[str]]:
        return {r.webhook_id: json.loads(r.body)["data"]["cartIds"] for r in receiver.received}

    try:
        wait_until(lambda: len(events()) == 25, timeout=60, what="the batches' webhooks")
    finally:
        receiver.stop()
    ids = [i for batch in events().values() for i in batch]
    assert sorted(ids) == sorted(str(i) for i in stale)

    # And a run with nothing left to do says so
    done = cli(process_env)
    assert done.returncode == 0 and "abandoned 0 cart(s)" in done.stdout, done.stdout + done.stderr


def test_with_carts_off_the_cli_exits_2_printing_module_disabled_and_nothing_changes(
    processes, process_env, gh, sql
):
    stale_carts(sql, 30)
    processes.start("worker", "gatehouse-worker", "--processes", "1", "--threads", "2", env=WORKER_ENV)

    for how in ({"installed": False}, {"installed": True, "enabled": False}):
        gh.module_handlers.set_module("carts", by="test", **how)
        for args in ((), ("--no-wait",)):
            refused = cli(process_env, *args)
            assert refused.returncode == 2, refused.stdout + refused.stderr
            assert "MODULE_DISABLED" in refused.stderr and "carts" in refused.stderr
            assert "queued" not in refused.stdout

    time.sleep(1)  # a worker had every chance to do something
    assert sql("SELECT status, count(*) FROM carts GROUP BY status") == [("open", 30)]
    assert sql("SELECT count(*) FROM jobs")[0][0] == 0
    assert sql("SELECT count(*) FROM audit_log")[0][0] == 0


def test_the_sweep_schedules_fired_through_the_api_flip_due_rows_once(processes, gh, sql):
    # Given two workers, an API, and price lists and RFQs that are due now or in a second
    for name in ("worker-a", "worker-b"):
        processes.start(name, "gatehouse-worker", "--processes", "1", "--threads", "2", env=WORKER_ENV)
    _, url = processes.api(env={"BACKEND_ROLE": "api"})
    now = sql("SELECT now()")[0][0]
    soon = now + timedelta(seconds=1)
    price_list = httpx.post(
        f"{url}/v1/admin/price-lists",
        json={
            "name": "Grudzień",
            "validFrom": soon.isoformat(),
            "validTo": (now + timedelta(days=31)).isoformat(),
        },
        headers=ADMIN,
    ).json()
    rfq = httpx.post(
        f"{url}/v1/admin/rfqs", json={"customerRef": "buyer-1", "expiresAt": soon.isoformat()}, headers=ADMIN
    ).json()
    assert (price_list["status"], rfq["status"]) == ("scheduled", "open")
    sql(
        "INSERT INTO price_lists (id, name, status, valid_from, valid_to) SELECT gen_random_uuid(), 'p' || g, "
        "CASE WHEN g % 2 = 0 THEN 'scheduled' ELSE 'active' END, now() - interval '2 days', "
        "now() - interval '1 day' FROM generate_series(1, 300) AS g"
    )
    sql(
        "INSERT INTO rfqs (id, customer_ref, status, expires_at) "
        "SELECT gen_random_uuid(), 'c' || g, 'quoted', now() - interval '1 minute' FROM generate_series(1, 300) AS g"
    )
    listed = {i["name"]: i for i in httpx.get(f"{url}/v1/admin/schedules", headers=ADMIN).json()["items"]}
    assert {n: listed[n]["perAccount"] for n in ("cart-abandonment", "price-list-status", "rfq-expiry")} == {
        "cart-abandonment": False,
        "price-list-status": False,
        "rfq-expiry": False,
    }

    # When, past their times, an admin fires both schedules three times at once
    time.sleep(max(0.0, (soon - sql("SELECT now()")[0][0]).total_seconds()) + 0.1)

    def fire(name: str) -> None:
        assert httpx.post(f"{url}/v1/admin/schedules/{name}/run", headers=ADMIN).status_code == 202

    firing = [threading.Thread(target=fire, args=(n,)) for n in ("price-list-status", "rfq-expiry") * 3]
    for t in firing:
        t.start()
    for t in firing:
        t.join()

    # Then each due row moves once, by the sweep jobs the ticks created
    def settled() -> bool:
        jobs = sql("SELECT state FROM jobs")
        return (
            jobs
            and all(j.state == "completed" for j in jobs)
            and not gh.dispatcher.queued_job_ids({"schedules", "price_lists.sweep", "rfq.sweep"})
            and httpx.get(f"{url}/v1/admin/price-lists/{price_list['priceListId']}", headers=ADMIN).json()[
                "status"
            ]
            == "active"
        )

    wait_until(settled, timeout=60, what="the sweeps")
    assert httpx.get(f"{url}/v1/admin/rfqs/{rfq['rfqId']}", headers=ADMIN).json()["status"] == "expired"
    assert Counter(r.status for r in sql("SELECT status FROM price_lists")) == {"expired": 300, "active": 1}
    assert Counter(r.status for r in sql("SELECT status FROM rfqs")) == {"expired": 301}
    assert audited(sql, "price_list.expire") == 300 and audited(sql, "price_list.activate") == 1
    assert audited(sql, "rfq.expire") == 301
    for action in ("price_list.expire", "price_list.activate", "rfq.expire"):
        assert audited_twice(sql, action) == []
    types = Counter(r.type for r in sql("SELECT type FROM jobs"))
    assert set(types) == {"price_lists.status-sweep", "rfq.expiry-sweep"}
    last = {
        i["name"]: i["lastRun"] for i in httpx.get(f"{url}/v1/admin/schedules", headers=ADMIN).json()["items"]
    }
    assert last["price-list-status"] and last["rfq-expiry"] and last["cart-abandonment"] is None


def threads_of(proc, log_dir: Path) -> dict[int, list[tuple[str, str]]]:
    """Per process of ``proc``'s tree: (class, name) of each live thread but its main one.

    A thread the shim did not see start (not a Python thread) shows as ("?", its comm).
    """
    seen: dict[int, tuple[str, str]] = {}
    for log in log_dir.iterdir():
        for line in log.read_text().splitlines():
            tid, kind, name = line.split("\t")
            seen[int(tid)] = (kind, name)
    found: dict[int, list[tuple[str, str]]] = {}
    for pid in proc.tree():
        found[pid] = []
        for task in Path(f"/proc/{pid}/task").iterdir():
            tid = int(task.name)
            if tid != pid:
                found[pid].append(seen.get(tid, ("?", (task / "comm").read_text().strip())))
    return found


def api_with_thread_log(processes, tmp_path: Path, name: str, role: str) -> tuple[object, str, Path]:
    log_dir = tmp_path / f"threads-{name}"
    log_dir.mkdir()
    env = {
        "BACKEND_ROLE": role,
        "API_WORKERS": "2",
        "API_THREADS": "4",
        "GATEHOUSE_THREAD_LOG": str(log_dir),
        "PYTHONPATH": f"{THREAD_LOG_SHIM}:{REPO}",
    }
    proc, url = processes.api(name, env=env)
    return proc, url, log_dir


def exercise(url: str) -> None:
    """Every kind of request an API serves here, many at once: every request thread and pool gets going."""
    now = datetime.now().astimezone()
    calls = [
        ("POST", "/v1/admin/carts", {"customerRef": "c", "items": [{"sku": "A-1", "quantity": 1}]}),
        ("POST", "/v1/admin/price-lists", {"name": "p", "validFrom": now.isoformat(), "validTo": (now + timedelta(days=1)).isoformat()}),
        ("POST", "/v1/admin/rfqs", {"customerRef": "c", "expiresAt": (now + timedelta(days=1)).isoformat()}),
        ("GET", f"/v1/jobs/{uuid.uuid4()}", None),  # the statements pool
        ("GET", "/v1/admin/schedules", None),
        ("POST", "/v1/admin/schedules/rfq-expiry/run", None),
    ]  # fmt: skip

    def call(method: str, path: str, body: dict | None) -> None:
        assert httpx.request(method, url + path, json=body, headers=ADMIN, timeout=10).status_code < 500

    threads = [threading.Thread(target=call, args=c) for c in calls * 4]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def test_the_api_process_runs_no_timer_or_scheduler_thread(processes, tmp_path):
    # What may run in an API process (BACKEND_ROLE=api), besides each process's main thread:
    # - gunicorn's gthread request threads (a ThreadPoolExecutor, up to API_THREADS per worker);
    # - the single-statement psycopg pool (gatehouse.db.Statements: job rows, key checks): its
    #   workers (they open connections) and its "scheduler", which is the pool's own
    #   housekeeping (growing, shrinking, checking its connections) and never runs application work.
    # Nothing else: no threading.Timer, no periodiq or sweep loop, no consumer, lease keeper or
    # module poller — the sweeps are jobs on the workers, their ticks come from gatehouse-scheduler.
    allowed = (
        lambda kind, name: kind == "threading.Thread" and name.startswith("ThreadPoolExecutor-"),
        lambda kind, name: kind == "threading.Thread" and name.startswith("gatehouse-statements-worker-"),
        lambda kind, name: kind == "threading.Thread" and name == "gatehouse-statements-scheduler",
    )
    api, url, log_dir = api_with_thread_log(processes, tmp_path, "api", "api")
    exercise(url)
    time.sleep(1)  # a timer started by a request would still be waiting

    found = threads_of(api, log_dir)
    assert len(found) == 3, found  # the gunicorn arbiter and its two workers
    unexpected = {
        pid: [t for t in threads if not any(ok(*t) for ok in allowed)] for pid, threads in found.items()
    }
    assert not any(unexpected.values()), unexpected
    # The kernel picks which worker accepts each connection: one may have served them all
    assert any(any(name.startswith("ThreadPoolExecutor-") for _, name in t) for t in found.values()), found
    assert not any(kind == "threading.Timer" for threads in found.values() for kind, _ in threads)

    # The same look at BACKEND_ROLE=all sees the consumer threads it hosts: the probe is not blind
    hosting, url, log_dir = api_with_thread_log(processes, tmp_path, "api-all", "all")
    exercise(url)
    hosted = {t for threads in threads_of(hosting, log_dir).values() for t in threads}
    assert {"dramatiq.worker.WorkerThread", "dramatiq.worker.ConsumerThread"} <= {k for k, _ in hosted}, (
        hosted
    )
    assert {"lease-keeper", "queue-pauses"} <= {name for _, name in hosted}, hosted
