"""Webhooks end to end: real worker processes, a real receiver verifying signatures with the README's helper.

Only loopback is ever contacted: the receivers listen on 127.0.0.1 / ::1, which
the tests allowlist (WEBHOOK_ALLOWED_HOSTS) where a delivery must go through.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from sqlalchemy import text

import gatehouse.webhooks
import tests.support.receiver as receiver_module
from gatehouse.catalog import NewProduct, Price, ProductPatch
from gatehouse.composition import Components, bootstrap
from gatehouse.events import Event
from gatehouse.jobs import JobRecord
from gatehouse.webhooks import SignatureInvalid, signing, verify
from gatehouse.webhooks.store import Created
from gatehouse.webhooks.tables import AttemptRecord, DeliveryRecord
from tests.conftest import ADMIN_TOKEN
from tests.support.processes import REPO, free_port, wait_until
from tests.support.receiver import Receiver, Reply

ALLOW = "127.0.0.0/8,::1"
# Svix's schedule at 1/10,000: 0, 0.5 ms, 30 ms, 180 ms, 0.72 s, 1.8 s, 3.6 s, 3.6 s.
SCALE = 0.0001
SCHEDULE_MS = [0, 5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 36_000_000]
# For tests that need the eight attempts but not their spacing: the whole series in about 0.1 s.
QUICK_SCALE = "0.000001"
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


@pytest.fixture
def wh(settings, clean) -> Iterator[Components]:
    """The producer side with loopback allowlisted (the receivers of these tests)."""
    gatehouse = bootstrap(
        settings.model_copy(update={"webhook_allowed_hosts": ALLOW.split(","), "retry_delay_scale": SCALE})
    )
    yield gatehouse
    gatehouse.close()


@pytest.fixture
def receivers() -> Iterator[list[Receiver]]:
    made: list[Receiver] = []
    yield made
    for r in made:
        r.stop()


def receiver(receivers: list[Receiver], **kw) -> Receiver:
    r = Receiver(**kw)
    receivers.append(r)
    return r


def worker(processes, name: str = "worker", **env: str):
    return processes.start(
        name,
        "gatehouse-worker",
        "--processes",
        "1",
        "--threads",
        "4",
        env={
            "WEBHOOK_ALLOWED_HOSTS": ALLOW,
            "RETRY_DELAY_SCALE": str(SCALE),
            "WEBHOOK_TIMEOUT_MS": "3000",
            **env,
        },
    )


def endpoint(
    wh: Components, r: Receiver, *, event_types: list[str] | None = None, description: str = ""
) -> Created:
    created = wh.webhook_handlers.create_endpoint(r.url, event_types=event_types, description=description)
    r.secrets.append(created.secret)
    return created


def product_updated(wh: Components) -> None:
    """One domain event: a product edit raises catalog.product.updated (its jobs sent after commit)."""
    p = wh.catalog_handlers.create_product(NewProduct(sku="W-1", name="Stół", price=Price(100, "PLN")))
    wh.catalog_handlers.patch_product(p.id, ProductPatch(name="Stół dębowy"), actor="admin")


def publish(wh: Components, event_type: str = "catalog.product.updated", **data: object) -> Event:
    """Raise one domain event in a committed transaction and send its jobs after the commit."""
    event = Event(event_type, dict(data) or {"productId": str(uuid.uuid4())})
    with wh.uow.begin() as tx:
        tx.publish(event)
    return event


def deliveries_of(wh: Components, event: Event) -> list[DeliveryRecord]:
    return [d for d in wh.webhooks.list_deliveries(limit=500) if d.message_id == event.id]


def delivery_of(wh: Components, event: Event) -> DeliveryRecord:
    [delivery] = deliveries_of(wh, event)
    return delivery


def attempts_of(wh: Components, delivery_id: uuid.UUID) -> list[AttemptRecord]:
    return wh.webhooks.get_delivery(delivery_id)[1]


def job_of(wh: Components, job_id: uuid.UUID | None) -> JobRecord:
    assert job_id is not None
    row = wh.jobs.get(job_id)
    assert row is not None, f"no row for job {job_id}"
    return row


def reaches(wh: Components, event: Event, status: str, timeout: float = 30) -> DeliveryRecord:
    """Wait for the event's one delivery to be in ``status``; returns it."""
    return wait_until(
        lambda: (d := deliveries_of(wh, event)) and d[0].status == status and d[0],
        timeout=timeout,
        what=f"the delivery of {event.id} to be {status}",
    )


def query(wh: Components, statement: str, **params: object) -> list:
    with wh.engine.begin() as conn:
        return list(conn.execute(text(statement), params))


def signed_headers(got: receiver_module.Received) -> dict[str, str]:
    return {
        "webhook-id": got.webhook_id,
        "webhook-timestamp": got.timestamp,
        "webhook-signature": got.signature,
    }


def worker_alive(wh: Components) -> None:
    wait_until(
        lambda: list(wh.redis.scan_iter(wh.liveness.key("*"))), timeout=30, what="the worker to be alive"
    )


def test_an_event_to_three_endpoints_is_three_verified_deliveries(wh, processes, receivers):
    rs = [receiver(receivers) for _ in range(3)]
    for r in rs:
        endpoint(wh, r)
    worker(processes)

    product_updated(wh)

    for r in rs:
        wait_until(lambda r=r: r.received, timeout=30, what="the delivery")
    got = [r.received[0] for r in rs]
    assert all(g.verified_by == (0,) for g in got)
    assert {g.event["type"] for g in got} == {"catalog.product.updated"}
    assert len({g.webhook_id for g in got}) == 1 and got[0].webhook_id.startswith("msg_")
    deliveries = wh.webhooks.list_deliveries()
    wait_until(
        lambda: all(d.status == "delivered" for d in wh.webhooks.list_deliveries()),
        timeout=10,
        what="delivered",
    )
    assert len(deliveries) == 3


def test_the_events_of_one_transaction_go_as_one_job_that_retries_only_what_failed(wh, processes, receivers):
    r = receiver(receivers)
    endpoint(wh, r)
    # the second request fails (and sets a cookie, which no later request may carry back)
    r.script(Reply(200), Reply(503, headers={"set-cookie": "session=s3cr3t; Path=/"}), Reply(200))
    events = [Event("catalog.product.updated", {"productId": str(uuid.uuid4())}) for _ in range(5)]
    with wh.uow.begin() as tx:
        tx.publish(*events)
        sent = list(tx.messages)  # what the unit of work sends after the commit
    assert len(sent) == 1  # five deliveries, one job: a batch of the endpoint's
    worker(processes)

    wait_until(
        lambda: {d.status for d in wh.webhooks.list_deliveries(limit=10)} == {"delivered"},
        timeout=30,
        what="the five deliveries delivered",
    )
    ids = r.ids()
    assert sorted(set(ids)) == sorted(e.id for e in events) and len(ids) == 6
    [again] = [i for i in set(ids) if ids.count(i) == 2]  # the one that failed, and only it, twice
    assert ids.index(again) == 1 and ids[-1] == again
    assert all(got.verified_by == (0,) and "cookie" not in got.headers for got in r.received)
    job = job_of(wh, sent[0].job_id)
    assert (job.state, job.attempt) == ("completed", 2)
    for d in wh.webhooks.list_deliveries(limit=10):
        codes = [a.status_code for a in attempts_of(wh, d.id)]
        assert codes == ([503, 200] if d.message_id == again else [200]), (d.message_id, codes)


def test_a_redirect_is_a_failed_attempt_and_is_never_followed(wh, processes, receivers):
    r, elsewhere = receiver(receivers), receiver(receivers)
    endpoint(wh, r)
    # 307 keeps the method: a client that followed it would POST the signed body to `elsewhere`
    r.script(Reply(307, headers={"location": elsewhere.url}), Reply(200))
    worker(processes)

    event = publish(wh)

    delivered = reaches(wh, event, "delivered")
    assert [a.status_code for a in attempts_of(wh, delivered.id)] == [307, 200]
    assert r.ids() == [event.id, event.id] and elsewhere.received == []


def test_seven_5xx_then_a_2xx_is_delivered_on_attempt_8_on_the_scaled_schedule(wh, processes, receivers):
    # Given a receiver that answers 5xx seven times, then 200
    codes = [500, 502, 503, 504, 500, 500, 500]
    r = receiver(receivers)
    r.script(*(Reply(code, body=f"down {code}") for code in codes), Reply(200))
    endpoint(wh, r)
    worker(processes)

    # When an event is raised
    event = publish(wh)

    # Then it is delivered by the 8th attempt, every attempt on record
    delivered = reaches(wh, event, "delivered", timeout=60)
    attempts = attempts_of(wh, delivered.id)
    assert [a.attempt for a in attempts] == list(range(1, 9))
    assert [a.status_code for a in attempts] == [*codes, 200]
    assert all(a.error is None for a in attempts)
    assert attempts[0].response_excerpt == "down 500" and attempts[-1].response_excerpt == "ok"
    assert (
        delivered.attempts == 8 and delivered.delivered_at is not None and delivered.next_attempt_at is None
    )

    # And the receiver got 8 verified requests of the one message, no earlier than the schedule
    assert len(r.received) == 8
    assert {g.webhook_id for g in r.received} == {event.id}
    assert all(g.verified_by == (0,) for g in r.received)
    gaps = [b.at - a.at for a, b in zip(r.received, r.received[1:], strict=False)]
    delays = [ms * SCALE / 1000 for ms in SCHEDULE_MS[1:]]  # 0.5 ms, 30 ms, 180 ms, 0.72, 1.8, 3.6, 3.6 s
    print("gaps", [round(g, 4) for g in gaps])
    for n, (gap, delay) in enumerate(zip(gaps, delays, strict=True), start=1):
        assert gap >= delay - 0.002, f"attempt {n + 1} came {gap:.4f} s after attempt {n}, before {delay} s"
        assert gap < delay + 5, f"attempt {n + 1} came {gap:.4f} s after attempt {n}, long after {delay} s"


def test_eight_failures_are_dead_and_a_replay_through_the_api_sends_the_same_message_freshly_signed(
    wh, processes, receivers
):
    # Given a receiver that fails every attempt, an API, and a worker on a quick schedule
    r = receiver(receivers)
    r.script(Reply(500, body="nope"))
    endpoint(wh, r)
    _, api = processes.api(env={"BACKEND_ROLE": "api", "WEBHOOK_ALLOWED_HOSTS": ALLOW})
    worker(processes, RETRY_DELAY_SCALE=QUICK_SCALE)

    # When its eight attempts fail
    event = publish(wh)
    dead = reaches(wh, event, "dead")

    # Then the delivery is dead, kept with its eight attempts, and nothing more is scheduled
    attempts = attempts_of(wh, dead.id)
    assert [(a.attempt, a.status_code) for a in attempts] == [(n, 500) for n in range(1, 9)]
    assert dead.attempts == 8 and dead.next_attempt_at is None and dead.delivered_at is None
    first_series = job_of(wh, dead.job_id)
    assert (first_series.state, first_series.attempt) == ("failed", 8)
    assert len(r.received) == 8 and {g.webhook_id for g in r.received} == {event.id}

    # When the receiver is back and an admin replays the delivery (in a later second: a new timestamp)
    r.script(Reply(200))
    last = r.received[-1]
    wait_until(lambda: int(time.time()) > int(last.timestamp), timeout=3, what="the next second")
    answer = httpx.post(f"{api}/v1/admin/webhooks/deliveries/{dead.id}/replay", headers=ADMIN)

    # Then it is accepted as a new series of the same message …
    assert answer.status_code == 202, answer.text
    assert answer.json()["webhookId"] == event.id and answer.json()["status"] == "pending"
    assert answer.headers["location"] == f"/v1/admin/webhooks/deliveries/{dead.id}"
    # … sent with the same webhook-id, a fresh timestamp and a new signature that verifies, and delivered
    replayed = wait_until(lambda: len(r.received) == 9 and r.received[8], timeout=30, what="the replay")
    assert replayed.webhook_id == event.id and replayed.body == last.body
    assert int(replayed.timestamp) > int(last.timestamp)
    assert replayed.signature not in {g.signature for g in r.received[:8]}
    assert replayed.verified_by == (0,)
    delivered = reaches(wh, event, "delivered")
    assert delivered.job_id != dead.job_id  # a new series: a new job
    attempts = attempts_of(wh, delivered.id)
    assert [(a.attempt, a.status_code) for a in attempts] == [*((n, 500) for n in range(1, 9)), (9, 200)]
    shown = httpx.get(f"{api}/v1/admin/webhooks/deliveries/{dead.id}", headers=ADMIN).json()
    assert shown["status"] == "delivered" and shown["attemptCount"] == 9 and len(shown["attempts"]) == 9

    # And a delivered message can be replayed too: attempt 10, the same id once more
    wait_until(lambda: int(time.time()) > int(replayed.timestamp), timeout=3, what="the next second")
    again = httpx.post(f"{api}/v1/admin/webhooks/deliveries/{dead.id}/replay", headers=ADMIN)
    assert again.status_code == 202, again.text
    wait_until(
        lambda: [a.status_code for a in attempts_of(wh, dead.id)][9:] == [200], timeout=30, what="attempt 10"
    )
    assert len(r.received) == 10 and r.received[9].webhook_id == event.id
    assert int(r.received[9].timestamp) > int(replayed.timestamp) and r.received[9].verified_by == (0,)


def test_410_gone_disables_the_endpoint_and_stops_its_waiting_delivery(wh, settings, processes, receivers):
    # Given an endpoint that answers 410 Gone, a worker, and a delivery to it due only in an hour
    # (raised by a producer whose first delay is 1 h: its job row waits, its message is delayed)
    r = receiver(receivers)
    r.script(Reply(410, body="gone"))
    ep = endpoint(wh, r)
    health = free_port()
    worker(processes, WORKER_HEALTH_PORT=str(health))
    worker_alive(wh)
    later = bootstrap(
        settings.model_copy(
            update={
                "webhook_allowed_hosts": ALLOW.split(","),
                "webhook_retry_schedule_ms": [3_600_000, *SCHEDULE_MS[1:]],
                "retry_delay_scale": 1.0,
            }
        )
    )
    try:
        waiting_event = publish(later)
    finally:
        later.close()
    waiting = delivery_of(wh, waiting_event)
    assert waiting.status == "pending" and job_of(wh, waiting.job_id).state == "delayed"

    # When an event due now gets 410
    gone_event = publish(wh)

    # Then that delivery is dead after its one attempt, and the endpoint disabled with the reason
    gone = reaches(wh, gone_event, "dead")
    assert [(a.attempt, a.status_code) for a in attempts_of(wh, gone.id)] == [(1, 410)]
    disabled = wh.webhooks.get_endpoint(ep.endpoint.id)
    assert disabled.enabled is False and "410" in (disabled.disabled_reason or "")
    gone_job = wait_until(
        lambda: (j := job_of(wh, gone.job_id)).state == "failed" and j, timeout=10, what="its job to fail"
    )
    assert gone_job.attempt == 1 and gone_job.error["code"] == "endpoint-gone"  # no retry

    # And the waiting delivery is stopped: dead without an attempt, its job failed
    stopped = delivery_of(wh, waiting_event)
    assert stopped.status == "dead" and stopped.attempts == 0 and attempts_of(wh, stopped.id) == []
    stopped_job = job_of(wh, stopped.job_id)
    assert stopped_job.state == "failed" and stopped_job.error["code"] == "endpoint-gone"
    assert stopped.next_attempt_at is None

    # And nothing more goes to it: one request in all, and a new event makes no delivery to it
    assert r.ids() == [gone_event.id]
    assert deliveries_of(wh, publish(wh)) == []
    assert r.ids() == [gone_event.id]
    # … and the worker's metrics count one attempt gone, and two deliveries dead (it and the stopped one)
    scraped = httpx.get(f"http://127.0.0.1:{health}/metrics").text
    assert 'gatehouse_webhook_attempts_total{outcome="gone"} 1.0' in scraped
    assert "gatehouse_webhook_dead_total 2.0" in scraped


def test_429_with_retry_after_2_is_not_retried_before_2_s(wh, processes, receivers):
    # Given a receiver that answers 429 Retry-After: 2, then 200
    r = receiver(receivers)
    r.script(Reply(429, headers={"Retry-After": "2"}, body="slow down"), Reply(200))
    endpoint(wh, r)
    worker(processes)

    # When an event is raised
    event = publish(wh)

    # Then after the 429 the delivery waits for its next attempt about 2 s later (not the 0.5 ms of the schedule)
    wait_until(lambda: r.received, timeout=30, what="the first attempt")
    # (the attempt's outcome is written before its job is rescheduled: the due time follows a moment later)
    failed = wait_until(
        lambda: (d := deliveries_of(wh, event)) and d[0].status == "failed" and d[0].next_attempt_at and d[0],
        timeout=5,
        what="the delivery to be failed with its next attempt scheduled",
    )
    first_at = attempts_of(wh, failed.id)[0].at
    assert failed.next_attempt_at - first_at >= timedelta(seconds=1.9), (failed.next_attempt_at, first_at)

    # And the second request arrives no earlier than 2 s after the 429, and is delivered
    delivered = reaches(wh, event, "delivered", timeout=30)
    assert [a.status_code for a in attempts_of(wh, delivered.id)] == [429, 200]
    assert len(r.received) == 2 and {g.webhook_id for g in r.received} == {event.id}
    assert all(g.verified_by == (0,) for g in r.received)
    gap = r.received[1].at - r.received[0].at
    print(f"gap after 429: {gap:.3f} s")
    assert 2.0 <= gap < 7.0, gap


def test_a_rotated_secret_signs_twice_in_its_grace_period_and_once_after_it(
    wh, settings, processes, receivers
):
    # Given an endpoint whose secret has just been rotated (the default grace period: 24 h)
    r = receiver(receivers)
    ep = endpoint(wh, r)
    old = r.secrets[0]
    new, _ = wh.webhook_handlers.rotate_secret(ep.endpoint.id)
    assert new != old and new.startswith("whsec_")
    r.secrets.append(new)  # the receiver holds [old, new]
    worker(processes)

    # When an event is delivered in the grace period
    during = publish(wh)
    got = wait_until(lambda: r.received and r.received[0], timeout=30, what="the delivery")

    # Then it carries two signatures, and the old and the new secret both verify it
    assert got.webhook_id == during.id
    assert len(got.signature.split()) == 2
    assert got.verified_by == (0, 1)
    headers = signed_headers(got)
    for secret in (old, new):
        assert verify(headers, got.body, secret)["type"] == "catalog.product.updated"

    # Given a second rotation by a Gatehouse whose grace period is 1 ms, run out
    brief = bootstrap(
        settings.model_copy(
            update={"webhook_allowed_hosts": ALLOW.split(","), "webhook_rotation_grace_ms": 1}
        )
    )
    try:
        newest, _ = brief.webhook_handlers.rotate_secret(ep.endpoint.id)
    finally:
        brief.close()
    r.secrets.append(newest)  # [old, new, newest]
    wait_until(
        lambda: query(
            wh,
            "SELECT previous_secret_until < now() FROM webhook_endpoints WHERE id = :id",
            id=ep.endpoint.id,
        )[0][0],
        timeout=5,
        what="the grace period to run out",
    )

    # When another event is delivered
    after = publish(wh)
    got = wait_until(lambda: len(r.received) == 2 and r.received[1], timeout=30, what="the second delivery")

    # Then only the newest secret signs it: the previous one no longer verifies
    assert got.webhook_id == after.id
    assert len(got.signature.split()) == 1
    assert got.verified_by == (2,)
    headers = signed_headers(got)
    for secret in (old, new):
        with pytest.raises(SignatureInvalid):
            verify(headers, got.body, secret)


def test_a_worker_killed_while_the_receiver_holds_the_request_is_retried_with_the_same_id(
    wh, processes, receivers
):
    # Given a receiver that holds the first request open, then answers 200
    env = {"WORKER_DEAD_AFTER_MS": "2000", "WORKER_HEARTBEAT_MS": "500", "WEBHOOK_TIMEOUT_MS": "30000"}
    r = receiver(receivers)
    r.script(Reply(hold_s=60), Reply(200))
    endpoint(wh, r)
    doomed = worker(processes, "doomed", **env)
    event = publish(wh)
    wait_until(lambda: r.received, timeout=30, what="the first request")
    held = delivery_of(wh, event)
    assert held.status == "delivering"

    # When the worker is killed (-9, the whole tree) mid-request, and another one starts
    doomed.kill_tree()
    doomed.wait(timeout=10)
    worker(processes, "survivor", **env)

    # Then the delivery is retried after the lease / dead-worker detection and delivered
    delivered = reaches(wh, event, "delivered", timeout=40)

    # And the receiver saw the one message twice (at least once), both verified
    assert r.ids() == [event.id, event.id]
    assert len(set(r.ids())) == 1
    assert all(g.verified_by == (0,) for g in r.received)
    attempts = attempts_of(wh, delivered.id)
    assert [a.attempt for a in attempts] == [1, 2]
    assert (attempts[0].status_code, attempts[0].error) == (None, None)  # begun, never ended: the crash
    assert attempts[1].status_code == 200
    job = job_of(wh, delivered.job_id)
    assert job.state == "completed" and job.claims == 2 and job.attempt == 1  # a crash costs no attempt


def test_an_event_of_a_rolled_back_transaction_makes_no_delivery_and_no_request(wh, processes, receivers):
    # Given an endpoint and a worker
    r = receiver(receivers)
    endpoint(wh, r)
    worker(processes)

    class Abort(Exception):
        pass

    # When an event is raised in a transaction that rolls back
    rolled_back = Event("catalog.product.updated", {"productId": str(uuid.uuid4())})
    with pytest.raises(Abort), wh.uow.begin() as tx:
        tx.publish(rolled_back)
        # (inside the transaction the outbox did write the delivery and its job, its message to send)
        assert len(tx.messages) == 1
        assert tx.conn.execute(
            text("SELECT count(*) FROM webhook_deliveries WHERE message_id = :m"), {"m": rolled_back.id}
        ).all() == [(1,)]
        raise Abort

    # Then no delivery row and no job are left
    assert query(wh, "SELECT count(*) FROM webhook_deliveries")[0][0] == 0
    assert query(wh, "SELECT count(*) FROM jobs WHERE type = 'webhook.deliver'")[0][0] == 0

    # And when a committed event follows, only it reaches the receiver
    committed = publish(wh)
    reaches(wh, committed, "delivered")
    assert r.ids() == [committed.id]
    assert [d.message_id for d in wh.webhooks.list_deliveries()] == [committed.id]


def test_loopback_is_refused_at_creation_without_the_allowlist_and_at_the_attempt_once_it_is_removed(
    wh, processes, receivers
):
    r4 = receiver(receivers)
    r6 = receiver(receivers, host="::1")
    closed_api, closed = processes.api("api-closed", env={"BACKEND_ROLE": "api"})
    _, allowing = processes.api("api-allowing", env={"BACKEND_ROLE": "api", "WEBHOOK_ALLOWED_HOSTS": ALLOW})

    # When loopback endpoints are created on an API without the allowlist
    for url in (
        f"http://127.0.0.1:{r4.port}/",
        f"http://[::1]:{r6.port}/",
        f"https://127.0.0.1:{r4.port}/hook",
        r4.url,
    ):
        answer = httpx.post(f"{closed}/v1/admin/webhooks/endpoints", json={"url": url}, headers=ADMIN)

        # Then each is refused: 422 problem+json, WEBHOOK_URL_FORBIDDEN, field url, saying only that
        assert answer.status_code == 422, (url, answer.text)
        assert answer.headers["content-type"].startswith("application/problem+json")
        problem = answer.json()
        assert problem["code"] == "WEBHOOK_URL_FORBIDDEN" and problem["field"] == "url", problem
        assert problem["detail"] == "the webhook URL's host is not allowed", problem
    assert httpx.get(f"{closed}/v1/admin/webhooks/endpoints", headers=ADMIN).json()["items"] == []
    # (what the host is goes to the API's log)
    wait_until(
        lambda: "::1 is a loopback address" in closed_api.log(),
        timeout=10,
        what="the refusal's reason logged",
    )
    assert (
        "webhook target refused (WEBHOOK_URL_FORBIDDEN): 127.0.0.1 is a loopback address" in closed_api.log()
    )

    # Given an endpoint created while loopback was allowlisted
    created = httpx.post(f"{allowing}/v1/admin/webhooks/endpoints", json={"url": r4.url}, headers=ADMIN)
    assert created.status_code == 201, created.text
    r4.secrets.append(created.json()["secret"])

    # When the worker runs without the allowlist and an event is raised
    worker(processes, WEBHOOK_ALLOWED_HOSTS="", RETRY_DELAY_SCALE=QUICK_SCALE)
    event = publish(wh)

    # Then every attempt is refused before a byte is sent, and the delivery ends dead
    dead = reaches(wh, event, "dead")
    attempts = attempts_of(wh, dead.id)
    assert len(attempts) == 8
    for a in attempts:
        assert a.status_code is None and a.error == "refused: the webhook URL's host is not allowed", a
    assert r4.received == [] and r6.received == []


def test_a_hanging_endpoint_never_delays_another(wh, processes, receivers):
    # Given endpoint A that holds every request open, endpoint B that answers at once,
    # and one worker of 4 threads allowed 1 attempt per endpoint at a time
    a = receiver(receivers)
    a.script(Reply(hold_s=60))
    b = receiver(receivers)
    ea, eb = endpoint(wh, a), endpoint(wh, b)
    worker(processes, WEBHOOK_MAX_PER_ENDPOINT="1", WEBHOOK_TIMEOUT_MS="60000")
    worker_alive(wh)

    # When six events are raised (six deliveries to each)
    events = [publish(wh) for _ in range(6)]

    def of(endpoint_id: uuid.UUID) -> list[DeliveryRecord]:
        return wh.webhooks.list_deliveries(endpoint_id=endpoint_id, limit=100)

    # Then B gets all six promptly, delivered, while A's first request is still held
    wait_until(lambda: len(b.received) == 6, timeout=15, what="B's six deliveries")
    wait_until(
        lambda: [d.status for d in of(eb.endpoint.id)] == ["delivered"] * 6, timeout=10, what="B delivered"
    )
    assert {g.webhook_id for g in b.received} == {e.id for e in events}
    assert all(g.verified_by == (0,) for g in b.received)

    # And A has one attempt in flight (its one slot), the others waiting without spending an attempt
    assert len(a.received) == 1
    statuses = sorted(d.status for d in of(ea.endpoint.id))
    assert statuses == ["delivering", *["pending"] * 5], statuses
    for d in of(ea.endpoint.id):
        assert d.attempts == (1 if d.status == "delivering" else 0)
        assert job_of(wh, d.job_id).attempt == 1


def test_the_receiver_verifies_with_the_readme_helper():
    # The webhooks page shows receivers this helper; the tests' receiver is built on that very function
    page = (REPO / "docs/api/webhooks.md").read_text()
    assert "from gatehouse.webhooks import SignatureInvalid, verify" in page
    assert receiver_module.verify is gatehouse.webhooks.verify is verify
    assert receiver_module.SignatureInvalid is SignatureInvalid

    # It accepts what the sender signs, and refuses a changed body, another secret and an old timestamp
    secret, other = signing.new_secret(), signing.new_secret()
    body = signing.body_of({"type": "webhook.test", "timestamp": "t", "data": {"n": 1}})
    headers = signing.sign("msg_test", datetime.now(UTC), body, [secret])
    assert verify(headers, body, secret) == {"type": "webhook.test", "timestamp": "t", "data": {"n": 1}}
    stale = signing.sign("msg_test", datetime.now(UTC) - timedelta(minutes=10), body, [secret])
    for h, b, s in ((headers, body.replace("1", "2"), secret), (headers, body, other), (stale, body, secret)):
        with pytest.raises(SignatureInvalid):
            verify(h, b, s)


def test_a_first_delay_is_on_the_job_row_so_next_attempt_at_and_reconciliation_keep_it(wh, settings):
    # Given a producer whose first delay is 1 h
    later = bootstrap(
        settings.model_copy(
            update={
                "webhook_allowed_hosts": ALLOW.split(","),
                "webhook_retry_schedule_ms": [3_600_000, *SCHEDULE_MS[1:]],
                "retry_delay_scale": 1.0,
            }
        )
    )
    r = Receiver()  # never contacted: no worker runs
    try:
        endpoint(wh, r)
        # When an event is raised
        event = publish(later)
    finally:
        later.close()
        r.stop()

    # Then the delivery says its attempt is due in an hour, and its job row knows it
    delivery = delivery_of(wh, event)
    assert delivery.next_attempt_at is not None
    assert delivery.next_attempt_at - delivery.created_at >= timedelta(minutes=59)
    job = job_of(wh, delivery.job_id)
    assert job.resume_at is not None and job.resume_at - job.created_at >= timedelta(minutes=59)
