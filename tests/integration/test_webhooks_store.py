"""The webhooks' SQL against real PostgreSQL, in this process: the outbox, domain events, replays, secrets.

No worker runs and nothing is ever sent to an endpoint: the endpoints point at loopback
(allowlisted here), and every run of a delivery job is played by calling ``begin_run`` /
``end_run``. The job messages a unit of work sends after its commit are read back from
the broker's queue (``queued``): nobody consumes them here.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest
from dramatiq import Message
from dramatiq.common import dq_name, q_name
from sqlalchemy import text
from sqlmodel import Session

from gatehouse import progress as P
from gatehouse import run_decision as rd
from gatehouse.catalog import NewProduct, Price, ProductPatch
from gatehouse.catalog.bulk import Selection
from gatehouse.composition import Components, bootstrap
from gatehouse.errors import Conflict, NotFound
from gatehouse.events import Event, EventBus
from gatehouse.job_types import IMPORT_USER_FEEDS, WEBHOOK_DELIVER, WEBHOOK_QUEUE, WEBHOOK_REPLAY
from gatehouse.models import Account
from gatehouse.uow import UnitOfWork
from gatehouse.webhooks import signing
from gatehouse.webhooks.store import Answer, Attempt, Run
from gatehouse_worker.jobs.webhooks import replay_dead as replay_dead_body
from gatehouse_worker.runtime import bind
from gatehouse_worker.wiring import body_collaborators, job_runtime
from tests.support.processes import wait_until

LOOPBACK = ["127.0.0.0/8", "::1"]
URL = "http://127.0.0.1:9/hook"  # allowlisted, never contacted: no worker runs


def _make(settings, **overrides) -> Components:
    return bootstrap(settings.model_copy(update={"webhook_allowed_hosts": LOOPBACK, **overrides}))


@pytest.fixture
def wh(settings, clean) -> Iterator[Components]:
    gatehouse = _make(settings)
    yield gatehouse
    gatehouse.close()


@pytest.fixture
def db(wh):
    def run(statement: str, **params: object) -> list:
        with wh.engine.begin() as conn:
            result = conn.execute(text(statement), params)
            return list(result) if result.returns_rows else []

    return run


def endpoint(wh: Components, event_types=None, description: str = "") -> uuid.UUID:
    return wh.webhook_handlers.create_endpoint(
        URL, event_types=event_types, description=description
    ).endpoint.id


@dataclass(frozen=True)
class Sent:
    """A job message on the broker's queue (what a unit of work sent after its commit)."""

    job_id: uuid.UUID
    queue: str
    actor: str
    number: int
    eta_ms: int | None  # None: due at once (on the queue itself, not on its delay queue)


def queued(wh: Components) -> dict[str, Sent]:
    """Every message on the webhooks' queue and its delay queue, by its id in Redis."""
    found = {}
    for name in (WEBHOOK_QUEUE, dq_name(WEBHOOK_QUEUE)):
        for key, data in wh.redis.hscan_iter(f"{wh.broker.namespace}:{name}.msgs", count=1000):
            m = Message.decode(data)
            job_id, number = m.args
            found[key] = Sent(
                uuid.UUID(job_id), q_name(m.queue_name), m.actor_name, number, m.options.get("eta")
            )
    return found


class Sending:
    """What was sent after the commit of the units of work inside the block: ``.sent``."""

    def __init__(self, wh: Components) -> None:
        self.wh = wh
        self.sent: list[Sent] = []

    def __enter__(self) -> Sending:
        self.before = queued(self.wh)
        return self

    def __exit__(self, *exc: object) -> None:
        self.sent = [m for key, m in queued(self.wh).items() if key not in self.before]


def publish(wh: Components, *events: Event) -> list[Sent]:
    """The events raised in one unit of work; returns the job messages sent after its commit."""
    with Sending(wh) as sending, wh.uow.begin() as tx:
        tx.publish(*events)
    return sending.sent


def send_test(wh: Components, endpoint_id: uuid.UUID) -> tuple[uuid.UUID, list[Sent]]:
    with Sending(wh) as sending:
        delivery_id = wh.webhook_handlers.send_test(endpoint_id)
    return delivery_id, sending.sent


def replay(wh: Components, delivery_id: uuid.UUID) -> list[Sent]:
    with Sending(wh) as sending:
        wh.webhook_handlers.replay(delivery_id)
    return sending.sent


def begin_run(wh: Components, job_id: uuid.UUID) -> Run | str:
    with wh.uow.begin() as tx:
        return wh.webhooks.begin_run(tx, job_id)


def end_run(wh: Components, run: Run, answered, **kwargs) -> int:
    with wh.uow.begin() as tx:
        return wh.webhooks.end_run(tx, run, answered, **kwargs)


def deliveries(db, **where) -> list:
    clause = " AND ".join(f"{k} = :{k}" for k in where) or "true"
    return db(
        "SELECT id, endpoint_id, message_id, event_type, payload, status, attempts, job_id "
        f"FROM webhook_deliveries WHERE {clause} ORDER BY created_at, id",
        **where,
    )


def deliver_jobs(db) -> dict:
    rows = db(
        "SELECT id, type, queue, tier, state, max_attempts, payload, message_number, account_id "
        "FROM jobs WHERE type = 'webhook.deliver'"
    )
    return {r.id: r for r in rows}


def events_of(db, event_type: str) -> list[dict]:
    return [d.payload for d in deliveries(db, event_type=event_type)]


def begin(wh: Components, delivery_id: uuid.UUID) -> Run:
    """A run of the job of the delivery's current series (a send_test's: that delivery alone)."""
    run = begin_run(wh, wh.webhooks.get_delivery(delivery_id)[0].job_id)
    assert isinstance(run, Run), run
    assert [a.delivery_id for a in run.attempts] == [delivery_id]
    return run


def play(wh: Components, delivery_id: uuid.UUID, status: str, code: int = 500) -> Attempt:
    """One attempt of the delivery's current series, ending in ``status`` (what the job body does)."""
    run = begin(wh, delivery_id)
    [attempt] = run.attempts
    end_run(wh, run, [(attempt, Answer(code, 12), status)])
    return attempt


def assert_shape(payload: dict, event_type: str) -> dict:
    assert set(payload) == {"type", "timestamp", "data"}, payload
    assert payload["type"] == event_type
    at = datetime.fromisoformat(payload["timestamp"])
    assert at.tzinfo is not None and abs(datetime.now(UTC) - at) < timedelta(minutes=1)
    return payload["data"]


def products(wh: Components, n: int) -> list[uuid.UUID]:
    wh.catalog_handlers.create_products(
        [NewProduct(sku=f"WH-{i:04d}", name=f"p{i}", price=Price(100, "PLN")) for i in range(n)]
    )
    return [p.id for p in wh.catalog.list_products(limit=10_000)]


def bulk(wh: Components, ids):
    """A bulk operation (run at once up to BULK_SYNC_THRESHOLD, 50, products); returns it and what was sent."""
    assert wh.catalog_handlers.sync_threshold == 50
    request = {"productIds": [str(i) for i in ids], "patch": {"status": "active"}}
    with Sending(wh) as sending:
        op = wh.catalog_handlers.create_bulk_operation(
            Selection(product_ids=tuple(ids)), ProductPatch(status="active"), request,
            requester=None, actor="admin",
        )  # fmt: skip
    return op, sending.sent


def run_batch(wh: Components, op_id: uuid.UUID, size: int):
    """One batch of the operation in its own unit of work (what the job body does): the batch and what was sent."""
    with Sending(wh) as sending, wh.uow.begin() as tx:
        batch = wh.bulk.run_batch(tx, op_id, size, actor="admin")
    return batch, sending.sent


def run_batches(wh: Components, op_id: uuid.UUID, size: int) -> list[list[Sent]]:
    """Its batches until there is nothing left to do: what each one sent."""
    sent = []
    while True:
        batch, sending = run_batch(wh, op_id, size)
        if batch is None:
            assert sending == []
            return sent
        sent.append(sending)


# -- the outbox ----------------------------------------------------------------------------


def test_an_event_is_one_delivery_and_one_job_per_enabled_subscribed_endpoint(wh, db):
    every = endpoint(wh)
    products_only = endpoint(wh, event_types=["catalog.product.updated"])
    endpoint(wh, event_types=["wb.job.failed", "catalog.bulk_operation.completed"])  # another type
    off = endpoint(wh)
    wh.webhook_handlers.update_endpoint(off, enabled=False)
    event = Event("catalog.product.updated", {"productIds": ["p-1"], "actor": "admin"})

    sent = publish(wh, event)

    rows = deliveries(db)
    assert {d.endpoint_id for d in rows} == {every, products_only}  # none for the disabled one
    assert {(d.message_id, d.event_type, d.status, d.attempts) for d in rows} == {
        (event.id, "catalog.product.updated", "pending", 0)
    }
    assert event.id.startswith("msg_") and all(d.payload == event.payload() for d in rows)
    jobs = deliver_jobs(db)
    assert set(jobs) == {d.job_id for d in rows}
    for d in rows:
        job = jobs[d.job_id]
        assert (job.type, job.queue, job.tier, job.state, job.max_attempts, job.account_id) == (
            "webhook.deliver", WEBHOOK_DELIVER.queue, "user", "waiting", 8, None,
        )  # fmt: skip
        assert job.payload == {"endpointId": str(d.endpoint_id), "deliveries": 1}
    # … and what the unit of work sends after commit is exactly those job rows
    assert sorted((s.job_id, s.queue, s.actor, s.number) for s in sent) == sorted(
        (j.id, j.queue, j.type, j.message_number) for j in jobs.values()
    )
    assert all(s.eta_ms is None for s in sent)  # the first delay of the schedule is 0: at once


def test_no_endpoint_or_no_subscriber_means_no_row(wh, db):
    assert publish(wh, Event("wb.job.completed", {})) == []
    endpoint(wh, event_types=["wb.job.failed"])
    assert publish(wh, Event("wb.job.completed", {})) == []
    assert deliveries(db) == [] and deliver_jobs(db) == {}


def test_the_events_of_one_transaction_make_one_job_per_endpoint_batch_of_webhook_batch_size(wh, db):
    wh.webhooks.batch_size = 3  # WEBHOOK_BATCH_SIZE
    every = endpoint(wh)
    products_only = endpoint(wh, event_types=["catalog.product.updated"])
    events = [Event("catalog.product.updated", {"n": i}) for i in range(7)] + [
        Event("wb.job.failed", {"n": 7})
    ]

    sent = publish(wh, *events)

    jobs = deliver_jobs(db)
    assert sorted(s.job_id for s in sent) == sorted(jobs)
    index = {e.id: i for i, e in enumerate(events)}
    batches: dict[uuid.UUID, dict[uuid.UUID, set[int]]] = {every: {}, products_only: {}}
    for d in deliveries(db):
        batches[d.endpoint_id].setdefault(d.job_id, set()).add(index[d.message_id])
        assert jobs[d.job_id].payload["endpointId"] == str(d.endpoint_id)
    # each endpoint's deliveries in the events' order, three to a job
    assert sorted(batches[every].values(), key=min) == [{0, 1, 2}, {3, 4, 5}, {6, 7}]
    assert sorted(batches[products_only].values(), key=min) == [{0, 1, 2}, {3, 4, 5}, {6}]
    for by_job in batches.values():
        for job_id, members in by_job.items():
            assert jobs[job_id].payload["deliveries"] == len(members)


def test_a_run_attempts_each_undelivered_delivery_of_its_job_and_the_next_run_those_left(wh, db):
    endpoint(wh)
    events = [Event("webhook.test", {"n": i}) for i in range(4)]
    [job] = publish(wh, *events)

    run = begin_run(wh, job.job_id)

    assert {a.message_id for a in run.attempts} == {e.id for e in events}
    assert {a.number for a in run.attempts} == {1} and run.url == URL
    assert {(d.status, d.attempts) for d in deliveries(db)} == {("delivering", 1)}
    ok, bad, unsent_a, unsent_b = run.attempts
    end_run(
        wh,
        run,
        [(ok, Answer(204, 3), "delivered"), (bad, Answer(500, 4, excerpt="down"), "failed")],
        unsent=[unsent_a, unsent_b],  # the run stopped before sending these: back as they were
    )
    status = {d.id: (d.status, d.attempts) for d in deliveries(db)}
    assert status == {
        ok.delivery_id: ("delivered", 1), bad.delivery_id: ("failed", 1),
        unsent_a.delivery_id: ("pending", 0), unsent_b.delivery_id: ("pending", 0),
    }  # fmt: skip
    attempts = db("SELECT delivery_id, attempt, status_code, response_excerpt FROM webhook_attempts")
    assert sorted((a.delivery_id, a.attempt, a.status_code, a.response_excerpt) for a in attempts) == sorted(
        [(ok.delivery_id, 1, 204, None), (bad.delivery_id, 1, 500, "down")]
    )

    second = begin_run(wh, job.job_id)  # the job's retry: only the undelivered ones
    assert {(a.delivery_id, a.number, a.was) for a in second.attempts} == {
        (bad.delivery_id, 2, "failed"), (unsent_a.delivery_id, 1, "pending"), (unsent_b.delivery_id, 1, "pending"),
    }  # fmt: skip
    third = begin_run(wh, job.job_id)  # a run that took over from one that lost its lease
    late = [(a, Answer(204, 5), "delivered") for a in second.attempts]
    end_run(wh, second, late)  # the lost run's answers: recorded, but they move nothing
    assert {d.id: d.status for d in deliveries(db) if d.id != ok.delivery_id} == dict.fromkeys(
        (bad.delivery_id, unsent_a.delivery_id, unsent_b.delivery_id), "delivering"
    )
    end_run(wh, third, [(a, Answer(204, 5), "delivered") for a in third.attempts])
    assert {d.status for d in deliveries(db)} == {"delivered"}
    assert begin_run(wh, job.job_id) == "already-delivered"
    [(n,)] = db("SELECT count(*) FROM webhook_attempts WHERE status_code = 204")
    assert n == 1 + 3 + 3


def test_an_event_whose_transaction_rolls_back_leaves_no_delivery_and_no_job(wh, db):
    endpoint(wh)
    endpoint(wh)

    with pytest.raises(RuntimeError, match="the change failed"), wh.uow.begin() as tx:
        tx.publish(Event("catalog.product.updated", {"productIds": []}))
        assert len(tx.messages) == 2  # written in the transaction, to be sent after its commit …
        assert tx.conn.execute(text("SELECT count(*) FROM webhook_deliveries")).scalar() == 2
        raise RuntimeError("the change failed")

    assert deliveries(db) == [] and deliver_jobs(db) == {}  # … and gone with it
    assert queued(wh) == {}  # nothing sent


def test_a_test_event_goes_to_that_endpoint_only_whatever_it_subscribes_to(wh, db):
    mine = endpoint(wh, event_types=["wb.job.failed"])
    endpoint(wh)

    delivery_id, sent = send_test(wh, mine)

    [d] = deliveries(db)
    assert (d.id, d.endpoint_id, d.event_type, d.status) == (delivery_id, mine, "webhook.test", "pending")
    assert assert_shape(d.payload, "webhook.test")["endpointId"] == str(mine)
    assert [s.job_id for s in sent] == [d.job_id]
    wh.webhook_handlers.update_endpoint(mine, enabled=False)
    with pytest.raises(Conflict) as refused:
        wh.webhook_handlers.send_test(mine)
    assert refused.value.code == "ENDPOINT_DISABLED"
    with pytest.raises(NotFound):
        wh.webhook_handlers.send_test(uuid.uuid4())


# -- domain events of existing operations ----------------------------------------------------


def test_a_product_patch_raises_product_updated_with_its_id(wh, db):
    endpoint(wh)
    p = wh.catalog_handlers.create_product(NewProduct(sku="W-1", name="Stół", price=Price(100, "PLN")))
    assert deliveries(db) == []  # creating raises nothing

    wh.catalog_handlers.patch_product(p.id, ProductPatch(name="Stół dębowy"), actor="admin")

    [payload] = events_of(db, "catalog.product.updated")
    assert assert_shape(payload, "catalog.product.updated") == {"productIds": [str(p.id)], "actor": "admin"}
    [job] = deliver_jobs(db).values()
    assert job.state == "waiting"


def test_a_small_bulk_operation_raises_one_product_updated_and_one_completed(wh, db):
    endpoint(wh)
    ids = products(wh, 5)

    op, sent = bulk(wh, ids)

    assert op.status == "completed"
    [updated] = events_of(db, "catalog.product.updated")
    data = assert_shape(updated, "catalog.product.updated")
    assert sorted(data["productIds"]) == sorted(map(str, ids))
    assert (data["operationId"], data["actor"]) == (str(op.id), "admin")
    [completed] = events_of(db, "catalog.bulk_operation.completed")
    data = assert_shape(completed, "catalog.bulk_operation.completed")
    assert (data["operationId"], data["type"], data["status"], data["error"]) == (
        str(op.id), "product_bulk_update", "completed", None,
    )  # fmt: skip
    assert data["counters"] == {"total": 5, "processed": 5, "succeeded": 5, "failed": 0}
    assert len(deliveries(db)) == 2
    assert sorted(s.job_id for s in sent) == sorted(deliver_jobs(db))  # both sent after the commit


def test_a_batched_bulk_operation_raises_one_product_updated_per_batch_and_one_completed(wh, db):
    endpoint(wh)
    ids = products(wh, 51)
    op, _ = bulk(wh, ids)
    assert op.status == "pending" and deliveries(db) == []

    sent = [len(s) for s in run_batches(wh, op.id, 20)]

    assert sent == [1, 1, 2]  # one endpoint: each batch's event, and the end's with the last one
    batches = [
        assert_shape(p, "catalog.product.updated")["productIds"]
        for p in events_of(db, "catalog.product.updated")
    ]
    assert sorted(len(b) for b in batches) == [11, 20, 20]
    assert sorted(i for b in batches for i in b) == sorted(map(str, ids))  # each product once
    [completed] = events_of(db, "catalog.bulk_operation.completed")
    assert assert_shape(completed, "catalog.bulk_operation.completed")["counters"]["succeeded"] == 51
    assert run_batch(wh, op.id, 20) == (None, [])  # a duplicate run raises nothing more
    assert len(deliveries(db)) == 4


def test_a_failed_bulk_operation_raises_bulk_operation_failed(wh, db):
    endpoint(wh, event_types=["catalog.bulk_operation.failed"])
    op, _ = bulk(wh, products(wh, 51))

    with Sending(wh) as sending, wh.uow.begin() as tx:
        wh.bulk.fail(tx, op.id, {"code": "boom", "message": "it broke"})
    sent = sending.sent

    [payload] = events_of(db, "catalog.bulk_operation.failed")
    data = assert_shape(payload, "catalog.bulk_operation.failed")
    assert (data["operationId"], data["status"], data["error"]) == (
        str(op.id), "failed", {"code": "boom", "message": "it broke"},
    )  # fmt: skip
    assert [s.job_id for s in sent] == list(deliver_jobs(db))
    with Sending(wh) as again, wh.uow.begin() as tx:
        wh.bulk.fail(tx, op.id, {"code": "boom"})
    assert again.sent == [] and len(deliveries(db)) == 1  # already failed: no second event


def test_a_search_reindex_raises_search_reindex_completed_at_its_end(wh, db):
    endpoint(wh)
    products(wh, 3)
    reindex = wh.catalog_handlers.start_reindex(requester=None)
    op_id = reindex.operation.id

    steps = run_batches(wh, op_id, 2)

    assert [len(s) for s in steps] == [0, 1]
    assert [d.event_type for d in deliveries(db)] == ["catalog.search_reindex.completed"]
    [payload] = events_of(db, "catalog.search_reindex.completed")
    data = assert_shape(payload, "catalog.search_reindex.completed")
    assert (data["operationId"], data["type"], data["status"]) == (str(op_id), "search_reindex", "completed")
    assert data["counters"] == {"total": 3, "processed": 3, "succeeded": 3, "failed": 0}


# -- wb.job.* from the job outcome's transaction ----------------------------------------------


def wb_job(wh: Components):
    with Session(wh.engine) as s:
        acc = Account(name=f"acc-{uuid.uuid4().hex[:6]}")
        s.add(acc)
        s.commit()
        account_id = acc.id
    job, _ = wh.job_handlers.submit(IMPORT_USER_FEEDS, account_id=account_id)  # its message: no worker here
    return job


class Outcome:
    """The pipeline's outcome write (JobRuntime._finish, as JobRuntime._apply calls it): the row, and
    its event's outbox rows in the same unit of work. The runtime's unit of work has an event bus of
    its own here, whose one subscriber is the webhooks' outbox (``outbox``, counted in ``calls``)."""

    def __init__(self, wh: Components, outbox=None) -> None:
        self.wh = wh
        self.calls = 0
        self.sent: list[Sent] = []
        self.outbox = outbox or wh.webhooks.outbox
        bus = EventBus(emits=wh.modules.emits)
        bus.subscribe(self._outbox)
        self.runtime = job_runtime(wh)
        self.runtime.uow = UnitOfWork(wh.engine, wh.statements, bus, wh.dispatcher.send_all)

    def _outbox(self, tx, events) -> None:
        self.calls += 1
        self.outbox(tx, events)

    def finish(self, claim, t: rd.Transition) -> bool:
        """True when the outcome was written (the run still held the row), as JobStore.finish answers."""
        state = "failed" if t.kind == "fail" else "completed"
        with Sending(self.wh) as sending:
            self.runtime._finish(IMPORT_USER_FEEDS, claim, state, P.stored(t.phase, reason=t.reason), t, None)
        self.sent = sending.sent
        row = self.wh.jobs.get(claim.job_id)
        return (row.state, row.claims) == (state, claim.claims)


def test_a_job_outcome_writes_its_wb_job_event_in_the_outcome_transaction(wh, db):
    every = endpoint(wh)
    failures = endpoint(wh, event_types=["wb.job.failed"])
    ok, bad = wb_job(wh), wb_job(wh)

    out = Outcome(wh)
    done = rd.Transition("complete", P.COMPLETED, result={"rows": 3})
    assert out.finish(wh.jobs.claim(ok.id, 1, 60_000, start=True), done) is True

    [completed] = deliveries(db, event_type="wb.job.completed")
    assert completed.endpoint_id == every
    data = assert_shape(completed.payload, "wb.job.completed")
    assert data == {
        "jobId": str(ok.id), "type": IMPORT_USER_FEEDS.name, "accountId": str(ok_account(wh, ok.id)),
        "state": "completed", "result": {"rows": 3}, "error": None,
    }  # fmt: skip
    assert [d.job_id for d in out.sent] == [completed.job_id]
    assert wh.jobs.get(ok.id).state == "completed"

    error = {"code": "wb-401", "message": "bad token"}
    out = Outcome(wh)
    assert out.finish(
        wh.jobs.claim(bad.id, 1, 60_000, start=True), rd.Transition("fail", P.FAILED, error=error)
    )
    failed = deliveries(db, event_type="wb.job.failed")
    assert {d.endpoint_id for d in failed} == {every, failures}
    assert {assert_shape(d.payload, "wb.job.failed")["error"]["code"] for d in failed} == {"wb-401"}
    assert len(out.sent) == 2 and wh.jobs.get(bad.id).state == "failed"


def test_a_cancelled_wb_job_raises_wb_job_failed_in_the_cancel_transaction(wh, db):
    failures = endpoint(wh, event_types=["wb.job.failed"])
    job = wb_job(wh)

    cancelled, stopping = wh.job_handlers.cancel(job.id, actor="admin")

    [failed] = deliveries(db, event_type="wb.job.failed")
    assert failed.endpoint_id == failures and cancelled.state == "failed" and not stopping
    data = assert_shape(failed.payload, "wb.job.failed")
    assert (data["jobId"], data["state"], data["error"]["code"]) == (str(job.id), "failed", "cancelled")
    # its delivery job was sent after the commit
    assert wh.dispatcher.queued_job_ids({"webhook.deliver"}) == {str(failed.job_id)}

    # A cancel that is refused raises nothing more
    with pytest.raises(Conflict):
        wh.job_handlers.cancel(job.id, actor="admin")
    assert len(deliveries(db)) == 1


def ok_account(wh: Components, job_id: uuid.UUID) -> uuid.UUID:
    return wh.jobs.get(job_id).account_id


def test_a_fenced_out_finish_writes_no_event_and_the_live_run_writes_one(wh, db):
    endpoint(wh)
    job = wb_job(wh)
    old = wh.jobs.claim(job.id, 1, 50, worker="w-old", start=True)
    wait_until(lambda: wh.job_handlers.requeue_orphans(set()), timeout=5, what="the lease to expire")
    new = wh.jobs.claim(job.id, 2, 60_000, worker="w-new", start=True)
    done = rd.Transition("complete", P.COMPLETED, result={})

    out = Outcome(wh)
    assert out.finish(old, done) is False

    assert out.calls == 0  # the outbox write never ran
    assert deliveries(db) == [] and deliver_jobs(db) == {}
    assert wh.jobs.get(job.id).state == "active"
    assert out.finish(new, done) is True
    assert out.calls == 1 and len(deliveries(db)) == 1 and len(deliver_jobs(db)) == 1


def test_an_outbox_write_that_fails_undoes_the_outcome(wh, db):
    endpoint(wh)
    job = wb_job(wh)
    claim = wh.jobs.claim(job.id, 1, 60_000, start=True)
    t = rd.Transition("complete", P.COMPLETED, result={})

    def broken(tx, events) -> None:
        wh.webhooks.outbox(tx, events)
        raise RuntimeError("the outbox broke")

    with pytest.raises(RuntimeError, match="the outbox broke"):
        Outcome(wh, outbox=broken).finish(claim, t)

    assert wh.jobs.get(job.id).state == "active"  # one transaction: the outcome is not written either
    assert deliveries(db) == [] and deliver_jobs(db) == {}
    assert Outcome(wh).finish(claim, t) is True and len(deliveries(db)) == 1


# -- replays ---------------------------------------------------------------------------------


def test_only_a_dead_or_delivered_delivery_is_replayed_as_a_new_series_with_the_same_message(wh, db):
    ep = endpoint(wh)
    delivery_id, _ = send_test(wh, ep)
    with pytest.raises(Conflict) as pending:
        wh.webhook_handlers.replay(delivery_id)
    assert (pending.value.code, pending.value.field) == ("NOT_REPLAYABLE", "status")
    with pytest.raises(NotFound):
        wh.webhook_handlers.replay(uuid.uuid4())
    [before] = deliveries(db)
    play(wh, delivery_id, "dead")

    [sent] = replay(wh, delivery_id)

    [after] = deliveries(db)
    assert (after.status, after.message_id, after.attempts) == ("pending", before.message_id, 1)
    assert after.job_id == sent.job_id != before.job_id
    job = deliver_jobs(db)[sent.job_id]
    assert (job.state, job.max_attempts) == ("waiting", 8)
    assert job.payload == {"endpointId": str(before.endpoint_id), "deliveries": 1}
    # The old series finds it taken over; the new one's attempt follows the last one.
    assert begin_run(wh, before.job_id) == "replaced-or-gone"
    assert play(wh, delivery_id, "delivered", code=200).number == 2
    assert len(replay(wh, delivery_id)) == 1  # delivered is replayable too
    _, attempts = wh.webhooks.get_delivery(delivery_id)
    assert [(a.attempt, a.status_code) for a in attempts] == [(1, 500), (2, 200)]


def test_a_dead_delivery_of_a_disabled_endpoint_is_not_replayed(wh):
    ep = endpoint(wh)
    delivery_id, _ = send_test(wh, ep)
    play(wh, delivery_id, "dead")
    wh.webhook_handlers.update_endpoint(ep, enabled=False)

    with pytest.raises(Conflict) as refused:
        wh.webhook_handlers.replay(delivery_id)

    assert refused.value.code == "ENDPOINT_DISABLED"


def test_replays_of_one_dead_delivery_at_once_make_one_series(wh, db):
    ep = endpoint(wh)
    delivery_id, _ = send_test(wh, ep)
    play(wh, delivery_id, "dead")
    start = threading.Barrier(6)

    def replay_one():
        start.wait()
        try:
            wh.webhook_handlers.replay(delivery_id)
        except Conflict as exc:
            return exc.code
        return "replayed"

    with Sending(wh) as sending, ThreadPoolExecutor(6) as pool:
        results = list(pool.map(lambda _: replay_one(), range(6)))

    assert results.count("replayed") == 1 and len(sending.sent) == 1, (results, sending.sent)
    assert sorted(r for r in results if r != "replayed") == ["NOT_REPLAYABLE"] * 5
    assert len(deliver_jobs(db)) == 2  # the first series and the one replay
    [d] = deliveries(db)
    assert (d.status, d.job_id) == ("pending", sending.sent[0].job_id)


def replay_dead_batch(wh: Components, ep: uuid.UUID, since: datetime | None) -> tuple[int, list[Sent]]:
    """One batch of the replay job's body, in its unit of work: how many it replayed, and what was sent."""
    with Sending(wh) as sending, wh.uow.begin() as tx:
        n = wh.webhooks.replay_dead_batch(tx, ep, since)
    return n, sending.sent


def test_replay_dead_batch_takes_only_the_endpoints_dead_deliveries_since_the_time(wh, db):
    ep, other = endpoint(wh), endpoint(wh)
    ids = {}
    for name in ("old_dead", "new_dead", "delivered", "pending", "failed"):
        ids[name], _ = send_test(wh, ep)
    ids["other_dead"], _ = send_test(wh, other)
    for name in ("old_dead", "new_dead", "other_dead"):
        play(wh, ids[name], "dead")
    play(wh, ids["delivered"], "delivered", code=200)
    play(wh, ids["failed"], "failed")
    db(
        "UPDATE webhook_deliveries SET created_at = now() - interval '1 hour' WHERE id = :id",
        id=ids["old_dead"],
    )
    since = datetime.now(UTC) - timedelta(minutes=10)

    n, first = replay_dead_batch(wh, ep, since)

    status = {d.id: d for d in deliveries(db)}
    assert n == 1 and [d.job_id for d in first] == [status[ids["new_dead"]].job_id]
    assert {n: status[i].status for n, i in ids.items()} == {
        "old_dead": "dead", "new_dead": "pending", "delivered": "delivered", "pending": "pending",
        "failed": "failed", "other_dead": "dead",
    }  # fmt: skip
    # without a time: every dead one left (the old one); then nothing
    n, [second] = replay_dead_batch(wh, ep, None)
    assert n == 1 and second.job_id == wh.webhooks.get_delivery(ids["old_dead"])[0].job_id
    assert replay_dead_batch(wh, ep, None) == (0, [])
    assert wh.webhooks.get_delivery(ids["other_dead"])[0].status == "dead"


def test_start_replay_since_queues_one_replay_job(wh, db):
    ep = endpoint(wh)
    since = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)

    with Sending(wh) as sending:
        job = wh.webhook_handlers.start_replay_since(ep, since)
    sent = sending.sent

    [(type_, state, payload)] = db("SELECT type, state, payload FROM jobs WHERE id = :id", id=job.id)
    assert (type_, state, payload) == (
        "webhook.replay",
        "waiting",
        {"endpointId": str(ep), "since": since.isoformat()},
    )
    assert [s.job_id for s in sent] == [job.id]
    with pytest.raises(NotFound):
        wh.webhook_handlers.start_replay_since(uuid.uuid4(), None)


def test_the_replay_job_counts_the_deliveries_it_replayed_not_their_jobs(wh, db):
    ep = endpoint(wh)
    # two dead deliveries of one delivery job, and a third of its own
    [batch] = publish(wh, Event("webhook.test", {"n": 1}), Event("webhook.test", {"n": 2}))
    run = begin_run(wh, batch.job_id)
    end_run(wh, run, [(a, Answer(500, 12), "dead") for a in run.attempts])
    alone, _ = send_test(wh, ep)
    play(wh, alone, "dead")
    job = wh.webhook_handlers.start_replay_since(ep, None)

    # the job run as a worker runs it: the body through the job runtime
    body = bind(replay_dead_body, body_collaborators(wh))
    with Sending(wh) as sending:
        job_runtime(wh).run(WEBHOOK_REPLAY, body, str(job.id), 1)

    done = wh.jobs.get(job.id)
    assert (done.state, done.result) == ("completed", {"replayed": 3})
    # the three went out together, as one new series (one delivery job)
    [series] = [s for s in sending.sent if s.actor == WEBHOOK_DELIVER.name]
    assert {d.status for d in deliveries(db)} == {"pending"}
    assert {d.job_id for d in deliveries(db)} == {series.job_id}


def test_replay_since_of_a_disabled_endpoint_is_refused_when_asked(wh, db):
    ep = endpoint(wh)
    delivery_id, _ = send_test(wh, ep)
    play(wh, delivery_id, "dead")
    wh.webhook_handlers.update_endpoint(ep, enabled=False)

    with Sending(wh) as sending, pytest.raises(Conflict) as refused:
        wh.webhook_handlers.start_replay_since(ep, None)

    assert (refused.value.code, refused.value.field) == ("ENDPOINT_DISABLED", "enabled")
    assert db("SELECT id FROM jobs WHERE type = 'webhook.replay'") == [] and sending.sent == []


# -- secrets -----------------------------------------------------------------------------------


def attempt_of(wh: Components, ep: uuid.UUID) -> Run:
    delivery_id, _ = send_test(wh, ep)
    return begin(wh, delivery_id)


def test_a_rotated_secret_signs_beside_the_old_one_during_the_grace_period(wh, db):
    created = wh.webhook_handlers.create_endpoint(URL, event_types=None, description="")
    assert attempt_of(wh, created.endpoint.id).secrets == (created.secret,)

    new, _ = wh.webhook_handlers.rotate_secret(created.endpoint.id)

    assert new.startswith("whsec_") and new != created.secret
    run = attempt_of(wh, created.endpoint.id)
    assert run.secrets == (new, created.secret)  # newest first
    [attempt] = run.attempts
    headers = signing.sign(attempt.message_id, datetime.now(UTC), attempt.body, run.secrets)
    for secret in (new, created.secret):  # a receiver holding either verifies
        assert signing.verify(headers, attempt.body, secret)["type"] == "webhook.test"
    [(stored,)] = db("SELECT secret FROM webhook_endpoints")
    assert new not in stored and created.secret not in stored  # encrypted at rest
    with pytest.raises(NotFound):
        wh.webhook_handlers.rotate_secret(uuid.uuid4())


def test_after_the_grace_period_only_the_new_secret_signs(settings, clean):
    brief = _make(settings, webhook_rotation_grace_ms=1)
    try:
        ep = endpoint(brief)
        new, _ = brief.webhook_handlers.rotate_secret(ep)
        time.sleep(0.05)

        assert attempt_of(brief, ep).secrets == (new,)
    finally:
        brief.close()


# -- 410 Gone ------------------------------------------------------------------------------


def test_a_410_disables_the_endpoint_and_stops_its_waiting_deliveries_and_their_jobs_at_once(wh, db):
    ep, other = endpoint(wh), endpoint(wh)
    answered_410, _ = send_test(wh, ep)
    pending_a, _ = send_test(wh, ep)
    pending_b, _ = send_test(wh, ep)
    failed, _ = send_test(wh, ep)
    play(wh, failed, "failed")
    delivered, _ = send_test(wh, ep)
    play(wh, delivered, "delivered", code=200)
    theirs, _ = send_test(wh, other)

    run = begin(wh, answered_410)
    gone = "the endpoint answered 410 Gone"
    assert end_run(wh, run, [(run.attempts[0], Answer(410, 12), "dead")], gone=gone) == 3

    # in the same transaction as the attempt's answer
    e = wh.webhooks.get_endpoint(ep)
    assert (e.enabled, e.disabled_reason) == (False, "the endpoint answered 410 Gone")
    status = {d.id: d for d in deliveries(db)}
    assert {status[i].status for i in (answered_410, pending_a, pending_b, failed)} == {"dead"}
    assert (status[delivered].status, status[theirs].status) == ("delivered", "pending")
    # each says why: the 410 its own attempt got, or the 410 of that delivery, as the endpoint went off
    reasons = {d.id: d.dead_reason for d in db("SELECT id, dead_reason FROM webhook_deliveries")}
    own = reasons[answered_410]
    assert (own["reason"], own["attempt"], own["statusCode"]) == ("endpoint-gone", 1, 410)
    for i in (pending_a, pending_b, failed):
        assert reasons[i]["reason"] == "endpoint-gone" and reasons[i]["byDelivery"] == str(answered_410)
        assert reasons[i]["endpointDisabledAt"] == reasons[pending_a]["endpointDisabledAt"]
    assert reasons[delivered] is None and reasons[theirs] is None
    assert e.disabled_at is not None
    jobs = db("SELECT id, state, error, progress FROM jobs")
    by_id = {j.id: j for j in jobs}
    for i in (pending_a, pending_b, failed):
        job = by_id[status[i].job_id]
        assert job.state == "failed"
        assert job.error == {"code": "endpoint-gone", "message": "the endpoint answered 410 Gone"}
        assert job.progress["phase"] == P.FAILED
    assert by_id[status[theirs].job_id].state == "waiting"
    # its queued attempts find nothing to send
    assert begin_run(wh, status[pending_a].job_id) == "already-dead"


def test_failing_since_is_set_by_the_first_failed_run_after_a_success_and_cleared_by_a_success(wh, db):
    ep = endpoint(wh)

    def note(ok: bool):
        with wh.uow.begin() as tx:
            assert wh.webhooks.note_health(tx, ep, ok=ok) is None  # 5 days: not disabled
        return wh.webhooks.get_endpoint(ep).failing_since

    assert note(True) is None
    first = note(False)
    assert first is not None and note(False) == first  # every attempt failing since the first failure
    assert note(True) is None
    assert note(False) > first


def test_a_replay_waits_for_a_transaction_holding_the_delivery_instead_of_refusing_it(wh, db):
    ep = endpoint(wh)
    delivery_id, _ = send_test(wh, ep)
    play(wh, delivery_id, "dead")
    job_id = wh.webhooks.get_delivery(delivery_id)[0].job_id

    # A stale run of the old series holds the row (begin_run locks it FOR UPDATE, then finds it dead).
    with wh.engine.begin() as holder:
        holder.execute(
            text("SELECT 1 FROM webhook_deliveries WHERE id = :id FOR UPDATE"), {"id": delivery_id}
        )
        with ThreadPoolExecutor(1) as pool:
            replaying = pool.submit(replay, wh, delivery_id)
            time.sleep(0.3)
            holder.commit()
            sent = replaying.result(timeout=10)

    assert len(sent) == 1 and wh.webhooks.get_delivery(delivery_id)[0].status == "pending"
    assert begin_run(wh, job_id) == "replaced-or-gone"
