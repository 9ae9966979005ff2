"""modules: module_registrations, every module installed and enabled

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

MODULES = ("catalog", "webhooks", "carts", "price_lists", "rfq")


def upgrade() -> None:
    table = op.create_table(
        "module_registrations",
        sa.Column("name", sa.String(), primary_key=True),
        sa.Column("installed", sa.Boolean(), server_default=sa.text("true"), nullable=False),
        sa.Column("enabled", sa.Boolean(), server_default=sa.text("true"), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("updated_by", sa.String(), server_default="migration", nullable=False),
    )
    op.bulk_insert(table, [{"name": name} for name in MODULES])


def downgrade() -> None:
    op.drop_table("module_registrations")
