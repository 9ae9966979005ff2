"""accounts, webhook_endpoints: which TOKEN_ENCRYPTION_KEY encrypted each stored secret

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-03

A Fernet token does not name its key, so key rotation (gatehouse-rotate-keys) could only
tell which rows still use an old key by decrypting every one. Each encrypted column gets a
``…_key_id`` beside it (gatehouse.crypto.key_id of the key that wrote it). Existing rows get
NULL: under an unknown key, counted as old until the first rotation stamps them. Adding a
nullable column without a default rewrites nothing.

``accounts_wb_token_key`` lets the console count the accounts whose token is not under the
current key by three index range scans (below it, above it, none) that find nothing once
rotation is done, instead of a scan of every account. Built CONCURRENTLY, as 0019's, outside
the migration's transaction. The webhook endpoints are few: they are counted by a scan.
"""

import sqlalchemy as sa
from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("accounts", sa.Column("wb_token_key_id", sa.String(), nullable=True))
    op.add_column("webhook_endpoints", sa.Column("secret_key_id", sa.String(), nullable=True))
    op.add_column("webhook_endpoints", sa.Column("previous_secret_key_id", sa.String(), nullable=True))
    with op.get_context().autocommit_block():
        op.execute("DROP INDEX CONCURRENTLY IF EXISTS accounts_wb_token_key")  # a build that failed before
        op.create_index(
            "accounts_wb_token_key",
            "accounts",
            ["wb_token_key_id"],
            postgresql_where=sa.text("wb_token_encrypted IS NOT NULL"),
            postgresql_concurrently=True,
        )


def downgrade() -> None:
    with op.get_context().autocommit_block():
        op.drop_index("accounts_wb_token_key", table_name="accounts", postgresql_concurrently=True)
    op.drop_column("webhook_endpoints", "previous_secret_key_id")
    op.drop_column("webhook_endpoints", "secret_key_id")
    op.drop_column("accounts", "wb_token_key_id")
