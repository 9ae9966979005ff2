"""accounts.token_invalid, account_datasets, audit_log.operation_id, catalog_bulk_operations.revert_of

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-03

What issue 28 needs of the schema, in one migration so its parts share it:

- ``accounts.token_invalid``: WB rejected the account's token (401), with when and which job;
  cleared when the token is rotated.
- ``account_datasets``: when a completed job last brought each dataset of an account up to date
  (its freshness); the index answers the oldest per dataset and the stale count.
- ``audit_log.operation_id``: the bulk operation that made a change, so its revert reads exactly
  the before-values it recorded (partial index: most audit rows have none).
- ``catalog_bulk_operations.revert_of``: the operation a revert reverts.

Nullable columns without defaults: nothing is rewritten.
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "accounts",
        sa.Column("token_invalid", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        if_not_exists=True,
    )
    op.create_table(
        "account_datasets",
        sa.Column(
            "account_id", sa.Uuid(), sa.ForeignKey("accounts.id", ondelete="CASCADE"), primary_key=True
        ),
        sa.Column("dataset", sa.String(), primary_key=True),
        sa.Column("last_synced_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_job_id", sa.Uuid(), nullable=True),
        if_not_exists=True,
    )
    op.create_index(
        "account_datasets_by_age", "account_datasets", ["dataset", "last_synced_at"], if_not_exists=True
    )
    op.add_column("audit_log", sa.Column("operation_id", sa.Uuid(), nullable=True), if_not_exists=True)
    op.create_index(
        "audit_log_by_operation",
        "audit_log",
        ["operation_id"],
        postgresql_where=sa.text("operation_id IS NOT NULL"),
        if_not_exists=True,
    )
    op.add_column(
        "catalog_bulk_operations", sa.Column("revert_of", sa.Uuid(), nullable=True), if_not_exists=True
    )


def downgrade() -> None:
    op.drop_column("catalog_bulk_operations", "revert_of")
    op.drop_index("audit_log_by_operation", table_name="audit_log")
    op.drop_column("audit_log", "operation_id")
    op.drop_index("account_datasets_by_age", table_name="account_datasets")
    op.drop_table("account_datasets")
    op.drop_column("accounts", "token_invalid")
