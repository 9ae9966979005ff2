"""jobs.delivery is jobs.message_number: "delivery" means a webhook delivery and nothing else

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-02

The column numbers a job's messages: every move back to waiting or delayed bumps it and
the new message carries it, so only the newest message can claim the row. A rename only
(no index or constraint names it); every process must run the release that reads the new
name, so run it with the migration before the processes restart.
"""

from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.alter_column("jobs", "delivery", new_column_name="message_number")


def downgrade() -> None:
    op.alter_column("jobs", "message_number", new_column_name="delivery")
