"""Entry points: gatehouse-worker (the dramatiq CLI) and gatehouse-scheduler (periodiq)."""

from __future__ import annotations

import logging
import os
import signal
import sys

import pendulum
from dramatiq import cli as dramatiq_cli
from periodiq import Scheduler, print_periodic_actors

from gatehouse.entrypoint import prepare_children, settings_or_exit
from gatehouse.schedules import record_next

log = logging.getLogger("periodiq")
SETUP = "gatehouse_worker.wiring:setup"
# Consumers read WB tokens, so they need the key that decrypts them.
WORKER_NEEDS = ("database_url", "redis_url", "token_encryption_key")


def worker() -> None:
    """gatehouse-worker [dramatiq options…]: consumers only, no HTTP listener.

    Extra arguments go to the dramatiq CLI (``--processes``, ``--threads``,
    ``--queues``…); they win over the defaults set here.
    """
    os.environ["BACKEND_ROLE"] = "worker"
    settings = settings_or_exit("gatehouse-worker", require=WORKER_NEEDS)
    prepare_children(settings, "gatehouse-worker")
    sys.argv = [
        "gatehouse-worker",
        SETUP,
        "--worker-shutdown-timeout",
        str(settings.shutdown_timeout_ms),
        *sys.argv[1:],
    ]
    sys.exit(dramatiq_cli.main())


class TickOnceScheduler(Scheduler):
    """periodiq's scheduler, but each tick is sent once across all schedulers.

    A Redis lock per (actor, scheduled minute) makes a second scheduler pod —
    or a restarted one inside the same minute — harmless.
    """

    def __init__(self, actors, redis) -> None:
        super().__init__(actors=actors)
        self.redis = redis

    def send_actors(self, actors, now) -> None:
        now_str = str(now)
        # periodiq's "now" carries seconds, which differ between schedulers: lock the minute.
        minute = now.strftime("%Y-%m-%dT%H:%M")
        for actor in actors:
            key = f"gatehouse:tick:{actor.actor_name}:{minute}"
            if self.redis.set(key, os.getpid(), nx=True, ex=3600):
                log.info("Scheduling %s for %s (at %s).", actor.actor_name, minute, now_str)
                actor.send_with_options(scheduled_at=now_str)
            else:
                log.info("Tick %s for %s was sent by another scheduler.", actor.actor_name, minute)

    def schedule(self) -> None:
        # Publish each schedule's next run (the API shows it without knowing cron).
        now = pendulum.now()
        for actor in self.actors:
            if actor.actor_name.startswith("schedule:"):
                name = actor.actor_name.removeprefix("schedule:")
                record_next(self.redis, name, actor.options["periodic"].next_valid_date(now))
        super().schedule()


def scheduler() -> None:
    """gatehouse-scheduler: sends the periodic ticks (cron in UTC)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    settings = settings_or_exit("gatehouse-scheduler")
    pendulum.set_local_timezone(pendulum.timezone("UTC"))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))

    from gatehouse_worker.wiring import build

    gh = build(settings)
    actors = [a for a in gh.broker.actors.values() if "periodic" in a.options]
    print_periodic_actors(actors)
    ticks = TickOnceScheduler(actors, gh.redis)
    try:
        ticks.schedule()
        ticks.loop()
    except KeyboardInterrupt:
        pass
    finally:
        gh.close()
