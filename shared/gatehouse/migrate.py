"""gatehouse-migrate: bring the database schema to Alembic's head.

Safe to run from several pods at once: a PostgreSQL advisory lock serialises
concurrent runs, and a run that finds the schema at head does nothing.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import Engine, text

from gatehouse import logs
from gatehouse.db import make_engine
from gatehouse.errors import ConfigurationError
from gatehouse.settings import load_settings

MIGRATIONS = Path(__file__).parent / "migrations"
_LOCK_KEY = 0x6761746568  # "gateh"
LOCK_POLL_S = 0.5


def alembic_config(engine: Engine) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.attributes["engine"] = engine
    return cfg


def upgrade(engine: Engine, revision: str = "head") -> None:
    # The lock is the session's, taken outside a transaction and asked for again every
    # LOCK_POLL_S rather than waited on: a waiting statement (or an open transaction) holds
    # a snapshot, which the other run's CREATE INDEX CONCURRENTLY would wait for, for ever.
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        while not conn.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": _LOCK_KEY}).scalar():
            time.sleep(LOCK_POLL_S)
        try:
            command.upgrade(alembic_config(engine), revision)
        finally:
            conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": _LOCK_KEY})


def main() -> None:
    try:
        settings = load_settings()
        engine = make_engine(settings, bounded_waits=False)
    except ConfigurationError as exc:
        sys.exit(f"gatehouse-migrate: {exc}")
    logs.configure(settings.log_format, settings.log_level)
    try:
        upgrade(engine)
    finally:
        engine.dispose()
