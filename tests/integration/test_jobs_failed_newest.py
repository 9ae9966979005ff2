"""The jobs list filtered by state=failed reads jobs_failed_newest, not every newer completed row.

Retention keeps failed rows longest, so at steady state they are old and the newest rows are
completed ones (bench/bench_fleet_reads.py: 3.9 s for the console's failed jobs at 100,000 accounts
before this index, reading jobs_newest backwards past 570,000 completed rows at 30,000).
"""

from __future__ import annotations

import psycopg

from tests.support.job_lists import listed

SEED = """
INSERT INTO accounts (id, name) VALUES ('00000000-0000-0000-0000-00000000000a', 'a');
INSERT INTO jobs (id, type, queue, tier, account_id, state, max_attempts, created_at, finished_at)
SELECT gen_random_uuid(), 'rnp:ads-sync-account', 'wb-scheduled', 'scheduled',
       '00000000-0000-0000-0000-00000000000a', 'failed', 3,
       now() - interval '1 day' - i * interval '1 minute', now() - interval '1 day'
FROM generate_series(1, 5000) i;
INSERT INTO jobs (id, type, queue, tier, account_id, state, max_attempts, created_at, finished_at)
SELECT gen_random_uuid(), 'rnp:ads-sync-account', 'wb-scheduled', 'scheduled', NULL, 'completed', 3,
       now() - i * interval '1 second', now()
FROM generate_series(1, 30000) i;
ANALYZE jobs;
"""


def test_the_failed_jobs_page_reads_only_failed_rows_newest_first(gh, settings, monkeypatch):
    with psycopg.connect(settings.libpq_url, autocommit=True) as conn:
        for statement in SEED.split(";\n"):
            if statement.strip():
                conn.execute(statement)

        sql, params, rows = listed(gh, monkeypatch, state="failed", limit=50)
        plan = "\n".join(r[0] for r in conn.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql, params))
        after = (rows[-1].created_at, rows[-1].id)
        sql2, params2, second = listed(gh, monkeypatch, state="failed", limit=50, before=after)
        plan2 = "\n".join(r[0] for r in conn.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql2, params2))

    assert [r.state for r in rows] == ["failed"] * 50
    assert rows == sorted(rows, key=lambda r: (r.created_at, r.id), reverse=True)
    assert second[0].created_at <= rows[-1].created_at and {r.id for r in second}.isdisjoint(
        r.id for r in rows
    )
    assert "jobs_failed_newest" in plan, plan
    assert "Rows Removed by Filter" not in plan, plan  # no completed row read and thrown away
    assert "jobs_failed_newest" in plan2 and "Rows Removed by Filter" not in plan2, plan2  # the next page too
