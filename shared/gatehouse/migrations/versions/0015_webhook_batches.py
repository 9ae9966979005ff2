"""webhook batches: a webhook.deliver job reads its deliveries by job_id

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-01

A ``webhook.deliver`` job now sends a batch of one endpoint's deliveries (those raised
in one transaction, at most WEBHOOK_BATCH_SIZE): each run selects the deliveries whose
current series is that job (``webhook_deliveries.job_id``). Jobs queued before this
revision hold one delivery each and are read the same way.
"""

from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("webhook_deliveries_by_job", "webhook_deliveries", ["job_id"])


def downgrade() -> None:
    op.drop_index("webhook_deliveries_by_job", table_name="webhook_deliveries")
