"""Console pages on real data: render time of each page with 100,000 job rows and 1,000 accounts (budget 200 ms).

The data is seeded in SQL (generate_series) in a throwaway database: 1,000
accounts, 100,000 jobs over every job type (mostly finished, one live job per
account for 300 of them, phases and errors spread; each finished job's run in
job_attempts), 100 accounts with a held gate and two waiters, 500 bulk
operations, 20 webhook endpoints and 20,000 deliveries with attempts (the dead
ones with their dead_reason). Each page is fetched through the API app in process
(routing, session check, domain reads, templates: everything but the socket),
signed in, ``ROUNDS`` times after a warm-up; the report gives its median and
p95 and the ratio of the 200 ms budget to the p95 (≥ 1 is within budget).
"""

from __future__ import annotations

import statistics
import time
import uuid
from datetime import UTC, datetime, timedelta
from urllib.parse import urlencode

import psycopg
from falcon import testing

from bench.support import Result, bench_settings, console_cookie
from gatehouse.composition import bootstrap
from gatehouse.gate import owner
from gatehouse.job_types import REGISTRY
from gatehouse_api.app import create_app, settled

ACCOUNTS = 1_000
JOBS = 100_000
GATED = 100
BUDGET_MS = 200
ROUNDS = 15
ADMIN_TOKEN = "bench-admin-token-0123456789abcdef"

SEED = """
INSERT INTO accounts (id, name) SELECT gen_random_uuid(), 'Кабинет ' || i FROM generate_series(1, %(accounts)s) i;

WITH a AS (SELECT id, row_number() OVER (ORDER BY id) AS n FROM accounts),
     t AS (SELECT * FROM unnest(%(types)s::text[], %(queues)s::text[], %(tiers)s::text[], %(scoped)s::bool[])
           WITH ORDINALITY AS t(type, queue, tier, scoped, k))
INSERT INTO jobs (id, type, queue, tier, account_id, state, attempt, max_attempts, progress, payload, error,
                  claims, message_number, created_at, updated_at, started_at, finished_at)
SELECT gen_random_uuid(), t.type, t.queue, t.tier, CASE WHEN t.scoped THEN a.id END,
       CASE WHEN i %% 10 = 0 THEN 'failed' ELSE 'completed' END, 1 + i %% 3, 5,
       jsonb_build_object('phase', CASE WHEN i %% 10 = 0 THEN 'failed' ELSE 'completed' END,
                          'resumeAt', NULL, 'reason', CASE WHEN i %% 10 = 0 THEN 'wb-429' END),
       '{}'::jsonb, CASE WHEN i %% 10 = 0 THEN '{"code": "wb-429", "message": "429"}'::jsonb END,
       1, 1, now() - i * interval '20 seconds', now() - i * interval '20 seconds',
       now() - i * interval '20 seconds', now() - i * interval '20 seconds' + interval '7 seconds'
FROM generate_series(1, %(jobs)s) i
JOIN a ON a.n = 1 + i %% %(accounts)s
JOIN t ON t.k = 1 + i %% %(ntypes)s;

-- One live job per account for 300 of them: waiting for the account, resuming in a minute.
INSERT INTO jobs (id, type, queue, tier, account_id, state, attempt, max_attempts, progress, payload, resume_at)
SELECT gen_random_uuid(), 'import-user-report', 'wb-user', 'user', id, 'delayed', 1, 5,
       jsonb_build_object('phase', 'waiting-account', 'reason', NULL,
                          'resumeAt', to_char(now() + interval '1 minute', 'YYYY-MM-DD"T"HH24:MI:SS.MS"+00:00"')),
       '{}'::jsonb, now() + interval '1 minute'
FROM accounts ORDER BY id LIMIT 300;

-- Each finished job's run (job_attempts): the job page reads them.
INSERT INTO job_attempts (job_id, attempt, worker, started_at, finished_at, outcome, error_code, error_message)
SELECT id, attempt, 'bench:1:0', started_at, finished_at, state, error->>'code', error->>'message'
FROM jobs WHERE finished_at IS NOT NULL;

INSERT INTO catalog_bulk_operations (id, type, status, request, product_ids, total, processed, succeeded,
                                     failed, failed_items, created_at)
SELECT gen_random_uuid(), 'product_bulk_update', CASE WHEN i %% 5 = 0 THEN 'running' ELSE 'completed' END,
       '{}'::jsonb, '{}'::uuid[], 20000, 20000 - (i %% 5) * 1000, 19990, 10,
       (SELECT jsonb_agg(jsonb_build_object('productId', gen_random_uuid(), 'reason', 'unknown product'))
        FROM generate_series(1, 10)), now() - i * interval '1 minute'
FROM generate_series(1, 500) i;

INSERT INTO webhook_endpoints (id, url, description, secret)
SELECT gen_random_uuid(), 'http://127.0.0.1:9/hook/' || i, 'endpoint ' || i, 'x' FROM generate_series(1, 20) i;

WITH e AS (SELECT id, row_number() OVER (ORDER BY id) AS n FROM webhook_endpoints)
INSERT INTO webhook_deliveries (id, endpoint_id, message_id, event_type, payload, status, attempts, created_at)
SELECT gen_random_uuid(), e.id, 'msg_' || i, 'catalog.product.updated', '{"data": {}}'::jsonb,
       CASE WHEN i %% 7 = 0 THEN 'dead' ELSE 'delivered' END, 1 + i %% 8, now() - i * interval '10 seconds'
FROM generate_series(1, 20000) i JOIN e ON e.n = 1 + i %% 20;

UPDATE webhook_deliveries SET dead_reason = jsonb_build_object('reason', 'exhausted', 'attempt', attempts,
  'statusCode', 500, 'error', NULL, 'at', now()) WHERE status = 'dead';

INSERT INTO webhook_attempts (delivery_id, attempt, status_code, duration_ms)
SELECT id, 1, CASE WHEN status = 'dead' THEN 500 ELSE 200 END, 12 FROM webhook_deliveries;
ANALYZE;
"""


def seed(settings, gh) -> None:
    types = list(REGISTRY.values())
    with psycopg.connect(settings.libpq_url, autocommit=True) as conn:
        params = {
            "accounts": ACCOUNTS,
            "jobs": JOBS,
            "types": [t.name for t in types],
            "queues": [t.queue for t in types],
            "tiers": [t.tier for t in types],
            "scoped": [t.gate is not None for t in types],
            "ntypes": len(types),
        }
        for statement in SEED.split(";\n\n"):
            conn.execute(statement, params)
        held = conn.execute(
            "SELECT account_id, id FROM jobs WHERE state = 'delayed' ORDER BY account_id LIMIT %s", [GATED]
        ).fetchall()
    for account_id, job_id in held:
        for n, (job, tier) in enumerate(
            ((uuid.uuid4(), "user"), (job_id, "user"), (uuid.uuid4(), "scheduled"))
        ):
            gh.gate.acquire(
                str(account_id),
                owner("wb-user", job),
                tier=tier,
                lease_ms=600_000,
                wanted_ttl_ms=600_000,
                waiting_ttl_ms=600_000,
                first_wait_ms=int(time.time() * 1000) - n,
            )


def pages(settings) -> dict[str, str]:
    """One URL of each console page, the id-bearing ones on seeded rows."""
    with psycopg.connect(settings.libpq_url) as conn:

        def one(sql: str) -> str:
            return str(conn.execute(sql).fetchone()[0])

        account = one("SELECT account_id FROM jobs WHERE state = 'delayed' ORDER BY account_id LIMIT 1")
        job = one("SELECT id FROM jobs WHERE state = 'failed' LIMIT 1")
        waiting = one(f"SELECT id FROM jobs WHERE state = 'delayed' AND account_id = '{account}'")
        name = one(f"SELECT name FROM accounts WHERE id = '{account}'")
        operation = one("SELECT id FROM catalog_bulk_operations WHERE status = 'running' LIMIT 1")
        delivery = one("SELECT id FROM webhook_deliveries WHERE status = 'dead' LIMIT 1")
    return {
        "overview": "/console",
        "accounts": "/console/accounts",
        "accounts?hot=true": "/console/accounts?hot=true",
        "account": f"/console/accounts/{account}",
        "jobs": "/console/jobs",
        "jobs?state=failed": "/console/jobs?state=failed",
        "jobs?phase=waiting-account": "/console/jobs?phase=waiting-account",
        "jobs?accountId=<name>": "/console/jobs?" + urlencode({"accountId": name}),
        "jobs?accountId=<unknown>": "/console/jobs?accountId=nobody",
        "jobs?state=failed&finishedAfter": "/console/jobs?state=failed&queue=wb-user&finishedAfter="
        + (datetime.now(UTC) - timedelta(hours=24)).strftime("%Y-%m-%dT%H:%M:%S"),
        "job": f"/console/jobs/{job}",
        "job (waiting on the gate)": f"/console/jobs/{waiting}",
        "throughput": "/console/throughput",
        "bulk-operations": "/console/bulk-operations",
        "bulk-operation": f"/console/bulk-operations/{operation}",
        "webhook endpoints": "/console/webhooks/endpoints",
        "webhook deliveries": "/console/webhooks/deliveries",
        "deliveries?status=dead": "/console/webhooks/deliveries?status=dead",
        "webhook delivery": f"/console/webhooks/deliveries/{delivery}",
        "modules": "/console/modules",
        "schedules": "/console/schedules",
    }


def main() -> list[Result]:
    with bench_settings(admin_token=ADMIN_TOKEN) as settings:
        gh = bootstrap(settings)
        try:
            started = time.perf_counter()
            seed(settings, gh)
            print(f"seeded {JOBS:,} jobs, {ACCOUNTS:,} accounts in {time.perf_counter() - started:.1f} s")
            client = testing.TestClient(settled(create_app(gh)))  # as get_app serves it
            cookie = console_cookie(client, ADMIN_TOKEN)
            print(f"{'page':34} {'median ms':>10} {'p95 ms':>8} {'budget/p95':>11}")
            worst, missing = 0.0, []
            for name, url in pages(settings).items():
                first = client.simulate_get(url, headers=cookie)
                if first.status_code != 200:
                    print(f"{name:34} answered {first.status_code}")
                    missing.append(name)
                    continue
                times = []
                for _ in range(ROUNDS):
                    t0 = time.perf_counter()
                    client.simulate_get(url, headers=cookie)
                    times.append((time.perf_counter() - t0) * 1000)
                p95 = sorted(times)[int(0.95 * (len(times) - 1))]
                worst = max(worst, p95)
                print(f"{name:34} {statistics.median(times):10.1f} {p95:8.1f} {BUDGET_MS / p95:11.2f}")
            print(
                f"slowest page p95 {worst:.1f} ms: ratio {BUDGET_MS / worst:.2f} of the {BUDGET_MS} ms budget"
            )
            if missing:
                raise SystemExit(f"pages that did not answer 200: {', '.join(missing)}")
        finally:
            gh.close()
    return [Result("bench_console", f"{BUDGET_MS} ms budget / slowest page p95", BUDGET_MS / worst, 1.0)]


if __name__ == "__main__":
    main()
