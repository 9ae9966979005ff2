"""Data freshness at 10,000 accounts: an account's read (GET …/freshness) and the gauges' query vs their floors.

10,000 active accounts (and 1,000 switched off) are seeded in SQL with every
dataset synced at ages spread over a day (a tenth of the accounts never synced
cards), 76,000 rows of ``account_datasets``. Measured ``ROUNDS`` times after a
warm-up:

- the read: ``GET /v1/accounts/{id}/freshness`` through the API app in process
  (routing, the admin token, the account's check, the store's one statement,
  JSON), on a different account each time. Its floor: the API's cheapest read
  of an account, ``GET /v1/accounts/{id}`` (routing, the token, one prepared
  statement, JSON) on the same accounts; the bare statement in raw psycopg is
  printed beside it.
- the gauges: ``FreshnessStore.ages`` (one statement: per dataset the oldest
  sync and the stale count of active accounts against the dataset's SLO), what
  a scrape reads at most once per 10 s per API worker. Its floor: the bare
  ``SELECT dataset, min(last_synced_at) … GROUP BY dataset`` (no accounts, no SLO).

The figures are floor/ours (1 = no cost over the floor) and each p95 in ms.
"""

from __future__ import annotations

import os
import statistics
import uuid

import psycopg
from falcon import testing

from bench.support import Result, bench_settings, latencies_ms, percentile
from gatehouse.composition import bootstrap
from gatehouse.freshness import DATASETS
from gatehouse_api.app import create_app, settled

ACCOUNTS = 10_000
ROUNDS = 50
ADMIN_TOKEN = "bench-fresh-admin-0123456789abcdef"
REDIS_DB = int(os.environ.get("BENCH_REDIS_DB", "14"))  # nothing queued: any database that is free

SEED = [
    "INSERT INTO accounts (id, name, active) SELECT gen_random_uuid(), 'Кабинет ' || i, i <= %(accounts)s "
    "FROM generate_series(1, %(accounts)s + %(accounts)s / 10) AS i",
    "INSERT INTO account_datasets (account_id, dataset, last_synced_at, last_job_id) "
    "SELECT a.id, d, now() - (abs(hashtext(a.id::text || d)) %% 86400) * interval '1 second', gen_random_uuid() "
    "FROM accounts AS a CROSS JOIN unnest(%(datasets)s::text[]) AS d "
    "WHERE d <> 'cards' OR abs(hashtext(a.id::text)) %% 10 <> 0",
    "VACUUM ANALYZE accounts, account_datasets",
]
FLOOR_READ = "SELECT dataset, last_synced_at, last_job_id FROM account_datasets WHERE account_id = %s"
FLOOR_AGES = "SELECT dataset, min(last_synced_at) FROM account_datasets GROUP BY dataset"


def main() -> list[Result]:
    with bench_settings(redis_db=REDIS_DB, admin_token=ADMIN_TOKEN) as settings:
        with psycopg.connect(settings.libpq_url, autocommit=True) as conn:
            for statement in SEED:
                conn.execute(statement, {"accounts": ACCOUNTS, "datasets": list(DATASETS)})
            rows = conn.execute("SELECT count(*) FROM account_datasets").fetchone()[0]
            accounts = [r[0] for r in conn.execute("SELECT id FROM accounts WHERE active ORDER BY random()")]
            bare_read = latencies_ms(lambda a: conn.execute(FLOOR_READ, (a,)).fetchall(), accounts[:ROUNDS])
            floor_ages = latencies_ms(lambda _: conn.execute(FLOOR_AGES).fetchall(), accounts[:ROUNDS])
        gh = bootstrap(settings)
        try:
            client = testing.TestClient(settled(create_app(gh)))  # as get_app serves it
            headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}

            def read(account: uuid.UUID) -> None:
                answer = client.simulate_get(f"/v1/accounts/{account}/freshness", headers=headers)
                assert answer.status_code == 200 and len(answer.json["datasets"]) == len(DATASETS), (
                    answer.text
                )

            def account_read(account: uuid.UUID) -> None:
                assert client.simulate_get(f"/v1/accounts/{account}", headers=headers).status_code == 200

            floor_api = latencies_ms(account_read, accounts[:ROUNDS])
            reads = latencies_ms(read, accounts[:ROUNDS])
            ages = gh.freshness.ages()
            stale = {a.dataset: a.stale_accounts for a in ages}
            assert all(a.oldest_age_seconds and a.oldest_age_seconds > 80_000 for a in ages), ages
            assert stale["cards"] >= ACCOUNTS // 20, stale  # the never synced count as stale
            gauges = latencies_ms(lambda _: gh.freshness.ages(), accounts[:ROUNDS])
        finally:
            gh.close()
    print(f"{ACCOUNTS:,} active accounts, {rows:,} account_datasets rows; {ROUNDS} rounds after a warm-up")
    print(f"stale accounts per dataset: {stale}")
    print(f"the account's rows by primary key in raw psycopg: median {statistics.median(bare_read):.2f} ms")
    results = []
    for label, ours, floor in (
        ("account read (GET …/freshness)", reads, floor_api),
        ("gauges (FreshnessStore.ages)", gauges, floor_ages),
    ):
        ratio = statistics.median(floor) / statistics.median(ours)
        print(
            f"{label:32}: median {statistics.median(ours):6.2f} ms  p95 {percentile(ours, 95):6.2f} ms   "
            f"floor median {statistics.median(floor):6.2f} ms   floor/ours {ratio:.2f}"
        )
        results += [
            Result("bench_freshness", f"floor/ours ({label})", ratio),
            Result(
                "bench_freshness",
                f"p95 ms ({label})",
                percentile(ours, 95),
                unit="ms",
                higher_is_better=False,
            ),
        ]
    return results


if __name__ == "__main__":
    main()
