"""jobs.worker: the worker process that runs an active job, for dead-worker recovery

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("jobs", sa.Column("worker", sa.String(), nullable=True))
    op.create_index("jobs_active_by_worker", "jobs", ["worker"], postgresql_where=sa.text("state = 'active'"))


def downgrade() -> None:
    op.drop_index("jobs_active_by_worker", table_name="jobs")
    op.drop_column("jobs", "worker")
