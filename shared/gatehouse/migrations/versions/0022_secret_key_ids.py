"""accounts, webhook_endpoints: which TOKEN_ENCRYPTION_KEY encrypted each stored secret

Revision ID: 0022
Revises: 0020
Create Date: 2026-12-03

A Fernet token does not name its key, so key rotation (gatehouse-rotate-keys) could only
tell which rows still use an old key by decrypting every one. Each encrypted column gets a
``…_key_id`` beside it (gatehouse.crypto.key_id of the key that wrote it). Existing rows get
NULL: under an unknown key, counted as old until the first rotation stamps them. Adding a
nullable column without a default rewrites nothing.
"""

import sqlalchemy as sa
from alembic import op

revision = "0022"
down_revision = "0020"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("accounts", sa.Column("wb_token_key_id", sa.String(), nullable=True))
    op.add_column("webhook_endpoints", sa.Column("secret_key_id", sa.String(), nullable=True))
    op.add_column("webhook_endpoints", sa.Column("previous_secret_key_id", sa.String(), nullable=True))


def downgrade() -> None:
    op.drop_column("webhook_endpoints", "previous_secret_key_id")
    op.drop_column("webhook_endpoints", "secret_key_id")
    op.drop_column("accounts", "wb_token_key_id")
