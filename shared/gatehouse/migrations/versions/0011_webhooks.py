"""webhooks: endpoints, deliveries (the outbox of domain events) and their attempts

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

STATUSES = ("pending", "delivering", "failed", "delivered", "dead")


def _tz(name: str, nullable: bool = False) -> sa.Column:
    default = None if nullable else sa.text("now()")
    return sa.Column(name, sa.DateTime(timezone=True), server_default=default, nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "webhook_endpoints",
        sa.Column("id", sa.Uuid(), primary_key=True),
        sa.Column("url", sa.String(), nullable=False),
        sa.Column("description", sa.String(), server_default="", nullable=False),
        sa.Column("event_types", sa.ARRAY(sa.String()), nullable=True),
        sa.Column("enabled", sa.Boolean(), server_default=sa.text("true"), nullable=False),
        sa.Column("disabled_reason", sa.String(), nullable=True),
        sa.Column("secret", sa.String(), nullable=False),
        sa.Column("previous_secret", sa.String(), nullable=True),
        _tz("previous_secret_until", nullable=True),
        _tz("created_at"),
        _tz("updated_at"),
    )
    op.create_index("webhook_endpoints_by_created", "webhook_endpoints", ["created_at", "id"])
    op.create_table(
        "webhook_deliveries",
        sa.Column("id", sa.Uuid(), primary_key=True),
        sa.Column(
            "endpoint_id",
            sa.Uuid(),
            sa.ForeignKey("webhook_endpoints.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("message_id", sa.String(), nullable=False),
        sa.Column("event_type", sa.String(), nullable=False),
        sa.Column("payload", JSONB(), nullable=False),
        sa.Column("status", sa.String(), server_default="pending", nullable=False),
        sa.Column("attempts", sa.Integer(), server_default="0", nullable=False),
        sa.Column("job_id", sa.Uuid(), nullable=True),
        _tz("created_at"),
        _tz("updated_at"),
        _tz("delivered_at", nullable=True),
        sa.CheckConstraint(f"status IN {STATUSES}", name="webhook_deliveries_status_valid"),
    )
    op.create_index("webhook_deliveries_by_created", "webhook_deliveries", ["created_at", "id"])
    op.create_index(
        "webhook_deliveries_by_endpoint", "webhook_deliveries", ["endpoint_id", "created_at", "id"]
    )
    op.create_index("webhook_deliveries_by_message", "webhook_deliveries", ["message_id"])
    op.create_table(
        "webhook_attempts",
        sa.Column("id", sa.BigInteger(), primary_key=True, autoincrement=True),
        sa.Column(
            "delivery_id",
            sa.Uuid(),
            sa.ForeignKey("webhook_deliveries.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("attempt", sa.Integer(), nullable=False),
        _tz("at"),
        sa.Column("status_code", sa.Integer(), nullable=True),
        sa.Column("error", sa.String(), nullable=True),
        sa.Column("duration_ms", sa.Integer(), nullable=True),
        sa.Column("response_excerpt", sa.String(), nullable=True),
        sa.UniqueConstraint("delivery_id", "attempt", name="webhook_attempts_delivery_attempt_key"),
    )


def downgrade() -> None:
    op.drop_table("webhook_attempts")
    op.drop_table("webhook_deliveries")
    op.drop_table("webhook_endpoints")
