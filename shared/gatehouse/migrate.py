"""gatehouse-migrate: bring the database schema to Alembic's head.

Safe to run from several pods at once: a PostgreSQL advisory lock serialises
concurrent runs, and a run that finds the schema at head does nothing.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import Engine, text

from gatehouse.db import make_engine
from gatehouse.errors import ConfigurationError
from gatehouse.settings import load_settings

MIGRATIONS = Path(__file__).parent / "migrations"
_LOCK_KEY = 0x6761746568  # "gateh"


def alembic_config(engine: Engine) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.attributes["engine"] = engine
    return cfg


def upgrade(engine: Engine, revision: str = "head") -> None:
    with engine.connect() as conn:
        conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": _LOCK_KEY})
        try:
            command.upgrade(alembic_config(engine), revision)
        finally:
            conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": _LOCK_KEY})


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        engine = make_engine(load_settings(), bounded_waits=False)
    except ConfigurationError as exc:
        sys.exit(f"gatehouse-migrate: {exc}")
    try:
        upgrade(engine)
    finally:
        engine.dispose()
