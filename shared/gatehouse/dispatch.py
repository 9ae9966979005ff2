"""Putting job messages on the Dramatiq queues, by actor name and queue: the one writer of the broker.

Producers use this without importing any worker code: a message names its
actor and queue, carries the job id and the row's message number as the
actor's two arguments, and the job id as its message id.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Sequence

from dramatiq import Message
from dramatiq.brokers.redis import RedisBroker
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


def _delay(m: JobMessage) -> int | None:
    if m.eta_ms is None:
        return None
    remaining = m.eta_ms - current_millis()
    return remaining if remaining > 0 else None


class Dispatcher:
    def __init__(self, broker: RedisBroker) -> None:
        self.broker = broker

    def send(self, m: JobMessage) -> Message:
        """Enqueue a job's message; one with a future eta goes on the delay queue."""
        return self.broker.enqueue(message_for(m), delay=_delay(m))

    def send_all(self, messages: Sequence[JobMessage]) -> None:
        """Enqueue these messages: one alone as ``send`` does, more in one round trip.

        Many are the broker's own enqueue (its ``dispatch.lua`` with the arguments
        ``RedisBroker.enqueue`` gives it, the message encoded as it encodes it) called
        through one pipeline, so a fan-out of a thousand jobs costs one round trip,
        not a thousand. A failure part way leaves some sent: the caller logs it and
        reconciliation sends the rest (the claim makes any duplicate a no-op).
        """
        if len(messages) == 1:
            self.send(messages[0])
            return
        if not messages:
            return
        broker = self.broker
        dispatch = broker.scripts["dispatch"]
        pipe = broker.client.pipeline(transaction=False)
        sent = []
        for m in messages:
            # What RedisBroker.enqueue does to a message before its dispatch call.
            delay = _delay(m)
            message = message_for(m).copy(options={"redis_message_id": str(uuid.uuid4())})
            if delay is not None:
                message = message.copy(
                    queue_name=dq_name(message.queue_name), options={"eta": current_millis() + delay}
                )
            broker.emit_before("enqueue", message, delay)
            dispatch(
                keys=[broker.namespace],
                args=[
                    "enqueue",
                    current_millis(),
                    message.queue_name,
                    broker.broker_id,
                    broker.heartbeat_timeout,
                    broker.dead_message_ttl,
                    broker._should_do_maintenance("enqueue"),
                    broker._max_unpack_size(),
                    message.options["redis_message_id"],
                    message.encode(),
                ],
                client=pipe,
            )
            sent.append((message, delay))
        pipe.execute()
        for message, delay in sent:
            broker.emit_after("enqueue", message, delay)

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
