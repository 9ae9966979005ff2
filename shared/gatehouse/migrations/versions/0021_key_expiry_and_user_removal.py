"""keys: expiry and last use; users: removal (the row stays, so audit rows still name them)

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-03

A revoked key's row is deleted (its audit row says when and by whom); a removed user's row
stays with ``removed_at`` set, because audit rows, bulk operations and notifications name it.
Its e-mail becomes free again: the unique index covers only users not removed.
"""

import sqlalchemy as sa
from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None

KEY_TABLES = ("api_keys", "user_api_keys")


def upgrade() -> None:
    for table in KEY_TABLES:
        op.add_column(table, sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True))
        op.add_column(table, sa.Column("last_used_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column("users", sa.Column("removed_at", sa.DateTime(timezone=True), nullable=True))
    op.drop_constraint("users_email_key", "users", type_="unique")
    op.create_index(
        "users_email_key", "users", ["email"], unique=True, postgresql_where=sa.text("removed_at IS NULL")
    )


def downgrade() -> None:
    op.drop_index("users_email_key", table_name="users")
    op.execute("DELETE FROM users WHERE removed_at IS NOT NULL")
    op.create_unique_constraint("users_email_key", "users", ["email"])
    op.drop_column("users", "removed_at")
    for table in KEY_TABLES:
        op.drop_column(table, "last_used_at")
        op.drop_column(table, "expires_at")
