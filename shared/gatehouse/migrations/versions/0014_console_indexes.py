"""console indexes: the jobs list newest first, failed jobs by when they finished, dead deliveries

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-01

``jobs_newest`` serves GET /v1/admin/jobs and the console's jobs page (newest first, a
keyset page of 50, any filter without an account). ``jobs_failed_by_finished`` serves
"failed in the last 24 h" (the console's overview) without reading the completed rows.
Each index costs every job write, so these are the only two the console adds to jobs: an
account's jobs already have ``jobs_by_account``, live states ``jobs_live_by_state``.
``webhook_deliveries_dead`` holds only the dead letters: their count on the overview and an
endpoint's "replay all dead since…" read it instead of every delivery.
"""

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("jobs_newest", "jobs", [sa.text("created_at DESC"), sa.text("id DESC")])
    op.create_index(
        "jobs_failed_by_finished", "jobs", ["finished_at"], postgresql_where=sa.text("state = 'failed'")
    )
    op.create_index(
        "webhook_deliveries_dead",
        "webhook_deliveries",
        ["endpoint_id", "created_at"],
        postgresql_where=sa.text("status = 'dead'"),
    )


def downgrade() -> None:
    op.drop_index("webhook_deliveries_dead", table_name="webhook_deliveries")
    op.drop_index("jobs_failed_by_finished", table_name="jobs")
    op.drop_index("jobs_newest", table_name="jobs")
