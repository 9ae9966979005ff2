"""sweeps: carts, price lists and RFQs with the partial indexes of their sweeps; one live system job per type

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

CART_STATUSES = ("open", "abandoned", "converted")
PRICE_LIST_STATUSES = ("scheduled", "active", "expired")
RFQ_STATUSES = ("open", "quoted", "expired")
LIVE_STATES = ("waiting", "active", "delayed")


def _tz(name: str, *, default_now: bool = True) -> sa.Column:
    return sa.Column(
        name,
        sa.DateTime(timezone=True),
        server_default=sa.text("now()") if default_now else None,
        nullable=False,
    )


def upgrade() -> None:
    op.create_table(
        "carts",
        sa.Column("id", sa.Uuid(), primary_key=True),
        sa.Column("customer_ref", sa.String(), nullable=False),
        sa.Column("status", sa.String(), server_default="open", nullable=False),
        _tz("updated_at"),
        sa.Column("items", JSONB(), server_default=sa.text("'[]'::jsonb"), nullable=False),
        _tz("created_at"),
        sa.CheckConstraint(f"status IN {CART_STATUSES}", name="carts_status_valid"),
    )
    op.create_index(
        "carts_open_by_updated", "carts", ["updated_at"], postgresql_where=sa.text("status = 'open'")
    )
    op.create_table(
        "price_lists",
        sa.Column("id", sa.Uuid(), primary_key=True),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("status", sa.String(), nullable=False),
        _tz("valid_from", default_now=False),
        _tz("valid_to", default_now=False),
        _tz("created_at"),
        _tz("updated_at"),
        sa.CheckConstraint(f"status IN {PRICE_LIST_STATUSES}", name="price_lists_status_valid"),
        sa.CheckConstraint("valid_to > valid_from", name="price_lists_validity"),
    )
    op.create_index(
        "price_lists_scheduled_by_valid_from",
        "price_lists",
        ["valid_from"],
        postgresql_where=sa.text("status = 'scheduled'"),
    )
    op.create_index(
        "price_lists_live_by_valid_to",
        "price_lists",
        ["valid_to"],
        postgresql_where=sa.text("status IN ('scheduled', 'active')"),
    )
    op.create_table(
        "rfqs",
        sa.Column("id", sa.Uuid(), primary_key=True),
        sa.Column("customer_ref", sa.String(), nullable=False),
        sa.Column("status", sa.String(), nullable=False),
        _tz("expires_at", default_now=False),
        _tz("created_at"),
        _tz("updated_at"),
        sa.CheckConstraint(f"status IN {RFQ_STATUSES}", name="rfqs_status_valid"),
    )
    op.create_index(
        "rfqs_live_by_expires_at",
        "rfqs",
        ["expires_at"],
        postgresql_where=sa.text("status IN ('open', 'quoted')"),
    )
    # A system job (scheduled, no account: a sweep) is one live per type; NULL account ids never
    # collide in jobs_one_live_per_account_type.
    op.create_index(
        "jobs_one_live_system_job",
        "jobs",
        ["type"],
        unique=True,
        postgresql_where=sa.text(f"account_id IS NULL AND tier = 'scheduled' AND state IN {LIVE_STATES}"),
    )


def downgrade() -> None:
    op.drop_index("jobs_one_live_system_job", table_name="jobs")
    op.drop_table("rfqs")
    op.drop_table("price_lists")
    op.drop_table("carts")
