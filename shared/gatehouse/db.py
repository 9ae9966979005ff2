"""The SQLAlchemy engine (psycopg 3). Built by the composition root, never at import."""

from __future__ import annotations

from sqlalchemy import Engine, create_engine, text

from gatehouse.settings import Settings


def make_engine(settings: Settings) -> Engine:
    return create_engine(
        settings.sqlalchemy_url,
        pool_size=settings.db_pool_size,
        max_overflow=settings.db_pool_size,
        # No ping per checkout (it doubles the round trips of every job step); a
        # connection that broke is discarded when it errors, and none lives long.
        pool_recycle=300,
        # Fail fast when PostgreSQL is down instead of hanging a request or a job.
        connect_args={"connect_timeout": 5},
    )


def ping(engine: Engine) -> None:
    with engine.connect() as conn:
        conn.execute(text("SELECT 1"))
