"""jobs.checkpoint: where a paused or retried job resumes

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("jobs", sa.Column("checkpoint", JSONB(), nullable=True))


def downgrade() -> None:
    op.drop_column("jobs", "checkpoint")
