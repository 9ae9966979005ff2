"""Fan-out: a 10,000-account tick's jobs written and enqueued, vs a bare batched INSERT of the same rows.

The rnp-ads tick (spread over its default 150 s) fans out over 10,000 active
accounts: ``FanOutHandlers.tick`` creates the fan-out job, then its body
(``FanOutHandlers.run``, driven in-process as the job does, on a real claim) writes
the jobs a chunk of FAN_OUT_CHUNK_SIZE per statement and transaction, with the
checkpoint, each chunk's messages sent through one Redis pipeline. No worker
consumes them, so nothing runs.

- floor: the same rows (same columns, payloads and etas) inserted by raw psycopg,
  one ``INSERT … SELECT FROM unnest(…)`` per chunk of 1,000, each its own
  transaction, and nothing enqueued;
- serial: the path this replaced, ``JobHandlers.submit`` per account (one INSERT and
  one enqueue each), on 1,000 accounts, as ms per account.

Prints the fan-out time (target ≤ 5 s), ``fan-out/floor`` (time over time: what
the enqueue, the checkpoint and our code cost on top of the INSERT), the rows and
messages it wrote, and the serial path's cost per account.
"""

from __future__ import annotations

import os
import statistics
import time
import uuid

import psycopg
from psycopg.types.json import Jsonb

from bench.support import BENCH_REDIS_DB, Result, bench_settings
from gatehouse import job_types as jt
from gatehouse.composition import bootstrap
from gatehouse.fanout import TICK_FIELD, offset_ms
from gatehouse.jobs import datetime_to_ms, ms_to_datetime, utcnow
from gatehouse.schedules import FAN_OUTS

ACCOUNTS = int(os.environ.get("FANOUT_ACCOUNTS", "10000"))
SERIAL_ACCOUNTS = 1_000
ROUNDS = 3
SCHEDULE = "rnp-ads"
TARGET_S = 5.0
FLOOR_CHUNK = 1_000
FLOOR_INSERT = """
INSERT INTO jobs (id, type, queue, tier, account_id, max_attempts, payload, state, resume_at)
SELECT gen_random_uuid(), 'bench-floor', 'floor', 'scheduled', c.account_id, 1, c.payload, 'delayed', c.resume_at
FROM ROWS FROM (unnest(%(accounts)s::uuid[]), jsonb_array_elements(%(payloads)s),
  unnest(%(etas)s::timestamptz[])) AS c(account_id, payload, resume_at)"""


def seed_accounts(conn: psycopg.Connection, n: int) -> list[uuid.UUID]:
    conn.execute(
        "INSERT INTO accounts (id, name) SELECT gen_random_uuid(), 'shop-' || g FROM generate_series(1, %s) g",
        [n],
    )
    return [r[0] for r in conn.execute("SELECT id FROM accounts ORDER BY id")]


def fan_out(c, schedule) -> tuple[float, dict]:
    """The tick, then the fan-out job's body on its claim; returns the body's seconds and its result."""
    c.fan_out_handlers.tick(schedule)
    fan_out_type = FAN_OUTS[SCHEDULE]
    [job] = c.jobs.list_jobs(type=fan_out_type.name, state="waiting")
    claim = c.jobs.claim(job.id, job.message_number, 60_000, worker="bench", start=True)
    start = time.perf_counter()
    result = c.fan_out_handlers.run(
        SCHEDULE,
        tick_ms=job.payload[TICK_FIELD],
        resume={},
        save=lambda checkpoint, tx: c.jobs.save_checkpoint(claim, checkpoint, tx=tx),
    )
    return time.perf_counter() - start, result


def floor(conn: psycopg.Connection, accounts: list[uuid.UUID], window_ms: int) -> float:
    tick = datetime_to_ms(utcnow())
    start = time.perf_counter()
    for i in range(0, len(accounts), FLOOR_CHUNK):
        chunk = accounts[i : i + FLOOR_CHUNK]
        dues = [tick + offset_ms(a, window_ms) for a in chunk]
        with conn.transaction():
            conn.execute(
                FLOOR_INSERT,
                {
                    "accounts": chunk,
                    "payloads": Jsonb([{"dueAtMs": due} for due in dues]),
                    "etas": [ms_to_datetime(due) for due in dues],
                },
            )
    return time.perf_counter() - start


def serial(c, accounts: list[uuid.UUID]) -> float:
    """The replaced path: one submit (INSERT + enqueue) per account; ms per account."""
    start = time.perf_counter()
    for account_id in accounts:
        c.job_handlers.submit(jt.INVENTORY_SYNC, account_id=account_id)
    return (time.perf_counter() - start) * 1000 / len(accounts)


def main() -> list[Result]:
    redis_db = int(os.environ.get("BENCH_REDIS_DB", BENCH_REDIS_DB))
    with bench_settings(redis_db=redis_db) as settings:
        c = bootstrap(settings)
        schedule = c.fan_out_handlers.schedules[SCHEDULE]
        libpq = settings.libpq_url
        with psycopg.connect(libpq, autocommit=True) as conn:
            accounts = seed_accounts(conn, ACCOUNTS)
            fan_outs, floors, rows, messages = [], [], [], []
            for _ in range(ROUNDS):
                conn.execute("DELETE FROM jobs")
                c.redis.flushdb()
                seconds, result = fan_out(c, schedule)
                fan_outs.append(seconds)
                rows.append(
                    conn.execute(
                        "SELECT count(*) FROM jobs WHERE type = %s", [schedule.job_type.name]
                    ).fetchone()[0]
                )
                queue = f"{settings.broker_namespace}:{schedule.job_type.queue}.DQ.msgs"
                messages.append(c.redis.hlen(queue) + c.redis.hlen(queue.replace(".DQ", "")))
                assert result["created"] == ACCOUNTS, result
                floors.append(floor(conn, accounts, schedule.spread))
            conn.execute("DELETE FROM jobs")
            c.redis.flushdb()
            per_account = serial(c, accounts[:SERIAL_ACCOUNTS])
        c.close()
    fan_out_s, floor_s = statistics.median(fan_outs), statistics.median(floors)
    print(
        f"fan-out of {ACCOUNTS:,} accounts ({SCHEDULE}, spread {schedule.spread} ms, chunks of {settings.fan_out_chunk_size}):"
    )
    print(
        f"  rounds        {', '.join(f'{s:.2f}' for s in fan_outs)} s  (median {fan_out_s:.2f} s, target <= {TARGET_S} s)"
    )
    print(f"  rows written  {rows}; messages enqueued {messages}")
    print(
        f"  floor (bare batched INSERT of the same rows): {', '.join(f'{s:.2f}' for s in floors)} s (median {floor_s:.2f} s)"
    )
    print(f"  fan-out/floor {fan_out_s / floor_s:.2f}x the time")
    print(f"  serial submit (the path replaced), {SERIAL_ACCOUNTS:,} accounts: {per_account:.2f} ms/account "
          f"= {per_account * ACCOUNTS / 1000:.1f} s for {ACCOUNTS:,} ({fan_out_s * 1000 / ACCOUNTS:.3f} ms/account batched)")  # fmt: skip
    return [
        Result(
            "bench_fanout",
            f"fan-out of {ACCOUNTS:,} (s)",
            fan_out_s,
            TARGET_S,
            unit="s",
            higher_is_better=False,
        ),
        Result(
            "bench_fanout",
            "fan-out/floor (time)",
            fan_out_s / floor_s,
            None,
            unit="ratio",
            higher_is_better=False,
        ),
        Result(
            "bench_fanout", "serial submit (ms/account)", per_account, None, unit="ms", higher_is_better=False
        ),
    ]


if __name__ == "__main__":
    main()
