"""webhook_endpoints: account_id, disabled_at, rate_limit_per_second, failing_since

Revision ID: 0025
Revises: 0024
Create Date: 2026-12-03

Issue 28's per-account webhook subscriptions and endpoint health:

- ``account_id``: an endpoint owned by one seller account (managed with its key, receiving
  only its events); NULL for the admin endpoints. Partial index: most endpoints are admin's.
- ``disabled_at``: when it was disabled (a 410, an operator, or failing too long).
- ``rate_limit_per_second``: deliveries beyond it wait without spending an attempt.
- ``failing_since``: the start of its current run of failed attempts (cleared by a success).

Nullable columns without defaults: nothing is rewritten.
"""

import sqlalchemy as sa
from alembic import op

revision = "0025"
down_revision = "0024"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "webhook_endpoints",
        sa.Column("account_id", sa.Uuid(), sa.ForeignKey("accounts.id", ondelete="CASCADE"), nullable=True),
        if_not_exists=True,
    )
    op.create_index(
        "webhook_endpoints_by_account",
        "webhook_endpoints",
        ["account_id"],
        postgresql_where=sa.text("account_id IS NOT NULL"),
        if_not_exists=True,
    )
    op.add_column(
        "webhook_endpoints", sa.Column("disabled_at", sa.DateTime(timezone=True)), if_not_exists=True
    )
    op.add_column("webhook_endpoints", sa.Column("rate_limit_per_second", sa.Integer()), if_not_exists=True)
    op.add_column(
        "webhook_endpoints", sa.Column("failing_since", sa.DateTime(timezone=True)), if_not_exists=True
    )


def downgrade() -> None:
    op.drop_column("webhook_endpoints", "failing_since")
    op.drop_column("webhook_endpoints", "rate_limit_per_second")
    op.drop_column("webhook_endpoints", "disabled_at")
    op.drop_index("webhook_endpoints_by_account", table_name="webhook_endpoints")
    op.drop_column("webhook_endpoints", "account_id")
