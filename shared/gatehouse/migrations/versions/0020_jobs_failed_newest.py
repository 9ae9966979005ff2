"""jobs: failed jobs newest first (the console's and the admin jobs list filtered by state=failed)

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-03

At steady state with retention the failed rows are kept longest (30 days against an hour for
a scheduled job that ran fine), so they are old and the newest rows are completed ones:
``jobs?state=failed`` read ``jobs_newest`` backwards past every completed row before the first
failed one — 570,000 rows and 1.3 s on the 1.1 million rows of 30,000 accounts, 3.9 s at
100,000 accounts (bench/bench_fleet_reads.py). This index holds only the failed rows, in
the list's order, so the page reads its 50 and stops. It costs a write only when a job fails. Built CONCURRENTLY, as 0019's: a large jobs table
keeps taking writes while it builds.
"""

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.get_context().autocommit_block():
        op.execute("DROP INDEX CONCURRENTLY IF EXISTS jobs_failed_newest")  # a build that failed before
        op.create_index(
            "jobs_failed_newest",
            "jobs",
            [sa.text("created_at DESC"), sa.text("id DESC")],
            postgresql_where=sa.text("state = 'failed'"),
            postgresql_concurrently=True,
        )


def downgrade() -> None:
    with op.get_context().autocommit_block():
        op.drop_index("jobs_failed_newest", table_name="jobs", postgresql_concurrently=True)
