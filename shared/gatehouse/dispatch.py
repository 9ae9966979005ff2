"""Putting job messages on the Dramatiq queues, by actor name and queue: the one writer of the broker.

Producers use this without importing any worker code: a message names its
actor and queue, carries the job id and the row's message number as the
actor's two arguments, and the job id as its message id.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from dramatiq import Broker, Message
from dramatiq.common import current_millis, dq_name

from gatehouse.jobs import JobMessage


def message_for(m: JobMessage) -> Message:
    return Message(
        queue_name=m.queue,
        actor_name=m.actor,
        args=(str(m.job_id), m.number),
        kwargs={},
        options={},
        message_id=str(m.job_id),
    )


class Dispatcher:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    def send(self, m: JobMessage) -> Message:
        """Enqueue a job's message; one with a future eta goes on the delay queue."""
        delay = None
        if m.eta_ms is not None:
            remaining = m.eta_ms - current_millis()
            delay = remaining if remaining > 0 else None
        return self.broker.enqueue(message_for(m), delay=delay)

    def tick(self, queue: str, actor: str) -> Message:
        """Enqueue a periodic actor's message now (an admin's "run now"): no scheduled_at, so never stale."""
        return self.broker.enqueue(
            Message(queue_name=queue, actor_name=actor, args=(), kwargs={}, options={})
        )

    def queued_job_ids(self, queues: Iterable[str]) -> set[str]:
        """Ids of jobs with a message anywhere in the broker for these queues.

        Dramatiq's Redis broker keeps every message (queued, delayed, fetched
        but not yet acked) in ``<ns>:<queue>[.DQ].msgs`` until it is acked.
        """
        client = self.broker.client
        ids: set[str] = set()
        for queue in queues:
            # The delay queue first: a due message is enqueued on the main queue
            # before it leaves the delay queue, so this order never misses it.
            for name in (dq_name(queue), queue):
                key = f"{self.broker.namespace}:{name}.msgs"
                for _, data in client.hscan_iter(key, count=1000):
                    ids.add(json.loads(data)["message_id"])
        return ids
