"""Celery's app (celery -A bench.peers.celery_app worker …): Redis as the broker, no result backend."""

from __future__ import annotations

import os

import redis
from celery import Celery

app = Celery("peers", broker=os.environ["PEERS_REDIS_URL"])
app.conf.update(worker_hijack_root_logger=False, broker_connection_retry_on_startup=True)
done = redis.Redis.from_url(os.environ["PEERS_REDIS_URL"])


@app.task(name="noop", ignore_result=True)
def noop() -> None:
    done.incr(os.environ["PEERS_DONE_KEY"])
