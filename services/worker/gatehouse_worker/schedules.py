"""Periodic ticks (periodiq). A tick actor is thin: it only enqueues or reconciles.

Cron specs are evaluated in UTC (the scheduler sets pendulum's local zone).
"""

from __future__ import annotations

from dramatiq import Actor
from periodiq import cron

from gatehouse import metrics
from gatehouse.composition import Gatehouse
from gatehouse.reconcile import reconcile

MAINTENANCE_QUEUE = "maintenance"


def declare_schedules(gh: Gatehouse) -> list[Actor]:
    def reconcile_tick() -> None:
        metrics.RECONCILED.inc(reconcile(gh.jobs, gh.dispatcher, grace_ms=gh.settings.reconcile_grace_ms))

    return [
        Actor(
            reconcile_tick,
            broker=gh.broker,
            actor_name="maintenance:reconcile",
            queue_name=MAINTENANCE_QUEUE,
            priority=0,
            options={"periodic": cron(gh.settings.reconcile_interval_cron)},
        )
    ]
