"""The overview's snapshot on real PostgreSQL and Redis: counts per queue, dead letters, workers, stores down."""

from __future__ import annotations

import uuid

import pytest
from dramatiq import Message

from gatehouse import operations
from gatehouse.job_types import REGISTRY, WEBHOOK_QUEUE
from gatehouse.workers import DeadWorkers, Liveness, WorkerBeat

UP = {"postgresql": "ok", "redis": "ok"}


def snapshot(gh, stores: dict[str, str]) -> operations.Snapshot:
    """The overview as the API builds it (gatehouse_api.app.create_app)."""
    return operations.Operations(
        gh.engine, gh.redis, gh.settings.broker_namespace, gh.holds, gh.liveness
    ).snapshot(stores)


def add_job(sql, queue: str, state: str, *, worker: str | None = None, finished: str | None = None) -> None:
    sql(
        "INSERT INTO jobs (id, type, queue, tier, state, payload, worker, finished_at) "
        "VALUES (:id, 'probe', :queue, 'user', :state, '{}', :worker, "
        "CASE WHEN CAST(:finished AS text) IS NULL THEN NULL ELSE now() - CAST(:finished AS interval) END)",
        id=uuid.uuid4(), queue=queue, state=state, worker=worker, finished=finished,
    )  # fmt: skip


def by_name(snap: operations.Snapshot) -> dict[str, operations.QueueSnapshot]:
    return {q.name: q for q in snap.queues}


def test_one_statement_counts_each_queue_by_state_and_each_workers_running_rows(gh, sql):
    # Given rows of every state on two queues, failed ones inside and outside the last 24 h
    for state in ("waiting", "waiting", "delayed"):
        add_job(sql, "wb-user", state)
    add_job(sql, "wb-user", "active", worker="w-1")
    add_job(sql, "notifications.email", "active", worker="w-1")
    add_job(sql, "notifications.email", "active", worker="w-2")
    add_job(sql, "wb-user", "failed", worker="w-1", finished="1 hour")
    add_job(sql, "wb-user", "failed", worker="w-1", finished="25 hours")  # too old
    add_job(sql, "wb-user", "completed", worker="w-1", finished="1 minute")  # never counted

    with gh.engine.connect() as conn:
        counts = operations.job_counts(conn)

    assert counts.queues["wb-user"] == operations.QueueCounts(ready=2, delayed=1, running=1, failed_24h=1)
    assert counts.queues["notifications.email"] == operations.QueueCounts(running=1 + 1)
    # busy: running rows only (the failed and completed rows still name w-1)
    assert counts.busy == {"w-1": 2, "w-2": 1}


def test_the_counts_read_only_the_live_and_recently_failed_rows_through_their_partial_indexes(gh):
    # With sequential scans priced out, the statement has an index path for each branch:
    # it never needs to read the completed rows (nearly all of the table).
    with gh.engine.connect() as conn:
        conn.exec_driver_sql("SET enable_seqscan = off")
        plan = "\n".join(r[0] for r in conn.exec_driver_sql("EXPLAIN " + operations.JOB_COUNTS))
    assert "Seq Scan" not in plan, plan
    # On this near-empty table the planner may pick either partial index of the failed rows
    # (by finished_at, or newest first); both read failed rows only, never the completed ones.
    assert "jobs_failed_by_finished" in plan or "jobs_failed_newest" in plan, plan


def test_every_registry_queue_is_listed_with_zero_counts_and_a_queue_with_rows_too(gh, sql):
    add_job(sql, "probe-only-here", "waiting")
    snap = snapshot(gh, UP)
    queues = by_name(snap)
    assert set(queues) == {t.queue for t in REGISTRY.values()} | {"probe-only-here"}
    assert queues["wb-scheduled"].counts == operations.QueueCounts()
    assert queues["wb-scheduled"].dead_letters == 0 and queues["wb-scheduled"].paused is False
    assert queues["probe-only-here"].counts.ready == 1
    assert [q.name for q in snap.queues] == sorted(queues)


def test_dead_letters_are_dramatiqs_dead_letter_set_and_the_dead_webhook_deliveries(gh, sql):
    # Given a message that Dramatiq dead-lettered on notifications.email (its actor raised: nack)
    gh.broker.declare_queue("notifications.email")
    gh.broker.enqueue(
        Message(queue_name="notifications.email", actor_name="x", args=(), kwargs={}, options={})
    )
    consumer = gh.broker.consume("notifications.email", timeout=1000)
    message = next(consumer)
    consumer.nack(message)
    consumer.close()
    # … and three dead webhook deliveries beside a delivered one
    endpoint = uuid.uuid4()
    sql(
        "INSERT INTO webhook_endpoints (id, url, secret) VALUES (:id, 'http://127.0.0.1:9/h', 'x')",
        id=endpoint,
    )
    for i, status in enumerate(("dead", "dead", "dead", "delivered")):
        sql(
            "INSERT INTO webhook_deliveries (id, endpoint_id, message_id, event_type, payload, status, attempts) "
            "VALUES (:id, :e, :m, 'catalog.product.updated', '{}', :s, 8)",
            id=uuid.uuid4(), e=endpoint, m=f"msg_{i}", s=status,
        )  # fmt: skip

    queues = by_name(snapshot(gh, UP))

    assert gh.redis.zcard(f"{gh.settings.broker_namespace}:notifications.email.XQ") == 1
    assert queues["notifications.email"].dead_letters == 1
    assert queues["wb-user"].dead_letters == 0
    assert queues[WEBHOOK_QUEUE].dead_deliveries == 3
    assert queues["notifications.email"].dead_deliveries is None  # only webhook.deliver has them


def test_a_queue_whose_module_is_off_is_paused(gh):
    gh.module_handlers.set_module("webhooks", enabled=False, by="test")
    queues = by_name(snapshot(gh, UP))
    assert queues[WEBHOOK_QUEUE].paused is True and queues[WEBHOOK_QUEUE].module == "webhooks"
    assert queues["catalog.bulk-operation"].paused is False
    assert queues["wb-user"].paused is False and queues["wb-user"].module is None


def test_live_workers_say_their_threads_and_queues_and_a_dead_one_with_running_rows_shows(gh, sql):
    liveness = Liveness(gh.redis, prefix=gh.settings.broker_namespace, ttl_ms=10_000)
    liveness.beat("w-1", WorkerBeat(threads=4, queues=("wb-user", "schedules")))
    liveness.beat("w-idle", WorkerBeat(threads=2))
    add_job(sql, "wb-user", "active", worker="w-1")
    add_job(sql, "wb-user", "active", worker="w-gone")  # its worker's key is gone

    workers = {w.name: w for w in snapshot(gh, UP).workers}

    assert set(workers) == {"w-1", "w-idle", "w-gone"}
    assert workers["w-1"].alive and workers["w-1"].busy == 1 and workers["w-1"].beat.threads == 4
    assert workers["w-1"].beat.queues == ("wb-user", "schedules")
    assert workers["w-idle"].alive and workers["w-idle"].busy == 0
    # and what each one is doing: its running jobs themselves
    assert [j.type for j in workers["w-1"].jobs] == ["probe"] and workers["w-idle"].jobs == ()
    assert (
        not workers["w-gone"].alive and workers["w-gone"].busy == 1 and workers["w-gone"].beat.threads is None
    )

    # A worker that leaves is gone from the list (key and set member)
    liveness.leave("w-idle")
    assert "w-idle" not in liveness.alive() and gh.redis.zscore(liveness.workers_key, "w-idle") is None


def test_the_json_liveness_value_keeps_dead_worker_detection_working(gh):
    liveness = Liveness(gh.redis, prefix=gh.settings.broker_namespace, ttl_ms=10_000)
    liveness.beat("alive", WorkerBeat(threads=2, queues=("probe",)))
    gh.redis.set(liveness.key("old-style"), 1, px=10_000)  # what a worker before this change wrote
    dead = DeadWorkers(liveness, me="me")

    assert liveness.missing({"alive", "old-style", "gone"}) == {"gone"}
    assert dead.look({"alive", "gone"}) == set()  # one strike
    assert dead.look({"alive", "gone"}) == {"gone"}  # two
    assert WorkerBeat.loads(gh.redis.get(liveness.key("old-style"))) == WorkerBeat()
    assert gh.redis.pttl(liveness.key("alive")) > 9_000


def test_a_member_that_stopped_beating_long_ago_leaves_the_set_at_the_next_beat(gh):
    liveness = Liveness(gh.redis, prefix=gh.settings.broker_namespace, ttl_ms=1_000)
    gh.redis.zadd(liveness.workers_key, {"ancient": 1})  # last beat in 1970
    liveness.beat("w-1")
    assert gh.redis.zscore(liveness.workers_key, "ancient") is None
    assert set(liveness.alive()) == {"w-1"}


@pytest.mark.parametrize("down", ["postgresql", "redis"])
def test_a_store_that_is_down_is_not_read_and_leaves_only_its_numbers_unknown(gh, sql, down):
    add_job(sql, "wb-user", "waiting")
    Liveness(gh.redis, prefix=gh.settings.broker_namespace, ttl_ms=10_000).beat("w-1", WorkerBeat(threads=2))
    stores = {**UP, down: "down: no answer within 300 ms"}

    snap = snapshot(gh, stores)
    queues = by_name(snap)

    assert snap.stores == stores
    if down == "postgresql":
        assert queues["wb-user"].counts is None and queues["wb-user"].paused is None
        assert queues["wb-user"].dead_letters == 0
        assert queues[WEBHOOK_QUEUE].dead_deliveries is None
        assert [(w.name, w.alive, w.busy) for w in snap.workers] == [("w-1", True, None)]
    else:
        assert queues["wb-user"].counts.ready == 1 and queues["wb-user"].dead_letters is None
        assert snap.workers is None
