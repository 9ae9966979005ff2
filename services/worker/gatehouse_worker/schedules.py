"""Periodic ticks (periodiq), cron in UTC. A tick actor is thin: it enqueues or reconciles, nothing else.

Each schedule's tick is a fan-out orchestrator: it creates one job of its type
per active account through the ordinary idempotent path and never calls WB or
takes a gate. A single-job schedule's tick (a sweep) creates one system job the
same way; the job does the work. A tick of a module that is off creates nothing
(and is not recorded as the schedule's last run).
A disabled schedule keeps its actor (an admin may still run it) but gets no cron.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime

from dramatiq import Actor, Broker
from periodiq import cron

from gatehouse import metrics
from gatehouse.accounts import Accounts
from gatehouse.job_types import MAINTENANCE_QUEUE
from gatehouse.modules import ModuleStates
from gatehouse.schedules import FANOUT_QUEUE, Schedule, ScheduleRuns

log = logging.getLogger(__name__)


def fan_out(
    schedule: Schedule,
    *,
    submit: Callable[..., tuple],
    modules: ModuleStates,
    accounts: Accounts,
    runs: ScheduleRuns,
) -> tuple[int, int]:
    """One job per active account (a single-job schedule: one job); returns (created, already running)."""
    payload = schedule.payload()
    created = running = 0
    module = schedule.module
    if module is not None and not modules.state(module.name, fresh=True).on:
        # Not a run: its last run stays the last tick that created jobs.
        log.info("%s: module %s is off; nothing created", schedule.name, module.name)
        return created, running
    for account_id in accounts.active_ids() if schedule.per_account else [None]:
        _, new = submit(schedule.job_type, account_id=account_id, payload=payload)
        created, running = created + new, running + (not new)
    runs.record_run(schedule.name, datetime.now(UTC))
    log.info("%s: %d job(s) created, %d already running", schedule.name, created, running)
    return created, running


def declare_schedules(
    broker: Broker,
    schedules: dict[str, Schedule],
    *,
    reconcile: Callable[[], int],
    reconcile_cron: str,
    fan_out: Callable[[Schedule], object],
) -> list[Actor]:
    def reconcile_tick() -> None:
        metrics.RECONCILED.inc(reconcile())

    actors = [
        Actor(
            reconcile_tick,
            broker=broker,
            actor_name="maintenance:reconcile",
            queue_name=MAINTENANCE_QUEUE,
            priority=0,
            options={"periodic": cron(reconcile_cron)},
        )
    ]
    for schedule in schedules.values():

        def tick(schedule: Schedule = schedule) -> None:
            fan_out(schedule)

        tick.__name__ = tick.__qualname__ = f"fan_out_{schedule.name.replace('-', '_')}"
        options = {"periodic": cron(schedule.cron)} if schedule.enabled else {}
        actors.append(
            Actor(
                tick,
                broker=broker,
                actor_name=schedule.actor,
                queue_name=FANOUT_QUEUE,
                priority=0,
                options=options,
            )
        )
    return actors
