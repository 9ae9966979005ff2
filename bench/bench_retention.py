"""Retention: deleting a month of rows in batches vs dropping a monthly partition, and the job prune rate.

On a throwaway database (bench.support.bench_settings), against the DATABASE_URL server:

- audit: RETENTION_ROWS (1,000,000) audit rows of about 420 bytes (the issue's size) that are past
  AUDIT_RETENTION, beside RETENTION_ROWS / 4 recent ones, deleted by Gatehouse's own prune
  (``RetentionHandlers.prune``: batches of PRUNE_BATCH_SIZE, each its own transaction), then the
  VACUUM that deleting leaves to do; against the same rows in a table partitioned by month, whose
  old month is one ``DROP TABLE`` of its partition. Printed: seconds, WAL bytes, the ratio, the
  longest batch (how long a batch holds its row locks), and the cost per deleted row;
- jobs: RETENTION_JOBS (200,000) completed ads runs of 1,000 accounts two hours old (their type
  keeps them 1 h), pruned the same way: rows per second with the latest-per-pair check.
"""

from __future__ import annotations

import os
import time

import psycopg

from bench.support import Result, bench_settings
from gatehouse import job_types as jt
from gatehouse.composition import bootstrap

ROWS = int(os.environ.get("RETENTION_ROWS", "1000000"))
JOBS = int(os.environ.get("RETENTION_JOBS", "200000"))
ACCOUNTS = 1_000
BATCH = 5_000
# About 420 bytes a row, like a bulk operation's price change.
AUDIT_ROWS = """
INSERT INTO {table} (actor, action, entity, entity_id, before, after, created_at)
SELECT 'user-' || (g %% 50), 'product.update', 'product', (g %% 200000)::text,
       jsonb_build_object('price', g %% 9973, 'name', repeat('n', 120), 'sku', 'SKU-' || g),
       jsonb_build_object('price', g %% 9967, 'name', repeat('m', 120), 'sku', 'SKU-' || g),
       {created}
FROM generate_series(1, %(n)s) AS g"""
OLD = "now() - interval '400 days' + (g %% 86400) * interval '1 second'"
RECENT = "now() - (g %% 86400) * interval '1 second'"
PARTITIONED = """
CREATE TABLE audit_part (LIKE audit_log INCLUDING DEFAULTS) PARTITION BY RANGE (created_at);
ALTER TABLE audit_part ADD PRIMARY KEY (id, created_at);
CREATE INDEX ON audit_part (entity, entity_id, id);
CREATE TABLE audit_part_old PARTITION OF audit_part
  FOR VALUES FROM (now() - interval '402 days') TO (now() - interval '370 days');
CREATE TABLE audit_part_now PARTITION OF audit_part
  FOR VALUES FROM (now() - interval '370 days') TO (now() + interval '30 days');"""


def wal(conn: psycopg.Connection) -> int:
    return conn.execute("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn").fetchone()[0]


def timed(conn: psycopg.Connection, step) -> tuple[float, int]:
    before, start = wal(conn), time.perf_counter()
    step()
    return time.perf_counter() - start, int(wal(conn) - before)


def main() -> list[Result]:
    with bench_settings(prune_batch_size=BATCH) as settings:
        gh = bootstrap(settings)
        url = settings.libpq_url
        with psycopg.connect(url, autocommit=True) as conn:
            print(
                f"audit: {ROWS:,} rows past retention beside {ROWS // 4:,} recent ones, batches of {BATCH:,}"
            )
            for created, n in ((OLD, ROWS), (RECENT, ROWS // 4)):
                conn.execute(AUDIT_ROWS.format(table="audit_log", created=created), {"n": n})
            conn.execute("VACUUM ANALYZE audit_log")
            size = conn.execute("SELECT pg_total_relation_size('audit_log')").fetchone()[0]
            batches: list[float] = []

            def between() -> None:
                now = time.perf_counter()
                batches.append(now - between.last)
                between.last = now

            def prune() -> None:
                between.last = time.perf_counter()
                run = gh.retention_handlers.prune(between_batches=between)
                assert run.deleted["audit_log"] == ROWS, run.deleted

            delete_s, delete_wal = timed(conn, prune)
            vacuum_s, vacuum_wal = timed(conn, lambda: conn.execute("VACUUM audit_log"))
            print(
                f"  delete in batches : {delete_s:7.2f} s, WAL {delete_wal / 1e6:7.1f} MB, "
                f"{len(batches)} batches, longest {max(batches) * 1000:.0f} ms "
                f"(table {size / 1e6:.0f} MB with its indexes)"
            )
            print(f"  then VACUUM       : {vacuum_s:7.2f} s, WAL {vacuum_wal / 1e6:7.1f} MB")

            conn.execute(PARTITIONED)
            for created, n in ((OLD, ROWS), (RECENT, ROWS // 4)):
                conn.execute(AUDIT_ROWS.format(table="audit_part", created=created), {"n": n})
            conn.execute("VACUUM ANALYZE audit_part")
            drop_s, drop_wal = timed(conn, lambda: conn.execute("DROP TABLE audit_part_old"))
            print(f"  drop the partition: {drop_s:7.3f} s, WAL {drop_wal / 1e6:7.3f} MB")
            total = delete_s + vacuum_s
            per_row_us = total / ROWS * 1e6
            ratio = total / drop_s
            print(f"  ratio (delete + vacuum) / drop: {ratio:,.0f}; {per_row_us:.1f} µs per deleted row")

            print(f"jobs: {JOBS:,} completed ads runs of {ACCOUNTS:,} accounts, 2 h old (kept 1 h)")
            conn.execute(
                "INSERT INTO accounts (id, name) SELECT gen_random_uuid(), 'a' || g "
                "FROM generate_series(1, %(n)s) g",
                {"n": ACCOUNTS},
            )
            conn.execute(
                "INSERT INTO jobs (id, type, queue, tier, account_id, state, payload, result, progress, "
                "created_at, started_at, finished_at) "
                "SELECT gen_random_uuid(), %(type)s, %(queue)s, 'scheduled', a.id, 'completed', '{}', "
                """'{"campaigns": 12, "stats": 340}', '{"phase": "completed"}', """
                "now() - interval '3 hours' + g * interval '1 second', "
                "now() - interval '3 hours' + g * interval '1 second', "
                "now() - interval '3 hours' + g * interval '1 second' + interval '400 milliseconds' "
                "FROM accounts a, generate_series(1, %(per)s) g",
                {"type": jt.RNP_ADS.name, "queue": jt.RNP_ADS.queue, "per": JOBS // ACCOUNTS},
            )
            conn.execute("VACUUM ANALYZE jobs")
            start = time.perf_counter()
            run = gh.retention_handlers.prune()
            jobs_s = time.perf_counter() - start
            assert run.deleted["jobs"] == JOBS - ACCOUNTS, run.deleted
            jobs_vacuum_s, _ = timed(conn, lambda: conn.execute("VACUUM jobs"))
            rate = run.deleted["jobs"] / jobs_s
            print(
                f"  pruned {run.deleted['jobs']:,} in {jobs_s:.2f} s ({rate:,.0f} rows/s, "
                f"{run.batches} batches), then VACUUM {jobs_vacuum_s:.2f} s; "
                f"{(jobs_s + jobs_vacuum_s) / run.deleted['jobs'] * 1e6:.1f} µs per row in all"
            )
        gh.close()
    name = "bench_retention"
    return [
        Result(name, "audit delete+vacuum / partition drop", ratio, higher_is_better=False),
        Result(name, "audit delete+vacuum per row", per_row_us, unit="µs", higher_is_better=False),
        Result(name, "longest prune batch", max(batches) * 1000, unit="ms", higher_is_better=False),
        Result(name, "jobs pruned", rate, unit="rows/s"),
    ]


if __name__ == "__main__":
    main()
