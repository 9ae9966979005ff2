"""Webhooks in the browser: dead deliveries replayed to a real receiver by a real worker, endpoint actions.

The receiver (tests/support/receiver.py) first answers 500; with a retry
schedule of three quick attempts (WEBHOOK_RETRY_SCHEDULE_MS=0,10,10) each
delivery dies at once. Then the receiver answers 200 and the operator replays
from the console: the delivery's status turns delivered in its live region
(no reload) and the receiver gets the message, verified.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from playwright.sync_api import expect

from gatehouse.composition import Components, bootstrap
from gatehouse.events import Event
from tests.e2e.test_modules import logged, workers
from tests.support.processes import wait_until
from tests.support.receiver import Receiver, Reply

ALLOW = "127.0.0.0/8"
XSS = "<script>alert(1)</script>"


@pytest.fixture
def process_env(process_env):
    """No consumers in the API (the worker is the test's); three quick attempts; fast live regions."""
    return {
        **process_env,
        "BACKEND_ROLE": "api",
        "WEBHOOK_ALLOWED_HOSTS": ALLOW,
        "WEBHOOK_RETRY_SCHEDULE_MS": "0,10,10",
        "WEBHOOK_TIMEOUT_MS": "3000",
        "CONSOLE_REFRESH_MS": "400",
    }


@pytest.fixture
def wh(settings, clean) -> Iterator[Components]:
    gatehouse = bootstrap(
        settings.model_copy(
            update={"webhook_allowed_hosts": [ALLOW], "webhook_retry_schedule_ms": [0, 10, 10]}
        )
    )
    yield gatehouse
    gatehouse.close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.stop()


@pytest.fixture
def dialogs(console) -> list[str]:
    seen: list[str] = []
    console.page.on("dialog", lambda d: (seen.append(d.message), d.dismiss()))
    return seen


def worker(processes) -> None:
    procs = workers(processes, 1)
    wait_until(lambda: logged(procs, "Worker process is ready"), timeout=30, what="the worker")


def publish(gh: Components, **data: object) -> Event:
    event = Event("catalog.product.updated", {"productId": str(uuid.uuid4()), **data})
    with gh.uow.begin() as tx:
        tx.publish(event)  # its jobs' messages are sent after the commit
    return event


def dead(gh: Components, event: Event, endpoint_id: uuid.UUID):
    def find():
        found = [d for d in gh.webhooks.list_deliveries(endpoint_id=endpoint_id) if d.message_id == event.id]
        return found and found[0].status == "dead" and found[0]

    return wait_until(find, timeout=30, what=f"the delivery of {event.id} to die")


def test_replay_a_dead_delivery_and_see_it_delivered(console, processes, wh, receiver, dialogs):
    # Given an endpoint whose receiver answers 500 to the three attempts of a delivery, then 200
    receiver.script(Reply(500, body="down"), Reply(500, body="down"), Reply(500, body="down"), Reply(200))
    created = wh.webhook_handlers.create_endpoint(receiver.url, event_types=None, description="ERP «Склад»")
    receiver.secrets.append(created.secret)
    worker(processes)
    event = publish(wh, name=XSS, message="Цена обновлена")
    delivery = dead(wh, event, created.endpoint.id)
    assert len(receiver.received) == 3

    # When the operator finds it among the dead deliveries
    page = console.open("/console/webhooks/deliveries?status=dead")
    row = page.locator(f"tr[data-delivery='{delivery.id}']")
    expect(row.locator("[data-status]")).to_have_text("dead")
    expect(row.get_by_role("button", name="Replay")).to_be_visible()
    expect(row.locator("[data-dead-reason]")).to_contain_text("its last attempt, 3, failed: HTTP 500")
    console.shot("webhook-deliveries")
    assert console.axe() == []
    row.get_by_role("link").first.click()

    # Then its page shows the event as text and its three failed attempts
    expect(page.locator("h1")).to_contain_text(str(delivery.id))
    expect(page.locator("#payload")).to_contain_text(f'"name": "{XSS}"')
    expect(page.locator("#payload")).to_contain_text("Цена обновлена")
    assert page.locator("main script").count() == 0
    expect(page.locator("#attempts tbody tr")).to_have_count(3)
    expect(page.locator("#attempts tr[data-attempt='3']")).to_contain_text("500")
    expect(page.locator("#dead-reason")).to_contain_text("its last attempt, 3, failed: HTTP 500")
    expect(page.locator(f"a[href='/console/jobs/{delivery.job_id}']")).to_be_visible()
    assert console.axe() == []

    # When they press Replay
    page.locator("#delivery").get_by_role("button", name="Replay").click()
    page.evaluate("window.__sameDocument = 'yes'")

    # Then the status turns delivered in the live region, and the receiver got the message, verified
    expect(page.locator("#delivery [data-status]")).to_have_text("delivered", timeout=30_000)
    expect(page.locator("#attempts tr[data-attempt='4']")).to_contain_text("200")
    assert page.evaluate("window.__sameDocument") == "yes"  # the live region moved, no reload
    got = wait_until(
        lambda: len(receiver.received) == 4 and receiver.received[3], timeout=10, what="the replay"
    )
    assert got.webhook_id == event.id and got.verified_by == (0,)
    assert got.event["data"]["name"] == XSS
    expect(page.locator("#delivery").get_by_role("button", name="Replay")).to_have_count(0)
    expect(page.locator("#dead-reason")).to_have_count(0)  # alive again: no reason to die
    new_job = wh.webhooks.get_delivery(delivery.id)[0].job_id
    expect(page.locator(f"a[href='/console/jobs/{new_job}']")).to_be_visible()
    console.shot("webhook-delivery")
    assert console.axe() == []
    assert dialogs == []


def test_endpoint_actions_replay_all_dead_since_rotate_secret_send_test_disable(
    console, processes, wh, receiver, dialogs
):
    # Given two dead deliveries of one endpoint (the receiver failed their six attempts)
    receiver.script(*[Reply(500)] * 6, Reply(200))
    created = wh.webhook_handlers.create_endpoint(
        receiver.url, description="Магазин", event_types=["catalog.product.updated"]
    )
    endpoint_id = created.endpoint.id
    receiver.secrets.append(created.secret)
    worker(processes)
    events = [publish(wh), publish(wh)]
    for e in events:
        dead(wh, e, endpoint_id)
    assert len(receiver.received) == 6

    # The endpoints page counts them
    page = console.open("/console/webhooks/endpoints")
    row = page.locator(f"tr[data-endpoint='{endpoint_id}']")
    expect(row).to_contain_text(receiver.url)
    expect(row).to_contain_text("Магазин")
    expect(row).to_contain_text("dead 2")
    console.shot("webhook-endpoints")
    assert console.axe() == []
    # A refresh of the counts keeps a date being typed
    field = row.get_by_label("Dead since (UTC, empty: all)")
    field.fill("2026-01-02T03:04:05")
    refreshed = page.evaluate("document.body.dataset.refreshedAt || ''")
    wait_until(
        lambda: page.evaluate("document.body.dataset.refreshedAt || ''") != refreshed,
        timeout=10,
        what="a refresh",
    )
    expect(field).to_have_value("2026-01-02T03:04:05")

    # When "Replay all dead since" an hour ago is sent
    since = (datetime.now(UTC) - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%S")
    row.get_by_label("Dead since (UTC, empty: all)").fill(since)
    row.get_by_role("button", name="Replay all dead").click()

    # Then the endpoint's deliveries page says a replay job is queued, and both turn delivered live
    expect(page).to_have_url(
        re.compile(rf"/console/webhooks/deliveries\?endpointId={endpoint_id}&replayJob=")
    )
    job_id = page.url.rsplit("=", 1)[1]
    expect(page.locator(f"a[href='/console/jobs/{job_id}']")).to_be_visible()
    expect(page.locator("#deliveries [data-status='delivered']")).to_have_count(2, timeout=30_000)
    wait_until(lambda: len(receiver.received) == 8, timeout=10, what="the two replays")
    assert {g.webhook_id for g in receiver.received[6:]} == {e.id for e in events}
    assert console.axe() == []

    # The endpoints page's counts move on their own; with none dead, there is nothing to replay
    page = console.open("/console/webhooks/endpoints")
    counts = page.locator(f"[id='counts-{endpoint_id}']")
    expect(counts).to_contain_text("delivered 2")
    expect(page.get_by_role("button", name="Replay all dead")).to_have_count(0)
    publish(wh)
    expect(counts).to_contain_text("delivered 3", timeout=30_000)
    wait_until(lambda: len(receiver.received) == 9, timeout=10, what="the new event")

    # When the secret is rotated, the new one shows once, on the answer
    page = console.open("/console/webhooks/endpoints")
    page.locator(f"tr[data-endpoint='{endpoint_id}']").get_by_role("link", name="Rotate secret…").click()
    page.get_by_role("button", name="Rotate the secret").click()  # its confirm step
    secret = page.locator("#secret").text_content()
    assert secret and secret.startswith("whsec_") and secret != created.secret
    expect(page.get_by_role("alert")).to_contain_text("shown only on this page, once")
    assert secret not in page.url
    assert console.axe() == []
    receiver.secrets.append(secret)
    page = console.open("/console/webhooks/endpoints")
    assert secret not in page.content()

    # And a test event is signed with it (the old one too, in its grace period)
    page.locator(f"tr[data-endpoint='{endpoint_id}']").get_by_role("button", name="Send test").click()
    expect(page.locator("#delivery [data-status]")).to_have_text("delivered", timeout=30_000)
    expect(page.locator("#payload")).to_contain_text("webhook.test")
    test = wait_until(
        lambda: len(receiver.received) == 10 and receiver.received[9], timeout=10, what="the test"
    )
    assert test.event["type"] == "webhook.test" and test.verified_by == (0, 1)

    # When the endpoint is disabled, it offers no test or replay until enabled again
    page = console.open("/console/webhooks/endpoints")
    page.locator(f"tr[data-endpoint='{endpoint_id}']").get_by_role("button", name="Disable").click()
    row = page.locator(f"tr[data-endpoint='{endpoint_id}']")
    expect(row).to_contain_text("disabled by an admin")
    expect(row.get_by_role("button", name="Send test")).to_have_count(0)
    assert not wh.webhooks.get_endpoint(endpoint_id).enabled
    row.get_by_role("button", name="Enable").click()
    expect(
        page.locator(f"tr[data-endpoint='{endpoint_id}']").get_by_role("button", name="Send test")
    ).to_be_visible()
    assert wh.webhooks.get_endpoint(endpoint_id).enabled
    assert dialogs == []
