"""foundation: accounts and jobs

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

LIVE = sa.text("state IN ('waiting', 'active', 'delayed')")


def upgrade() -> None:
    op.create_table(
        "accounts",
        sa.Column("id", sa.Uuid(), primary_key=True),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("active", sa.Boolean(), server_default=sa.text("true"), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
    )
    op.create_table(
        "jobs",
        sa.Column("id", sa.Uuid(), primary_key=True),
        sa.Column("type", sa.String(), nullable=False),
        sa.Column("queue", sa.String(), nullable=False),
        sa.Column("account_id", sa.Uuid(), sa.ForeignKey("accounts.id", ondelete="CASCADE"), nullable=True),
        sa.Column("tier", sa.String(), server_default="user", nullable=False),
        sa.Column("state", sa.String(), server_default="waiting", nullable=False),
        sa.Column("delivery", sa.Integer(), server_default="1", nullable=False),
        sa.Column("claims", sa.Integer(), server_default="0", nullable=False),
        sa.Column("attempt", sa.Integer(), server_default="1", nullable=False),
        sa.Column("max_attempts", sa.Integer(), server_default="1", nullable=False),
        sa.Column("progress", JSONB(), nullable=True),
        sa.Column("payload", JSONB(), server_default=sa.text("'{}'::jsonb"), nullable=False),
        sa.Column("result", JSONB(), nullable=True),
        sa.Column("error", JSONB(), nullable=True),
        sa.Column("resume_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("lease_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint(
            "state IN ('waiting', 'active', 'delayed', 'completed', 'failed')", name="jobs_state_valid"
        ),
        sa.CheckConstraint("tier IN ('user', 'scheduled')", name="jobs_tier_valid"),
    )
    op.create_index("jobs_by_account", "jobs", ["account_id", "created_at", "id"])
    op.create_index("jobs_live_by_state", "jobs", ["state"], postgresql_where=LIVE)
    op.create_index(
        "jobs_one_live_per_account_type", "jobs", ["account_id", "type"], unique=True, postgresql_where=LIVE
    )


def downgrade() -> None:
    op.drop_table("jobs")
    op.drop_table("accounts")
