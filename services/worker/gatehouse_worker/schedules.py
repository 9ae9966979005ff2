"""Periodic ticks (periodiq), cron in UTC. A tick actor is thin: it hands its schedule to the tick use case.

A per-account schedule's tick creates its fan-out job, which writes the jobs of
its accounts in chunks, each spread over the schedule's window; a single-job
schedule's tick (a sweep) creates its one system job; a tick of a module that is
off creates nothing (gatehouse.fanout). A disabled schedule keeps its actor (an
admin may still run it) but gets no cron. A tick's run is a span, the child of
the scheduler's (or the admin's request's) that sent it (gatehouse.traces).
"""

from __future__ import annotations

from collections.abc import Callable

from dramatiq import Actor, Broker
from dramatiq.middleware import CurrentMessage
from periodiq import cron

from gatehouse import metrics, traces
from gatehouse.job_types import MAINTENANCE_QUEUE
from gatehouse.schedules import FANOUT_QUEUE, Schedule


def declare_schedules(
    broker: Broker,
    schedules: dict[str, Schedule],
    *,
    reconcile: Callable[[], int],
    reconcile_cron: str,
    tick: Callable[[Schedule], object],
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

        def schedule_tick(schedule: Schedule = schedule) -> None:
            attributes = {"gatehouse.schedule": schedule.name}
            with traces.consume(f"tick {schedule.actor}", CurrentMessage.get_current_message(), attributes):
                tick(schedule)

        schedule_tick.__name__ = schedule_tick.__qualname__ = f"tick_{schedule.name.replace('-', '_')}"
        options = {"periodic": cron(schedule.cron)} if schedule.enabled else {}
        actors.append(
            Actor(
                schedule_tick,
                broker=broker,
                actor_name=schedule.actor,
                queue_name=FANOUT_QUEUE,
                priority=0,
                options=options,
            )
        )
    return actors
