"""search documents leave room on their pages, so a status update stays on its page

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-02

A bulk patch of the status moves only the status beside each document. On a full page
the new row version goes to another page, with a new entry in the primary key and in the
GIN index of the whole document, for a column neither indexes. With room on the page
PostgreSQL writes it in place (a HOT update), with no index entry. Rows written from now
on keep the room; pages written before get it as their rows move.
"""

from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE search_documents SET (fillfactor = 80)")


def downgrade() -> None:
    op.execute("ALTER TABLE search_documents RESET (fillfactor)")
