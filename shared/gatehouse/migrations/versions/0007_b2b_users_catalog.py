"""B2B: staff users and their keys, the catalog (products, attributes), the audit log

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def _stamp(name: str) -> sa.Column:
    return sa.Column(name, sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False)


def upgrade() -> None:
    op.create_table(
        "users",
        sa.Column("id", sa.Uuid(), primary_key=True),
        sa.Column("email", sa.String(), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("role", sa.String(), server_default="admin", nullable=False),
        _stamp("created_at"),
        sa.UniqueConstraint("email", name="users_email_key"),
        sa.CheckConstraint("role IN ('admin')", name="users_role_valid"),
    )
    op.create_table(
        "user_api_keys",
        sa.Column("id", sa.String(), primary_key=True),
        sa.Column("user_id", sa.Uuid(), sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
        sa.Column("secret_sha256", sa.String(), nullable=False),
        _stamp("created_at"),
    )
    op.create_index("ix_user_api_keys_user_id", "user_api_keys", ["user_id"])
    op.create_table(
        "products",
        sa.Column("id", sa.Uuid(), primary_key=True),
        sa.Column("sku", sa.String(), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("description", sa.String(), server_default="", nullable=False),
        sa.Column("price_amount", sa.BigInteger(), nullable=False),
        sa.Column("price_currency", sa.CHAR(3), nullable=False),
        sa.Column("status", sa.String(), server_default="draft", nullable=False),
        sa.Column("attributes", JSONB(), server_default=sa.text("'{}'::jsonb"), nullable=False),
        _stamp("created_at"),
        _stamp("updated_at"),
        sa.UniqueConstraint("sku", name="products_sku_key"),
        sa.CheckConstraint("status IN ('draft', 'active', 'archived')", name="products_status_valid"),
        sa.CheckConstraint("price_amount >= 0", name="products_price_amount_valid"),
    )
    op.create_index("products_by_created", "products", ["created_at", "id"])
    op.create_index("products_by_status", "products", ["status", "created_at", "id"])
    op.create_table(
        "attributes",
        sa.Column("code", sa.String(), primary_key=True),
        sa.Column("label", sa.String(), nullable=False),
        sa.Column("searchable", sa.Boolean(), server_default=sa.text("false"), nullable=False),
        _stamp("created_at"),
    )
    op.create_table(
        "audit_log",
        sa.Column("id", sa.BigInteger(), primary_key=True, autoincrement=True),
        sa.Column("actor", sa.String(), nullable=False),
        sa.Column("action", sa.String(), nullable=False),
        sa.Column("entity", sa.String(), nullable=False),
        sa.Column("entity_id", sa.String(), nullable=False),
        sa.Column("before", JSONB(), nullable=True),
        sa.Column("after", JSONB(), nullable=True),
        _stamp("created_at"),
    )
    op.create_index("audit_log_by_entity", "audit_log", ["entity", "entity_id", "id"])


def downgrade() -> None:
    for name in ("audit_log", "attributes", "products", "user_api_keys", "users"):
        op.drop_table(name)
