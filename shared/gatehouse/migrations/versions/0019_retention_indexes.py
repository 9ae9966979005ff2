"""retention indexes: the prune job deletes old rows by index range scans

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-03

The hourly ``maintenance:prune`` job (gatehouse.retention) deletes, in batches, the
rows older than their retention; each of its statements reads one of these in order:

- ``jobs_finished_by_type`` (type, state, finished_at, id) of finished rows: the oldest
  completed (or failed) rows of one type, from where the previous batch stopped ("is there a
  later finished job of this account and type?", so that the latest is kept, reads the
  existing ``jobs_by_account``: one index more on jobs costs every job's finish);
- ``webhook_deliveries_finished`` (status, updated_at) of delivered and dead deliveries;
- ``notifications_by_created`` and ``audit_log_by_created`` (created_at).

Built CONCURRENTLY, each outside the migration's transaction: a deployment that never
deleted anything has a large jobs table, and a plain CREATE INDEX would block every job
write for as long as the build takes. A build that failed half-way leaves an invalid
index, which the next run drops and builds again.
"""

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None

FINISHED_JOB = sa.text("state IN ('completed', 'failed')")
INDEXES = (
    ("jobs_finished_by_type", "jobs", ["type", "state", "finished_at", "id"], FINISHED_JOB),
    (
        "webhook_deliveries_finished",
        "webhook_deliveries",
        ["status", "updated_at"],
        sa.text("status IN ('delivered', 'dead')"),
    ),
    ("notifications_by_created", "notifications", ["created_at"], None),
    ("audit_log_by_created", "audit_log", ["created_at"], None),
)


def upgrade() -> None:
    with op.get_context().autocommit_block():
        for name, table, columns, where in INDEXES:
            op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")  # a build that failed before
            op.create_index(name, table, columns, postgresql_where=where, postgresql_concurrently=True)


def downgrade() -> None:
    with op.get_context().autocommit_block():
        for name, table, _, _ in reversed(INDEXES):
            op.drop_index(name, table_name=table, postgresql_concurrently=True)
