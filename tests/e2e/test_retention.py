"""Retention end to end: gatehouse-prune as a real process (a dry run, two at once), and the
maintenance:prune job on a real worker, its result and metric, surviving a kill -9 mid-run."""

from __future__ import annotations

import re
import subprocess

import httpx
from sqlalchemy import text

from gatehouse import job_types as jt
from gatehouse.retention import TABLES
from tests.conftest import ADMIN_TOKEN
from tests.support.processes import BIN, REPO, free_port, wait_until
from tests.support.retention import assert_pruned_exactly, remaining, seed_every_table

CLI = str(BIN / "gatehouse-prune")
WORKER_ENV = {"WORKER_DEAD_AFTER_MS": "2000", "WORKER_HEARTBEAT_MS": "500"}
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


def prune(process_env, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [CLI, *args], env={**process_env, **env}, capture_output=True, text=True, timeout=300, cwd=REPO
    )  # fmt: skip


def per_table(stdout: str) -> dict[str, int]:
    return {t: int(n) for t, n in re.findall(r"^(\w+): (?:would delete|deleted) (\d+) row", stdout, re.M)}


def test_a_dry_run_prints_per_table_and_deletes_nothing_then_a_run_prunes(process_env, gh, sql):
    # Given rows of every pruned table, some past their retention, some not, live jobs and each
    # (account, type)'s latest finished job among them
    seeded = seed_every_table(sql)
    before = remaining(sql)

    # When gatehouse-prune --dry-run runs
    dry = prune(process_env, "--dry-run")

    # Then it prints per table what it would delete, and deletes nothing
    assert dry.returncode == 0, dry.stderr
    assert per_table(dry.stdout) == seeded.expected()
    assert "jobs: would delete 7 row(s)" in dry.stdout
    assert remaining(sql) == before

    # When it runs for real, it deletes exactly that and keeps the rest
    done = prune(process_env)
    assert done.returncode == 0, done.stderr
    assert per_table(done.stdout) == seeded.expected()
    assert_pruned_exactly(sql, seeded)
    # And a second run finds nothing left
    assert per_table(prune(process_env).stdout) == dict.fromkeys(TABLES, 0)


def test_two_prune_processes_at_once_delete_each_row_once(process_env, gh, sql):
    # Given 20,000 completed ads runs of 50 accounts from 2 hours ago (their retention: 1 h) and
    # 10,000 audit rows of last year
    sql("INSERT INTO accounts (id, name) SELECT gen_random_uuid(), 'a' || g FROM generate_series(1, 50) g")
    sql(
        "INSERT INTO jobs (id, type, queue, tier, account_id, state, created_at, finished_at) "
        "SELECT gen_random_uuid(), :type, :queue, 'scheduled', a.id, 'completed', "
        "now() - interval '3 hours' + g * interval '1 second', "
        "now() - interval '3 hours' + g * interval '1 second' + interval '400 milliseconds' FROM accounts a, generate_series(1, 400) g",
        type=jt.RNP_ADS.name, queue=jt.RNP_ADS.queue,
    )  # fmt: skip
    sql(
        "INSERT INTO audit_log (actor, action, entity, entity_id, created_at) "
        "SELECT 'admin', 'x', 'y', g::text, now() - interval '400 days' FROM generate_series(1, 10000) g"
    )

    # When two gatehouse-prune processes run at once, in batches of 200
    env = {**process_env, "PRUNE_BATCH_SIZE": "200"}
    runs = [
        subprocess.Popen([CLI], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
        for _ in range(2)
    ]
    outputs = [run.communicate(timeout=300) for run in runs]
    assert [run.returncode for run in runs] == [0, 0], outputs

    # Then between them each row was deleted once: every account keeps its latest run
    counts = [per_table(out) for out, _ in outputs]
    print(counts)
    assert sum(c["jobs"] for c in counts) == 20_000 - 50
    assert sum(c["audit_log"] for c in counts) == 10_000
    assert sql("SELECT count(*), count(DISTINCT account_id) FROM jobs")[0] == (50, 50)
    assert sql("SELECT count(*) FROM audit_log")[0][0] == 0


def metric(url: str, table: str) -> float:
    found = re.search(rf'^gatehouse_pruned_rows_total{{table="{table}"}} (\S+)$', httpx.get(url).text, re.M)
    return float(found[1]) if found else 0.0


def test_the_prune_job_runs_on_a_worker_and_a_run_killed_mid_way_is_continued(processes, gh, sql):
    # Given rows past their retention in every table (no live job, which the worker would run), and
    # a worker serving its metrics
    seeded = seed_every_table(sql, live=False)
    expected = seeded.expected()
    port = free_port()
    env = {**WORKER_ENV, "WORKER_HEALTH_PORT": str(port)}
    doomed = processes.start("doomed", "gatehouse-worker", "--processes", "1", "--threads", "2", env=env)

    # And the audit log locked by someone else, so the job stops there (after the jobs, deliveries
    # and notifications, which come first and commit batch by batch)
    holder = gh.engine.connect()
    holder.execute(text("LOCK TABLE audit_log IN EXCLUSIVE MODE"))
    try:
        # When the hourly job is queued (as its tick does) and its worker dies at the audit log
        job, created = gh.job_handlers.submit(jt.MAINTENANCE_PRUNE, account_id=None)
        assert created
        wait_until(
            lambda: sql(
                "SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = 'audit_log'::regclass"
            )[0][0] == 1,
            timeout=60, what="the prune job to wait at the audit log",
        )  # fmt: skip
        left = remaining(sql)
        assert left["jobs"] - {job.id} == seeded.kept["jobs"]  # jobs were done and committed
        assert left["audit_log"] == before_audit(seeded)
        metrics_url = f"http://127.0.0.1:{port}/metrics"
        assert metric(metrics_url, "jobs") == expected["jobs"]
        doomed.kill_tree()
    finally:
        holder.rollback()
        holder.close()
    # (the dead worker's connection gives up its waiting DELETE as soon as it runs)
    wait_until(
        lambda: sql("SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%DELETE FROM audit_log%' "
                    "AND pid <> pg_backend_pid()")[0][0] == 0,
        timeout=30, what="the dead worker's statement to end",
    )  # fmt: skip

    # Then a worker started afterwards takes the job over and finishes it: the audit rows go too
    port2 = free_port()
    processes.start(
        "survivor", "gatehouse-worker", "--processes", "1", "--threads", "2",
        env={**WORKER_ENV, "WORKER_HEALTH_PORT": str(port2)},
    )  # fmt: skip
    row = wait_until(
        lambda: (r := gh.jobs.get(job.id)).state in ("completed", "failed") and r, timeout=60,
        what="the prune job to end",
    )  # fmt: skip
    assert row.state == "completed", row.error
    assert row.claims == 2
    # Its result counts what this run deleted: what the dead one had not
    assert row.result["deleted"] == {**dict.fromkeys(TABLES, 0), "audit_log": expected["audit_log"]}
    assert metric(f"http://127.0.0.1:{port2}/metrics", "audit_log") == expected["audit_log"]
    left = remaining(sql)
    left["jobs"].discard(job.id)
    assert left == {t: seeded.kept.get(t, set()) for t in TABLES}


def test_the_prune_tick_fired_through_the_api_prunes_on_a_worker(processes, gh, sql):
    # Given rows past their retention in every table, a worker and an API
    seeded = seed_every_table(sql, live=False)
    processes.start("worker", "gatehouse-worker", "--processes", "1", "--threads", "2", env=WORKER_ENV)
    _, url = processes.api(env={"BACKEND_ROLE": "api"})
    listed = httpx.get(f"{url}/v1/admin/schedules", headers=ADMIN).json()["items"]
    assert {
        "name": "prune",
        "jobType": "maintenance:prune",
        "cron": "40 * * * *",
        "perAccount": False,
    }.items() <= next(i for i in listed if i["name"] == "prune").items()

    # When an admin runs the prune schedule now (its tick, as the scheduler sends it hourly)
    assert httpx.post(f"{url}/v1/admin/schedules/prune/run", headers=ADMIN).status_code == 202

    # Then the tick's maintenance:prune job runs on the worker and its result says what it deleted
    row = wait_until(
        lambda: (r := sql("SELECT id, state, result FROM jobs WHERE type = 'maintenance:prune'")) and r[0].state
        in ("completed", "failed") and r[0],
        timeout=60, what="the tick's prune job to end",
    )  # fmt: skip
    assert row.state == "completed"
    # (a batch for each kind of job, of delivery, and for notifications and audit rows: all are small)
    assert row.result == {"deleted": seeded.expected(), "batches": 9}
    left = remaining(sql)
    left["jobs"].discard(row.id)
    assert left == {t: seeded.kept.get(t, set()) for t in TABLES}


def before_audit(seeded) -> set:
    return seeded.kept["audit_log"] | seeded.pruned["audit_log"]
