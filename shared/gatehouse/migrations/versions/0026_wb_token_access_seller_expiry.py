"""accounts: token_access, seller, token_expires_at, token_expiry_warned_at

Revision ID: 0026
Revises: 0025
Create Date: 2026-12-07

Issue 33: what WB says of an account's token.

- ``token_access``: the token's categories as WB answered them, ``{"finance": "denied", …}``
  (a category not named is unknown); reset when a new token is set.
- ``seller``: WB's seller-info of the token (name, sid, tin, tradeMark); reset with the token.
- ``token_expires_at``: the JWT's ``exp`` (NULL for an opaque token).
- ``token_expiry_warned_at``: when wb.account.token_expiring was raised for this token (once).

Nullable columns without defaults: nothing is rewritten. wb_report_rows keeps its ``rrd_id`` key
column; only the rows' JSON changed shape (camelCase, as WB sends it).
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0026"
down_revision = "0025"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "accounts", sa.Column("token_access", postgresql.JSONB(), nullable=True), if_not_exists=True
    )
    op.add_column("accounts", sa.Column("seller", postgresql.JSONB(), nullable=True), if_not_exists=True)
    op.add_column(
        "accounts",
        sa.Column("token_expires_at", sa.DateTime(timezone=True), nullable=True),
        if_not_exists=True,
    )
    op.add_column(
        "accounts",
        sa.Column("token_expiry_warned_at", sa.DateTime(timezone=True), nullable=True),
        if_not_exists=True,
    )


def downgrade() -> None:
    for column in ("token_expiry_warned_at", "token_expires_at", "seller", "token_access"):
        op.drop_column("accounts", column)
