"""catalog_bulk_operations: the B2B admin's bulk operations ("Akcje masowe")

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import ARRAY, JSONB

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "catalog_bulk_operations",
        sa.Column("id", sa.Uuid(), primary_key=True),
        sa.Column("type", sa.String(), nullable=False),
        sa.Column("status", sa.String(), server_default="pending", nullable=False),
        sa.Column("requester", sa.Uuid(), sa.ForeignKey("users.id", ondelete="SET NULL"), nullable=True),
        sa.Column("request", JSONB(), nullable=False),
        sa.Column("product_ids", ARRAY(sa.Uuid()), nullable=False),
        sa.Column("cursor", sa.Integer(), server_default="0", nullable=False),
        sa.Column("total", sa.Integer(), nullable=False),
        sa.Column("processed", sa.Integer(), server_default="0", nullable=False),
        sa.Column("succeeded", sa.Integer(), server_default="0", nullable=False),
        sa.Column("failed", sa.Integer(), server_default="0", nullable=False),
        sa.Column("failed_items", JSONB(), server_default=sa.text("'[]'::jsonb"), nullable=False),
        sa.Column("error", JSONB(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint(
            "type IN ('product_bulk_update', 'search_reindex')", name="catalog_bulk_operations_type_valid"
        ),
        sa.CheckConstraint(
            "status IN ('pending', 'running', 'completed', 'failed')",
            name="catalog_bulk_operations_status_valid",
        ),
    )
    op.create_index("catalog_bulk_operations_by_created", "catalog_bulk_operations", ["created_at", "id"])


def downgrade() -> None:
    op.drop_table("catalog_bulk_operations")
