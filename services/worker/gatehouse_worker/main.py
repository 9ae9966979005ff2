"""Entry points: gatehouse-worker (the dramatiq CLI) and gatehouse-scheduler (periodiq)."""

from __future__ import annotations

import functools
import importlib
import logging
import os
import signal
import sys
import time
from datetime import timedelta

import pendulum
from dramatiq import cli as dramatiq_cli
from dramatiq.errors import BrokerConnectionError
from periodiq import print_periodic_actors
from redis import RedisError

from gatehouse import logs, traces
from gatehouse.entrypoint import prepare_children, settings_or_exit
from gatehouse.schedules import ScheduleRuns
from gatehouse.workers import process_name
from gatehouse_worker import stop_signals

log = logging.getLogger("periodiq")
SETUP = "gatehouse_worker.wiring:setup"
# Consumers read WB tokens, so they need the key that decrypts them.
WORKER_NEEDS = ("database_url", "redis_url", "token_encryption_key")
# What a Redis outage raises in the scheduler: it waits them out instead of exiting.
STORE_ERRORS = (RedisError, BrokerConnectionError)


def worker() -> None:
    """gatehouse-worker [dramatiq options…]: consumers only, no HTTP listener.

    Extra arguments go to the dramatiq CLI (``--processes``, ``--threads``,
    ``--queues``…); they win over the defaults set here.
    """
    os.environ["BACKEND_ROLE"] = "worker"
    settings = settings_or_exit("gatehouse-worker", require=WORKER_NEEDS)
    prepare_children(settings, "gatehouse-worker")  # its processes read their settings themselves
    sys.argv = [
        "gatehouse-worker",
        SETUP,
        "--worker-shutdown-timeout",
        str(settings.shutdown_timeout_ms),
        *sys.argv[1:],
    ]
    stop_signals.install()  # a signal to the whole process group stops the jobs gracefully too
    format_dramatiq_logs(settings.log_format)
    # Import the worker's code once, here: the CLI forks its processes from this one, so each starts
    # with it loaded instead of importing it at the same time as the others (most of a start-up).
    # Importing builds nothing (no connection, no thread): each process builds its own in SETUP.
    importlib.import_module(SETUP.split(":")[0])
    sys.exit(dramatiq_cli.main())


def format_dramatiq_logs(log_format: logs.LogFormat) -> None:
    """Our format for every line of the dramatiq CLI's processes.

    The CLI sets up logging in its supervisor and in each process it forks (handlers on the pipes
    the supervisor copies to stderr, levels from ``--verbose``); each of those setups is followed
    by ours, which keeps them and formats their lines. The processes are forked (the CLI's default
    before Python 3.14; not ``--use-spawn``), so they run these wrapped setups too.
    """
    for name in ("setup_parent_logging", "setup_worker_logging", "setup_fork_logging"):
        setup = getattr(dramatiq_cli, name)

        @functools.wraps(setup)
        def formatted(*args, _setup=setup, **kwargs):
            logger = _setup(*args, **kwargs)
            logs.use_format(log_format)
            return logger

        setattr(dramatiq_cli, name, formatted)


def tick_key(prefix: str, actor_name: str, minute: str) -> str:
    """The lock that lets one scheduler, and only one, send a tick for a minute."""
    return f"{prefix}:tick:{actor_name}:{minute}"


class TickOnceScheduler:
    """periodiq's cron ticks, sent once across all schedulers, riding out Redis outages.

    A Redis lock per (actor, scheduled minute) makes a second scheduler pod —
    or a restarted one inside the same minute — harmless. Redis being down (at
    start or at a tick) never stops the loop: the tick is owed and sent, one
    per actor, as soon as Redis answers again (retried every few seconds), and
    each schedule's next run is published again then, since a restarted Redis
    may have lost it. One warning per outage, one line when it ends.
    """

    RETRY_S = (1, 2, 5)  # waits between tries while Redis does not answer, then the last one

    def __init__(self, actors, redis, runs: ScheduleRuns, *, prefix: str) -> None:
        self.actors = actors
        self.redis = redis
        self.runs = runs
        self.prefix = prefix  # of the tick locks: the schedulers of one deployment share them
        self.owner = process_name()  # this scheduler's locks
        self.owed: dict[str, tuple[object, str]] = {}  # actor name -> (actor, minute) not sent yet
        self.seen: dict[str, str] = {}  # actor name -> latest minute it came due
        self.failures = 0  # consecutive wakes on which Redis did not answer

    def _owe(self, actor, now) -> None:
        # periodiq's "now" carries seconds, which differ between schedulers: lock the minute.
        minute = now.strftime("%Y-%m-%dT%H:%M")
        if self.seen.get(actor.actor_name) != minute:  # a retry wake inside the minute owes nothing new
            self.seen[actor.actor_name] = minute
            self.owed[actor.actor_name] = (actor, minute)  # a newer tick replaces an older unsent one

    def _send_owed(self, now) -> None:
        for name, (actor, minute) in list(self.owed.items()):
            key = tick_key(self.prefix, name, minute)
            # Our own lock from a try whose send failed still lets us send.
            if (
                self.redis.set(key, self.owner, nx=True, ex=3600)
                or self.redis.get(key) == self.owner.encode()
            ):
                late = "" if now.strftime("%Y-%m-%dT%H:%M") == minute else ", late: Redis was down"
                log.info("Scheduling %s for %s (at %s%s).", name, minute, now, late)
                # A tick starts a trace; its run, fan-out and jobs continue or link to it.
                with traces.span(f"tick {name}", {"gatehouse.tick.minute": minute}):
                    # scheduled_at is the real send time, so a late tick is not dropped as stale by consumers.
                    actor.send_with_options(scheduled_at=str(now), **traces.carried())
            else:
                log.info("Tick %s for %s was sent by another scheduler.", name, minute)
            del self.owed[name]

    def _publish_next_runs(self, now) -> None:
        # Each schedule's next run (the API shows it without knowing cron).
        for actor in self.actors:
            if actor.actor_name.startswith("schedule:"):
                name = actor.actor_name.removeprefix("schedule:")
                self.runs.record_next(name, actor.options["periodic"].next_valid_date(now))

    def schedule(self) -> float:
        """One wake: publish next runs, send what is due or still owed; returns seconds to sleep."""
        # As periodiq does: a wake just before a minute counts for that minute.
        now = (pendulum.now() + timedelta(seconds=0.5)).replace(microsecond=0)
        for actor in self.actors:
            if actor.options["periodic"].validate(now):
                self._owe(actor, now)
        try:
            self._publish_next_runs(now)
            self._send_owed(now)
        except STORE_ERRORS as exc:
            self.failures += 1
            retry_s = self.RETRY_S[min(self.failures, len(self.RETRY_S)) - 1]
            if self.failures == 1:
                log.warning(
                    "Redis does not answer (%s: %s); %d tick(s) owed, trying again every %d s or less.",
                    type(exc).__name__, exc, len(self.owed), self.RETRY_S[-1],
                )  # fmt: skip
            else:
                log.debug("Redis still does not answer (%s).", exc)
        else:
            if self.failures:
                log.info(
                    "Redis answers again after %d failed tries; ticks and next runs are sent.", self.failures
                )
            self.failures = 0
            retry_s = None
        next_date = min(
            (a.options["periodic"].next_valid_date(now) for a in self.actors), default=now.add(hours=1)
        )
        delay_s = (next_date - pendulum.now()).total_seconds()
        return max(0.0, delay_s if retry_s is None else min(delay_s, retry_s))

    def loop(self) -> None:
        while True:
            time.sleep(self.schedule())


def scheduler() -> None:
    """gatehouse-scheduler: sends the periodic ticks (cron in UTC)."""
    settings = settings_or_exit("gatehouse-scheduler")
    logs.configure(settings.log_format, settings.log_level)
    pendulum.set_local_timezone(pendulum.timezone("UTC"))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))

    from gatehouse_worker.wiring import build

    traces.setup("gatehouse-scheduler")
    built = build(settings)
    actors = [a for a in built.broker.actors.values() if "periodic" in a.options]
    print_periodic_actors(actors)
    ticks = TickOnceScheduler(actors, built.redis, built.schedule_runs, prefix=settings.broker_namespace)
    try:
        ticks.loop()
    except KeyboardInterrupt:
        pass
    finally:
        built.close()
        traces.shutdown()
