"""operator_pauses, job_attempts, jobs.cancel_requested_*, webhook_deliveries.dead_reason

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-03

What the operator's steering and the console's history need (issue 27):

- ``operator_pauses``: a queue whose consumers stop taking messages in every worker process,
  or an account whose WB jobs park, with who paused it and when. Few rows, read often.
- ``job_attempts``: one row per run of a job (start, end, worker, outcome, error), written by
  the runtime through the job store, deleted with its job (retention prunes jobs).
- ``jobs.cancel_requested_at/_by``: a cooperative cancel of an active job, which its body
  reads at its next checkpoint or WB call.
- ``webhook_deliveries.dead_reason``: why a delivery died (its last attempt, another
  delivery's 410 that disabled the endpoint, and when).

Every column added is nullable without a default: nothing is rewritten.
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "operator_pauses",
        sa.Column("kind", sa.String(), primary_key=True),
        sa.Column("target", sa.String(), primary_key=True),
        sa.Column("paused_by", sa.String(), nullable=False),
        sa.Column("paused_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.text("now()")),
        sa.CheckConstraint("kind IN ('queue', 'account')", name="operator_pauses_kind_valid"),
        if_not_exists=True,
    )
    op.create_table(
        "job_attempts",
        sa.Column("id", sa.BigInteger(), primary_key=True, autoincrement=True),
        sa.Column("job_id", sa.Uuid(), sa.ForeignKey("jobs.id", ondelete="CASCADE"), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("worker", sa.String(), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("outcome", sa.String(), nullable=True),
        sa.Column("error_code", sa.String(), nullable=True),
        sa.Column("error_message", sa.String(), nullable=True),
        if_not_exists=True,
    )
    op.create_index("job_attempts_by_job", "job_attempts", ["job_id", "started_at"], if_not_exists=True)
    op.add_column(
        "jobs",
        sa.Column("cancel_requested_at", sa.DateTime(timezone=True), nullable=True),
        if_not_exists=True,
    )
    op.add_column("jobs", sa.Column("cancel_requested_by", sa.String(), nullable=True), if_not_exists=True)
    op.add_column(
        "webhook_deliveries",
        sa.Column("dead_reason", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        if_not_exists=True,
    )


def downgrade() -> None:
    op.drop_column("webhook_deliveries", "dead_reason")
    op.drop_column("jobs", "cancel_requested_by")
    op.drop_column("jobs", "cancel_requested_at")
    op.drop_index("job_attempts_by_job", table_name="job_attempts")
    op.drop_table("job_attempts")
    op.drop_table("operator_pauses")
