"""Bare Dramatiq (dramatiq bench.peers.dramatiq_app …): a Redis broker, no middleware, one actor."""

from __future__ import annotations

import os

import dramatiq
import redis
from dramatiq.brokers.redis import RedisBroker

client = redis.Redis.from_url(os.environ["PEERS_REDIS_URL"])
broker = RedisBroker(client=client, namespace="peers-dramatiq", middleware=[])
dramatiq.set_broker(broker)


@dramatiq.actor(actor_name="noop", queue_name="peers")
def noop() -> None:
    client.incr(os.environ["PEERS_DONE_KEY"])
