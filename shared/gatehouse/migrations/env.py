"""Alembic environment: runs online against the engine handed over by gatehouse.migrate."""

from alembic import context
from sqlmodel import SQLModel

# Importing the table modules registers their tables on SQLModel.metadata.
import gatehouse.audit
import gatehouse.catalog.bulk
import gatehouse.catalog.tables
import gatehouse.models
import gatehouse.modules
import gatehouse.notifications.tables
import gatehouse.search.tables
import gatehouse.sweeps.tables
import gatehouse.users
import gatehouse.wb.tables
import gatehouse.webhooks.tables  # noqa: F401

config = context.config
target_metadata = SQLModel.metadata

with config.attributes["engine"].connect() as connection:
    context.configure(connection=connection, target_metadata=target_metadata, compare_type=True)
    with context.begin_transaction():
        context.run_migrations()
