"""Steady-state reads: the status poll and the console's pages on a retention-bounded jobs table of 100,000 accounts vs empty.

The table is what retention keeps at steady state (issue 25 §1), synthesized
with generate_series in a throwaway database, per account (READS_ACCOUNTS,
default 100,000):

- the latest finished job of each of the 6 per-account scheduled types (never pruned);
- the scheduled completed rows of the last hour (assumed kept 1 hour: a scheduled
  sync that ran fine keeps nothing for long): 11 more ads syncs, 1 more incremental;
- user jobs kept 7 days (JOB_RETENTION_COMPLETED), assumed 1 import a day: 7;
- failed jobs kept 30 days (JOB_RETENTION_FAILED), assumed 0.1 % of the 386
  scheduled jobs a day: 12;

37 rows per account, 3.7 million at 100,000 accounts. The baseline is the same
database before the fill: the jobs table holds only the rows the probes read
(those of PROBES accounts). Each probe is fetched through the API app in
process (routing, key or session check, the reads, templates: everything but the
socket), ROUNDS times (or for PROBE_S, at least 3) after a warm-up, at both sizes; printed: p50/p99 at each,
the ratio full/empty of p99, and how many sequential scans of ``jobs`` each
request made (``pg_stat_user_tables``), so a page that reads the whole table shows.
"""

from __future__ import annotations

import hashlib
import os
import statistics
import time
import uuid

import psycopg
from falcon import testing

from bench.support import BENCH_REDIS_DB, Result, bench_settings, console_cookie, percentile
from gatehouse.composition import bootstrap
from gatehouse.job_types import REGISTRY
from gatehouse.schedules import DEFAULTS
from gatehouse_api.app import create_app, settled

ACCOUNTS = int(os.environ.get("READS_ACCOUNTS", 100_000))
PROBES = 200  # accounts the probes read; the baseline holds only their rows
ROUNDS = int(os.environ.get("READS_ROUNDS", 40))
PROBE_S = 15  # or as many as fit in this, at least 3: a page that walks every account is slow at 100,000
ADMIN_TOKEN = "bench-reads-admin-0123456789abcdef"
STATS_SETTLE_S = 1.2  # a backend publishes its table stats once idle this long (PostgreSQL: 1 s)
SCHEDULED = [s.job_type for s in DEFAULTS if s.per_account]
USER = REGISTRY["import-user-feeds"]
# (type, state, age of the newest, spacing, how many per account): the retention-bounded rows of one account.
KEPT = [
    *[(t.name, "completed", "5 minutes", "1 hour", 1) for t in SCHEDULED],  # the latest of each type
    ("rnp:ads-sync-account", "completed", "10 minutes", "5 minutes", 11),  # the rest of the last hour
    ("digitization:sync-account", "completed", "35 minutes", "30 minutes", 1),
    (USER.name, "completed", "2 hours", "1 day", 7),
    ("rnp:ads-sync-account", "failed", "3 hours", "2 days 12 hours", 12),
]
ROWS_PER_ACCOUNT = sum(k[-1] for k in KEPT)

INSERT = """
INSERT INTO jobs (id, type, queue, tier, account_id, state, attempt, max_attempts, progress, payload, result,
                  error, claims, message_number, created_at, updated_at, started_at, finished_at)
SELECT gen_random_uuid(), %(type)s, %(queue)s, %(tier)s, md5('reads' || a)::uuid, %(state)s::text, 1, 5,
       jsonb_build_object('phase', %(state)s::text, 'resumeAt', NULL, 'reason', NULL), '{}'::jsonb,
       CASE WHEN %(state)s::text = 'completed' THEN '{"rows": 120}'::jsonb END,
       CASE WHEN %(state)s::text = 'failed' THEN '{"code": "wb-5xx", "message": "WB answered 502"}'::jsonb END,
       1, 1, t.at, t.at + interval '7 seconds', t.at, t.at + interval '7 seconds'
FROM generate_series(%(first)s, %(last)s - 1) a,
     LATERAL (SELECT now() - %(age)s::interval - k * %(spacing)s::interval - (a %% 300) * interval '1 second' AS at
              FROM generate_series(0, %(n)s - 1) k) t
"""


def fill(conn: psycopg.Connection, first: int, last: int) -> None:
    """The retention-bounded rows of accounts [first, last)."""
    for type_name, state, age, spacing, n in KEPT:
        job_type = REGISTRY[type_name]
        conn.execute(
            INSERT,
            {
                "type": type_name, "queue": job_type.queue, "tier": job_type.tier, "state": state,
                "first": first, "last": last, "age": age, "spacing": spacing, "n": n,
            },
        )  # fmt: skip


def seed_accounts(conn: psycopg.Connection) -> None:
    conn.execute(
        "INSERT INTO accounts (id, name, created_at) SELECT md5('reads' || a)::uuid, 'Кабинет ' || a,"
        " now() - a * interval '1 second' FROM generate_series(0, %s - 1) a",
        [ACCOUNTS],
    )
    conn.execute(
        "INSERT INTO api_keys (id, account_id, secret_sha256)"
        " SELECT lpad(to_hex(a), 16, '0'), md5('reads' || a)::uuid, encode(sha256(convert_to('s' || a, 'UTF8')), 'hex')"
        " FROM generate_series(0, %s - 1) a",
        [PROBES],
    )


def key(a: int) -> str:
    return f"ghk_{a:016x}_s{a}"


def account(a: int) -> str:
    return str(uuid.UUID(hashlib.md5(f"reads{a}".encode()).hexdigest()))


def probes(conn: psycopg.Connection) -> dict[str, tuple[str, dict[str, str]]]:
    """Each probe: its URL and headers (an account key, or the console's session cookie)."""
    latest = conn.execute(
        "SELECT id FROM jobs WHERE account_id = %s AND type = 'rnp:ads-sync-account' ORDER BY created_at DESC LIMIT 1",
        [account(7)],
    ).fetchone()[0]
    failed = conn.execute(
        "SELECT id FROM jobs WHERE account_id = %s AND state = 'failed' LIMIT 1", [account(7)]
    ).fetchone()[0]
    return {
        "status poll GET /v1/jobs/{id}": f"/v1/jobs/{latest}",
        "GET /v1/accounts/{id}/jobs": f"/v1/accounts/{account(7)}/jobs",
        "GET /v1/accounts/{id}/jobs?state=failed": f"/v1/accounts/{account(7)}/jobs?state=failed",
        "console overview": "/console",
        "console accounts": "/console/accounts",
        "console accounts?hot=true": "/console/accounts?hot=true",
        "console account": f"/console/accounts/{account(7)}",
        "console jobs": "/console/jobs",
        "console jobs?state=failed": "/console/jobs?state=failed",
        "console jobs?phase=waiting-account": "/console/jobs?phase=waiting-account",
        "console jobs?type=catalog-sync": "/console/jobs?type=catalog-sync",
        "console job": f"/console/jobs/{failed}",
        "console schedules": "/console/schedules",
    }


def seq_scans(conn: psycopg.Connection) -> int:
    return conn.execute("SELECT seq_scan FROM pg_stat_user_tables WHERE relname = 'jobs'").fetchone()[0]


def measure(client, conn, urls, cookie, *, count_scans: bool) -> dict[str, tuple[float, float, float, int]]:
    """Each probe's p50, p99 (ms) over ROUNDS requests and, with ``count_scans``, its sequential scans of
    jobs per request (the API's connections publish their table stats once idle: a wait each side)."""
    out = {}
    settle = STATS_SETTLE_S if count_scans else 0
    for name, url in urls.items():
        headers = {"Authorization": f"Bearer {key(7)}"} if url.startswith("/v1") else cookie
        first = client.simulate_get(url, headers=headers)
        if first.status_code != 200:
            raise SystemExit(f"{name}: {url} answered {first.status_code}: {first.text[:300]}")
        time.sleep(settle)
        scans = seq_scans(conn)
        times = []
        budget = time.perf_counter() + PROBE_S
        while len(times) < 3 or (len(times) < ROUNDS and time.perf_counter() < budget):
            t0 = time.perf_counter()
            client.simulate_get(url, headers=headers)
            times.append((time.perf_counter() - t0) * 1000)
        time.sleep(settle)
        scanned = (seq_scans(conn) - scans) / len(times)
        out[name] = (statistics.median(times), percentile(times, 99), scanned, len(times))
    return out


def main() -> list[Result]:
    redis_db = int(os.environ.get("GATEHOUSE_BENCH_REDIS_DB", BENCH_REDIS_DB))
    with bench_settings(redis_db=redis_db, admin_token=ADMIN_TOKEN) as settings:
        gh = bootstrap(settings)
        try:
            with psycopg.connect(settings.libpq_url, autocommit=True) as conn:
                seed_accounts(conn)
                fill(conn, 0, PROBES)
                conn.execute("VACUUM ANALYZE")
                client = testing.TestClient(settled(create_app(gh)))  # as get_app serves it
                cookie = console_cookie(client, ADMIN_TOKEN)
                urls = probes(conn)
                empty = measure(client, conn, urls, cookie, count_scans=False)
                started = time.perf_counter()
                fill(conn, PROBES, ACCOUNTS)
                conn.execute("VACUUM ANALYZE jobs")
                rows, size = conn.execute(
                    "SELECT count(*), pg_total_relation_size('jobs') FROM jobs"
                ).fetchone()
                print(
                    f"{ACCOUNTS:,} accounts × {ROWS_PER_ACCOUNT} retained job rows = {rows:,} rows, "
                    f"{size / 2**30:.2f} GiB with indexes, filled in {time.perf_counter() - started:.0f} s; "
                    f"baseline: only the {PROBES} probe accounts' {PROBES * ROWS_PER_ACCOUNT:,} rows"
                )
                full = measure(client, conn, urls, cookie, count_scans=True)
        finally:
            gh.close()
    print(
        f"{'probe':40} {'empty p50':>9} {'p99':>7} {'full p50':>9} {'p99':>7} {'p99 full/empty':>15} "
        f"{'seq scans/req':>13} {'requests':>9}"
    )
    results = []
    for name in urls:
        (e50, e99, _, en), (f50, f99, scans, fn) = empty[name], full[name]
        print(
            f"{name:40} {e50:9.1f} {e99:7.1f} {f50:9.1f} {f99:7.1f} {f99 / e99:15.2f} {scans:13.2f} {en:>4}/{fn:<4}"
        )
        results += [
            Result("bench_fleet_reads", f"{name} p99 full/empty", f99 / e99, 1.5, higher_is_better=False),
            Result("bench_fleet_reads", f"{name} p99, full", f99, unit="ms", higher_is_better=False),
        ]
    print(
        "(ms; seq scans/req: sequential scans of jobs per request at the full size, from pg_stat_user_tables;"
        " requests: how many were timed, empty/full)"
    )
    return results


if __name__ == "__main__":
    main()
