"""imported WB data: orders, sales, realization report rows, campaigns, campaign stats

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def wb_table(name: str, *keys: sa.Column, extra: tuple[sa.Column, ...] = ()) -> None:
    """A dataset table: (account, WB's natural key) → WB's record."""
    op.create_table(
        name,
        sa.Column("account_id", sa.Uuid(), sa.ForeignKey("accounts.id", ondelete="CASCADE"), nullable=False),
        *keys,
        *extra,
        sa.Column("data", JSONB(), nullable=False),
        sa.Column("imported_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.PrimaryKeyConstraint("account_id", *(k.name for k in keys)),
    )


def upgrade() -> None:
    changed = (sa.Column("last_change_date", sa.String(), nullable=False),)
    wb_table("wb_orders", sa.Column("srid", sa.String(), nullable=False), extra=changed)
    wb_table("wb_sales", sa.Column("sale_id", sa.String(), nullable=False), extra=changed)
    wb_table("wb_report_rows", sa.Column("rrd_id", sa.BigInteger(), nullable=False))
    wb_table("wb_campaigns", sa.Column("advert_id", sa.BigInteger(), nullable=False))
    wb_table(
        "wb_campaign_stats",
        sa.Column("advert_id", sa.BigInteger(), nullable=False),
        sa.Column("day", sa.Date(), nullable=False),
    )


def downgrade() -> None:
    for name in ("wb_campaign_stats", "wb_campaigns", "wb_report_rows", "wb_sales", "wb_orders"):
        op.drop_table(name)
