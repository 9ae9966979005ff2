"""imported WB data: stocks, cards; per-account feed cursors of the scheduled syncs

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-30
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def _account() -> sa.Column:
    return sa.Column(
        "account_id", sa.Uuid(), sa.ForeignKey("accounts.id", ondelete="CASCADE"), nullable=False
    )


def _stamp(name: str) -> sa.Column:
    return sa.Column(name, sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False)


def upgrade() -> None:
    op.create_table(
        "wb_stocks",
        _account(),
        sa.Column("nm_id", sa.BigInteger(), nullable=False),
        sa.Column("chrt_id", sa.BigInteger(), nullable=False),
        sa.Column("warehouse_id", sa.BigInteger(), nullable=False),
        sa.Column("data", JSONB(), nullable=False),
        _stamp("imported_at"),
        sa.PrimaryKeyConstraint("account_id", "nm_id", "chrt_id", "warehouse_id"),
    )
    op.create_table(
        "wb_cards",
        _account(),
        sa.Column("nm_id", sa.BigInteger(), nullable=False),
        sa.Column("data", JSONB(), nullable=False),
        _stamp("imported_at"),
        sa.PrimaryKeyConstraint("account_id", "nm_id"),
    )
    op.create_table(
        "wb_feed_cursors",
        _account(),
        sa.Column("feed", sa.String(), nullable=False),
        sa.Column("cursor", sa.String(), nullable=False),
        _stamp("updated_at"),
        sa.PrimaryKeyConstraint("account_id", "feed"),
    )


def downgrade() -> None:
    for name in ("wb_feed_cursors", "wb_cards", "wb_stocks"):
        op.drop_table(name)
