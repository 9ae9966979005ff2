"""Retention against real PostgreSQL, in this process: what ``RetentionHandlers.prune`` deletes and
keeps in every table, in batches, with a dry run, concurrent runs and the metric (gatehouse.retention)."""

from __future__ import annotations

import threading
import uuid

import pytest

from gatehouse import job_types as jt
from gatehouse import metrics
from gatehouse.composition import bootstrap
from gatehouse.retention import TABLES, RetentionPolicy
from gatehouse.schedules import schedules
from tests.support.retention import SWEEP, Seeded, assert_pruned_exactly, job, remaining, seed_every_table


def counted() -> dict[str, float]:
    return {table: metrics.PRUNED.labels(table)._value.get() for table in TABLES}


@pytest.fixture
def built(settings, clean):
    made = []

    def build(**overrides):
        c = bootstrap(settings.model_copy(update=overrides))
        made.append(c)
        return c

    yield build
    for c in made:
        c.close()


@pytest.mark.parametrize("batch_size", [1, 2, 5_000])
def test_prune_deletes_what_outlived_its_retention_and_keeps_the_rest(built, sql, batch_size):
    seeded = seed_every_table(sql)
    before = counted()
    run = built(prune_batch_size=batch_size).retention_handlers.prune()
    assert run.deleted == seeded.expected() == {
        "jobs": 7, "webhook_deliveries": 2, "webhook_attempts": 5, "notifications": 1, "audit_log": 3,
    }  # fmt: skip
    assert_pruned_exactly(sql, seeded)
    after = counted()
    assert {t: after[t] - before[t] for t in TABLES} == seeded.expected()
    # Batches of one: one per deleted job row, delivery, notification and audit row.
    if batch_size == 1:
        assert run.batches == 7 + 2 + 1 + 3
    # A second run finds nothing
    assert built().retention_handlers.prune().deleted == dict.fromkeys(TABLES, 0)


def test_a_dry_run_counts_what_prune_deletes_and_deletes_nothing(built, sql):
    seeded = seed_every_table(sql)
    before = remaining(sql)
    c = built()
    assert c.retention_handlers.prunable().deleted == seeded.expected()
    assert remaining(sql) == before
    assert c.retention_handlers.prune().deleted == seeded.expected()


def test_zero_keeps_a_kind_for_ever_and_settings_move_the_cutoffs(built, sql):
    seeded = seed_every_table(sql)
    run = built(
        audit_retention=0, notification_retention=0, webhook_retention_dead=0, job_retention_completed=0
    ).retention_handlers.prune()
    # Only what has a retention of its own or one left on: scheduled completed runs (their type's
    # 1 h), failed user imports (their type's 90 d), delivered webhooks (7 d).
    assert run.deleted == {
        "jobs": 3, "webhook_deliveries": 1, "webhook_attempts": 2, "notifications": 0, "audit_log": 0,
    }  # fmt: skip
    assert len(remaining(sql)["audit_log"]) == len(seeded.kept["audit_log"]) + 3


def test_the_latest_finished_job_of_each_pair_is_kept_however_old(built, sql):
    s = Seeded()
    # Only very old finished runs, one pair per account, and an old system job alone
    accounts = [sql("INSERT INTO accounts (id, name) VALUES (gen_random_uuid(), 'a') RETURNING id")[0][0]]
    accounts.append(sql("INSERT INTO accounts (id, name) VALUES (gen_random_uuid(), 'b') RETURNING id")[0][0])
    for account in accounts:
        job(sql, s, jt.RNP_ADS, "completed", "300 days", account=account)
        job(sql, s, jt.IMPORT_USER_REPORT, "failed", "300 days", account=account)
        for days in (301, 302, 303):
            job(sql, s, jt.RNP_ADS, "completed", f"{days} days", account=account, pruned=True)
    job(sql, s, SWEEP, "failed", "300 days")
    assert built(prune_batch_size=2).retention_handlers.prune().deleted["jobs"] == 6
    assert_pruned_exactly(sql, s)


def test_two_runs_at_once_delete_each_row_once(built, sql):
    # 3,000 old completed ads runs of 30 accounts (one kept per account), and 2,000 old audit rows
    sql("INSERT INTO accounts (id, name) SELECT gen_random_uuid(), 'a' || g FROM generate_series(1, 30) g")
    sql(
        "INSERT INTO jobs (id, type, queue, tier, account_id, state, created_at, finished_at) "
        "SELECT gen_random_uuid(), :type, :queue, 'scheduled', a.id, 'completed', "
        "now() - interval '3 hours' + g * interval '1 second', "
        "now() - interval '3 hours' + g * interval '1 second' + interval '400 milliseconds' FROM accounts a, generate_series(1, 100) g",
        type=jt.RNP_ADS.name, queue=jt.RNP_ADS.queue,
    )  # fmt: skip
    sql(
        "INSERT INTO audit_log (actor, action, entity, entity_id, created_at) "
        "SELECT 'admin', 'x', 'y', g::text, now() - interval '400 days' FROM generate_series(1, 2000) g"
    )
    runners = [built(prune_batch_size=50) for _ in range(2)]
    runs: list = []
    barrier = threading.Barrier(2)

    def go(c):
        barrier.wait()
        runs.append(c.retention_handlers.prune())

    threads = [threading.Thread(target=go, args=(c,)) for c in runners]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert len(runs) == 2
    assert sum(r.deleted["jobs"] for r in runs) == 3_000 - 30
    assert sum(r.deleted["audit_log"] for r in runs) == 2_000
    assert sql("SELECT count(*) FROM jobs")[0][0] == 30
    assert sql("SELECT count(DISTINCT account_id) FROM jobs")[0][0] == 30


def test_a_type_no_longer_declared_falls_back_to_the_settings(built, sql):
    s = Seeded()
    gone = jt.JobType(f"gone-{uuid.uuid4().hex[:6]}", queue="gone")  # never registered
    job(sql, s, gone, "completed", "8 days", pruned=True)
    job(sql, s, gone, "completed", "1 day")
    assert built().retention_handlers.prune().deleted["jobs"] == 1
    assert_pruned_exactly(sql, s)


def test_each_job_types_retention_is_its_override_or_the_settings(settings):
    policy = RetentionPolicy.from_settings(settings)
    hour, day = 3_600_000, 86_400_000
    assert policy.job_age_ms(jt.RNP_ADS.name, "completed") == hour
    assert policy.job_age_ms(jt.SYNC_INCREMENTAL.name, "failed") == 7 * day
    assert policy.job_age_ms(jt.IMPORT_USER_FEEDS.name, "completed") == settings.job_retention_completed
    assert policy.job_age_ms(jt.IMPORT_USER_FEEDS.name, "failed") == 90 * day
    assert policy.job_age_ms(jt.MAINTENANCE_PRUNE.name, "completed") == settings.job_retention_completed
    with pytest.raises(ValueError, match="needs a unit"):
        jt.Retention(completed="7")


def test_the_prune_schedule_is_one_hourly_system_job_one_live_at_a_time(gh):
    schedule = schedules({})["prune"]
    assert (schedule.job_type, schedule.cron, schedule.per_account) == (
        jt.MAINTENANCE_PRUNE,
        "40 * * * *",
        False,
    )
    assert schedule.module is None  # the core's: never switched off
    # A tick (or a second scheduler's) while a run is live joins it instead of starting another
    first, created = gh.job_handlers.submit(jt.MAINTENANCE_PRUNE, account_id=None)
    again, created_again = gh.job_handlers.submit(jt.MAINTENANCE_PRUNE, account_id=None)
    assert (created, created_again, again.id) == (True, False, first.id)


def run_to_the_end(gh, job_type, account_id, state: str):
    """A job through the product's own path: submitted, claimed and started, finished ``state``."""
    job, created = gh.job_handlers.submit(job_type, account_id=account_id)
    assert created
    claim = gh.jobs.claim(job.id, job.message_number, 60_000, worker="test", start=True)
    with gh.uow.begin() as tx:
        assert gh.jobs.finish(tx, claim, state=state, progress={"phase": state})
    return job.id


def test_runs_written_by_the_product_and_aged_are_pruned_but_the_latest_and_its_status_stay(gh, sql):
    # Given an account's three user imports, run one after another, and a notification
    account = gh.account_handlers.create_account("seller", "token").id
    first, second, last = (run_to_the_end(gh, jt.IMPORT_USER_FEEDS, account, "completed") for _ in range(3))
    user = gh.account_handlers.create_user(f"{uuid.uuid4().hex}@example.test", "Staff").id
    with gh.uow.begin() as tx:
        gh.notifications.notify(tx, user_id=user, kind="k", title="t", body="b")
    # When they are aged past their retention (JOB_RETENTION_COMPLETED 7 d, NOTIFICATION_RETENTION 90 d)
    sql(
        "UPDATE jobs SET created_at = created_at - interval '8 days', finished_at = finished_at - interval '8 days' "
        "WHERE type = :type",
        type=jt.IMPORT_USER_FEEDS.name,
    )
    sql("UPDATE notifications SET created_at = now() - interval '91 days'")
    run = gh.retention_handlers.prune()

    # Then the older runs and the notification are gone; the latest run still answers its status poll
    assert (run.deleted["jobs"], run.deleted["notifications"]) == (2, 1)
    assert gh.jobs.get(first) is None and gh.jobs.get(second) is None
    assert gh.jobs.get(last).state == "completed"


def test_a_webhook_endpoints_previous_secret_is_cleared_once_its_grace_period_ended(built, sql):
    c = built(webhook_allowed_hosts=["127.0.0.0/8"])
    ended, current = (
        c.webhook_handlers.create_endpoint(
            "http://127.0.0.1:9/hook", event_types=None, description=""
        ).endpoint.id
        for _ in range(2)
    )
    for endpoint_id in (ended, current):
        c.webhook_handlers.rotate_secret(endpoint_id)
    sql(
        "UPDATE webhook_endpoints SET previous_secret_until = now() - interval '1 second' WHERE id = :id",
        id=ended,
    )

    c.retention_handlers.prune()

    rows = sql(
        "SELECT id, previous_secret, previous_secret_key_id, previous_secret_until FROM webhook_endpoints"
    )
    previous = {r[0]: r[1:] for r in rows}
    assert previous[ended] == (None, None, None)  # forgotten: it signs nothing any more
    assert all(previous[current])  # still in its grace period: kept
