"""Rows of every pruned table at chosen ages, written with SQL (test setup, not the product), and
what retention must do with each: the fixture of the retention tests, in-process and end to end."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from gatehouse import job_types as jt

ADS, FINANCE, FEEDS = jt.RNP_ADS, jt.RNP_FINANCE, jt.IMPORT_USER_FEEDS
SWEEP, BULK = jt.CART_ABANDONMENT_SWEEP, jt.CATALOG_BULK_OPERATION


@dataclass
class Seeded:
    kept: dict[str, set] = field(default_factory=dict)
    pruned: dict[str, set] = field(default_factory=dict)

    def add(self, table: str, key, *, pruned: bool) -> None:
        (self.pruned if pruned else self.kept).setdefault(table, set()).add(key)

    def expected(self) -> dict[str, int]:
        tables = ("jobs", "webhook_deliveries", "webhook_attempts", "notifications", "audit_log")
        return {t: len(self.pruned.get(t, ())) for t in tables}


def job(
    sql, seeded: Seeded, job_type: jt.JobType, state: str, age: str | None, *, account=None, pruned=False
):
    """A job row of ``job_type`` that ended ``state`` ``age`` ago (a live state: created then)."""
    job_id = uuid.uuid4()
    finished = "now() - CAST(:age AS interval)" if state in ("completed", "failed") else "NULL"
    sql(
        "INSERT INTO jobs (id, type, queue, tier, account_id, state, created_at, updated_at, finished_at) "
        f"VALUES (:id, :type, :queue, :tier, :account, :state, now() - CAST(:age AS interval) - interval '1 minute', "
        f"now() - CAST(:age AS interval), {finished})",
        id=job_id, type=job_type.name, queue=job_type.queue, tier=job_type.tier, account=account,
        state=state, age=age,
    )  # fmt: skip
    seeded.add("jobs", job_id, pruned=pruned)
    return job_id


def account(sql) -> uuid.UUID:
    return sql("INSERT INTO accounts (id, name) VALUES (gen_random_uuid(), 'seller') RETURNING id")[0][0]


def seed_every_table(sql, *, live: bool = True) -> Seeded:
    """``live=False`` leaves out the live jobs, which a running worker would otherwise run."""
    s = Seeded()
    a, b = account(sql), account(sql)
    # Scheduled syncs keep completed runs 1 h, failed 7 d; the latest finished of a pair always.
    job(sql, s, ADS, "completed", "10 minutes", account=a)
    job(sql, s, ADS, "completed", "3 hours", account=a, pruned=True)
    job(sql, s, ADS, "failed", "4 hours", account=a)  # failed: 7 d
    job(sql, s, ADS, "completed", "5 hours", account=a, pruned=True)
    job(sql, s, ADS, "completed", "5 hours", account=b)  # b's latest ads run
    if live:
        job(sql, s, ADS, "active", "40 days", account=b)  # live, whatever its age
    job(sql, s, FINANCE, "failed", "8 days", account=a)  # the pair's latest: kept past 7 d
    # User imports keep completed runs 7 d (the setting), failed ones 90 d (their type's).
    job(sql, s, FEEDS, "completed", "1 day", account=a)
    job(sql, s, FEEDS, "completed", "8 days", account=a, pruned=True)
    job(sql, s, FEEDS, "failed", "40 days", account=a)
    job(sql, s, FEEDS, "failed", "100 days", account=a, pruned=True)
    if live:
        job(sql, s, FEEDS, "waiting", "60 days", account=b)
    # System jobs (no account): one pair per type.
    job(sql, s, SWEEP, "completed", "1 hour")
    job(sql, s, SWEEP, "completed", "8 days", pruned=True)
    job(sql, s, SWEEP, "completed", "9 days", pruned=True)
    job(sql, s, BULK, "completed", "8 days")
    job(sql, s, BULK, "completed", "9 days", pruned=True)

    endpoint = uuid.uuid4()
    sql(
        "INSERT INTO webhook_endpoints (id, url, secret) VALUES (:id, 'http://127.0.0.1:9/hook', 'x')",
        id=endpoint,
    )
    for status, age, attempts, pruned in (
        ("delivered", "8 days", 2, True),
        ("delivered", "1 day", 1, False),
        ("dead", "31 days", 3, True),
        ("dead", "8 days", 8, False),
        ("failed", "40 days", 2, False),  # retrying: not finished
        ("pending", "40 days", 0, False),
    ):
        delivery = uuid.uuid4()
        sql(
            "INSERT INTO webhook_deliveries (id, endpoint_id, message_id, event_type, payload, status, "
            "attempts, created_at, updated_at) VALUES (:id, :e, :m, 'webhook.test', '{}', :status, :n, "
            "now() - CAST(:age AS interval), now() - CAST(:age AS interval))",
            id=delivery, e=endpoint, m=f"msg_{delivery.hex}", status=status, n=attempts, age=age,
        )  # fmt: skip
        s.add("webhook_deliveries", delivery, pruned=pruned)
        for n in range(1, attempts + 1):
            sql(
                "INSERT INTO webhook_attempts (delivery_id, attempt, status_code) VALUES (:d, :n, 500)",
                d=delivery,
                n=n,
            )
            s.add("webhook_attempts", (delivery, n), pruned=pruned)

    user = sql(
        "INSERT INTO users (id, email, name) VALUES (gen_random_uuid(), :e, 'Staff') RETURNING id",
        e=f"{uuid.uuid4().hex}@example.test",
    )[0][0]
    for age, pruned in (("91 days", True), ("89 days", False), ("1 day", False)):
        row = sql(
            "INSERT INTO notifications (id, user_id, kind, title, body, created_at) VALUES "
            "(gen_random_uuid(), :u, 'k', 't', 'b', now() - CAST(:age AS interval)) RETURNING id",
            u=user,
            age=age,
        )
        s.add("notifications", row[0][0], pruned=pruned)
    for age, pruned in (("400 days", True), ("366 days", True), ("366 days", True), ("364 days", False)):
        row = sql(
            "INSERT INTO audit_log (actor, action, entity, entity_id, created_at) VALUES "
            "('admin', 'product.update', 'product', '1', now() - CAST(:age AS interval)) RETURNING id",
            age=age,
        )
        s.add("audit_log", row[0][0], pruned=pruned)
    return s


def remaining(sql) -> dict[str, set]:
    return {
        "jobs": {r[0] for r in sql("SELECT id FROM jobs")},
        "webhook_deliveries": {r[0] for r in sql("SELECT id FROM webhook_deliveries")},
        "webhook_attempts": {(r[0], r[1]) for r in sql("SELECT delivery_id, attempt FROM webhook_attempts")},
        "notifications": {r[0] for r in sql("SELECT id FROM notifications")},
        "audit_log": {r[0] for r in sql("SELECT id FROM audit_log")},
    }


def assert_pruned_exactly(sql, seeded: Seeded) -> None:
    """Every row meant to go is gone, every row meant to stay is there."""
    left = remaining(sql)
    for table, rows in left.items():
        assert rows == seeded.kept.get(table, set()), table
