"""Putting job messages on the Dramatiq queues, by actor name and queue: the one writer of the broker.

Producers use this without importing any worker code: a message names its
actor and queue, carries the job id and the row's message number as the
actor's two arguments, and the job id as its message id. Its options carry the
sender's trace context when traces are on (gatehouse.traces).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Sequence

from dramatiq import Message
from dramatiq.brokers.redis import RedisBroker
from dramatiq.common import current_millis, dq_name

from gatehouse import traces
from gatehouse.jobs import JobMessage


def message_for(m: JobMessage) -> Message:
    return Message(
        queue_name=m.queue,
        actor_name=m.actor,
        args=(str(m.job_id), m.number),
        kwargs={},
        options=traces.carried(),
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

        ``RedisBroker.enqueue`` runs its ``dispatch.lua`` once per message: ``HSET
        <queue>.msgs id data`` and ``RPUSH <queue> id`` (``.DQ`` with an eta), plus a
        ``ZADD`` of the sender to the broker's heartbeats. Many are written here as
        exactly that, in one MULTI per batch: the same keys and the same message data
        (built as ``enqueue`` builds it), one HSET and one RPUSH per queue, so a
        fan-out's thousand messages cost one round trip, not a thousand script calls.
        The MULTI keeps each id from being listed before its data is stored, as the
        script does. (The script's occasional dead-worker maintenance is left to the
        broker's own calls, which run it as often.) If the batch fails, none is sent:
        the caller logs it and reconciliation sends them (the claim makes any
        duplicate a no-op).
        """
        if len(messages) == 1:
            self.send(messages[0])
            return
        if not messages:
            return
        broker = self.broker
        queues: dict[str, tuple[list[str], dict[str, bytes]]] = {}
        sent = []
        carried = traces.carried()  # one context for the batch: the code that sent it
        for m in messages:
            # What RedisBroker.enqueue makes of a message, in one step instead of its copies.
            delay = _delay(m)
            options: dict[str, object] = {"redis_message_id": str(uuid.uuid4()), **carried}
            queue = m.queue
            if delay is not None:
                queue, options["eta"] = dq_name(queue), current_millis() + delay
            message = Message(
                queue_name=queue,
                actor_name=m.actor,
                args=(str(m.job_id), m.number),
                kwargs={},
                options=options,
                message_id=str(m.job_id),
            )
            broker.emit_before("enqueue", message, delay)
            ids, data = queues.setdefault(queue, ([], {}))
            ids.append(options["redis_message_id"])
            data[options["redis_message_id"]] = message.encode()
            sent.append((message, delay))
        pipe = broker.client.pipeline(transaction=True)
        for queue, (ids, data) in queues.items():
            pipe.hset(f"{broker.namespace}:{queue}.msgs", mapping=data)
            pipe.rpush(f"{broker.namespace}:{queue}", *ids)
        pipe.zadd(f"{broker.namespace}:__heartbeats__", {broker.broker_id: current_millis()})
        pipe.execute()
        for message, delay in sent:
            broker.emit_after("enqueue", message, delay)

    def tick(self, queue: str, actor: str) -> Message:
        """Enqueue a periodic actor's message now (an admin's "run now"): no scheduled_at, so never stale."""
        return self.broker.enqueue(
            Message(queue_name=queue, actor_name=actor, args=(), kwargs={}, options=traces.carried())
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
