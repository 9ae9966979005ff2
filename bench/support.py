"""A throwaway database and Redis database for a benchmark run, and an in-process worker."""

from __future__ import annotations

import contextlib
import statistics
import uuid
from collections.abc import Iterator

import psycopg
import redis
from dramatiq import Worker

from gatehouse.crypto import generate_key
from gatehouse.db import make_engine
from gatehouse.migrate import upgrade
from gatehouse.settings import Settings, load_settings

BENCH_REDIS_DB = 14


@contextlib.contextmanager
def bench_settings(**overrides: object) -> Iterator[Settings]:
    base = Settings()
    server = (base.database_url or "postgresql://postgres@127.0.0.1:5432/postgres").replace(
        "postgresql+psycopg://", "postgresql://"
    )
    name = f"gatehouse_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    redis_url = (base.redis_url or "redis://127.0.0.1:6379/0").rsplit("/", 1)[0] + f"/{BENCH_REDIS_DB}"
    settings = load_settings(
        database_url=server.rsplit("/", 1)[0] + f"/{name}",
        redis_url=redis_url,
        worker_idle_poll_ms=20,
        token_encryption_key=generate_key(),
        **overrides,
    )
    engine = make_engine(settings)
    upgrade(engine)
    engine.dispose()
    redis.Redis.from_url(redis_url).flushdb()
    try:
        yield settings
    finally:
        redis.Redis.from_url(redis_url).flushdb()
        with psycopg.connect(server, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextlib.contextmanager
def running_worker(broker, threads: int = 8) -> Iterator[Worker]:
    worker = Worker(broker, worker_threads=threads, worker_timeout=20)
    broker.emit_after("process_boot")
    worker.start()
    try:
        yield worker
    finally:
        worker.stop(timeout=30_000)


def percentile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]
