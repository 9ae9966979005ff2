"""The gauges read at scrape time (gatehouse.live_metrics): one statement over the live rows, cached."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from gatehouse.live_metrics import QUEUE_STATES, LiveMetrics
from gatehouse.operations import QUEUE_DEPTHS, queue_names


def add_job(
    sql, queue: str, state: str, *, created: str, resume: str | None = None, started: str | None = None
):
    sql(
        "INSERT INTO jobs (id, type, queue, tier, state, payload, created_at, resume_at, started_at) "
        "VALUES (:id, 'probe', :queue, 'user', :state, '{}', now() - CAST(:created AS interval), "
        "now() - CAST(:resume AS interval), now() - CAST(:started AS interval))",
        id=uuid.uuid4(), queue=queue, state=state, created=created, resume=resume, started=started,
    )  # fmt: skip


def scrape(live: LiveMetrics) -> dict[tuple[str, tuple[str, ...]], float]:
    return {(f.name, tuple(s.labels.values())): s.value for f in live.collect() for s in f.samples}


def test_queue_gauges_cover_every_queue_and_a_scrape_within_the_cache_reads_nothing(gh, sql):
    # Given live rows: wb-user waiting (due 2 min ago, one since creation, one since its eta),
    # delayed (one 30 s overdue, one not yet due), active for 10 s; and a completed row
    add_job(sql, "wb-user", "waiting", created="1 hour", resume="120 seconds")
    add_job(sql, "wb-user", "waiting", created="60 seconds")
    add_job(sql, "wb-user", "delayed", created="1 hour", resume="30 seconds")
    add_job(sql, "wb-user", "delayed", created="1 hour", resume="-5 minutes")
    add_job(sql, "wb-user", "active", created="1 hour", started="10 seconds")
    add_job(sql, "wb-user", "completed", created="1 day")
    gh.liveness.beat("w-1")
    gh.schedule_runs.record_next("rnp-ads", datetime(2026, 1, 1, 0, 5, tzinfo=UTC))
    live = LiveMetrics(
        gh.engine,
        gh.redis,
        gh.liveness,
        gh.schedule_runs,
        prefix=gh.settings.broker_namespace,
        schedules=["rnp-ads"],
    )

    # When Prometheus scrapes
    first = scrape(live)

    # Then each queue of the registry has its depth and oldest age in every live state
    for queue in queue_names():
        for state in QUEUE_STATES:
            assert ("gatehouse_queue_depth", (queue, state)) in first
    depth = {s: first["gatehouse_queue_depth", ("wb-user", s)] for s in QUEUE_STATES}
    assert depth == {"waiting": 2, "delayed": 2, "active": 1}
    age = {s: first["gatehouse_queue_oldest_age_seconds", ("wb-user", s)] for s in QUEUE_STATES}
    assert 120 <= age["waiting"] < 130 and 30 <= age["delayed"] < 40 and 10 <= age["active"] < 20
    assert first["gatehouse_queue_depth", ("wb-scheduled", "waiting")] == 0
    assert first["gatehouse_workers_live", ()] == 1
    next_run = datetime(2026, 1, 1, 0, 5, tzinfo=UTC).timestamp()
    assert first["gatehouse_schedule_next_run_timestamp_seconds", ("rnp-ads",)] == next_run
    assert ("gatehouse_schedule_last_run_timestamp_seconds", ("rnp-ads",)) not in first  # never ran

    # … and a second scrape within the cache's 5 s (another process, another replica) reads the cache
    add_job(sql, "wb-user", "waiting", created="1 second")
    assert scrape(LiveMetrics(gh.engine, gh.redis, gh.liveness, gh.schedule_runs,
                              prefix=gh.settings.broker_namespace, schedules=["rnp-ads"])) == first  # fmt: skip
    gh.redis.delete(f"{gh.settings.broker_namespace}:metrics:live")
    assert scrape(live)["gatehouse_queue_depth", ("wb-user", "waiting")] == 3


def test_the_queue_statement_reads_only_the_live_rows_through_a_partial_index(gh):
    # With sequential scans priced out it has an index path: a partial index on the live states
    # (the planner picks any of those whose predicate is the live states), never the completed rows.
    with gh.engine.connect() as conn:
        conn.exec_driver_sql("SET enable_seqscan = off")
        plan = "\n".join(r[0] for r in conn.exec_driver_sql("EXPLAIN " + QUEUE_DEPTHS))
    assert "Seq Scan" not in plan, plan
