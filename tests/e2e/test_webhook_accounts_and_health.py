"""Per-account webhook endpoints and endpoint health, end to end: real API and worker processes, the WB
sandbox, real receivers (loopback only, allowlisted), a real SMTP server.

- two accounts' keys each manage an endpoint of their own: each receives only its account's job events
  (wb.job.progress included), an admin endpoint receives both; neither key sees the other's;
- an endpoint limited to 1 delivery a second spreads N deliveries over N-1 seconds, spending no attempt;
- an endpoint failing for WEBHOOK_DISABLE_AFTER_MS (2 s here, for 5 days) is disabled as failing, the
  other endpoint hears of it, the staff get a notification and an e-mail, and its dead deliveries say
  why; its stats count the attempts made.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from sqlalchemy import text

from gatehouse.events import Event
from tests.conftest import ADMIN_TOKEN
from tests.e2e.test_webhooks import receivers  # noqa: F401 - the fixture: receivers stopped after the test
from tests.support.processes import free_port, wait_until
from tests.support.receiver import Receiver, Reply
from tests.support.smtp import SmtpServer
from tests.support.wb_sandbox import running_sandbox, scaled_limits

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
ALLOW = "127.0.0.0/8,::1"
# The user jobs' 60 s retry ladder and Svix's webhook schedule at 1/10,000 (0, 0.5 ms, 30 ms, 180 ms,
# 0.72 s, 1.8 s, 3.6 s, 3.6 s): an endpoint that always fails is 2 s failing by its 6th attempt.
SCALE = "0.0001"
JOB_EVENTS = ["wb.job.completed", "wb.job.failed", "wb.job.progress"]


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@pytest.fixture
def smtp() -> Iterator[SmtpServer]:
    server = SmtpServer(free_port())
    server.start()
    yield server
    server.stop()


def stack(processes, smtp: SmtpServer, **env: str) -> str:
    env = {
        "WEBHOOK_ALLOWED_HOSTS": ALLOW,
        "RETRY_DELAY_SCALE": SCALE,
        "WEBHOOK_TIMEOUT_MS": "3000",
        "SMTP_URL": smtp.url,
        "SMTP_TIMEOUT_MS": "2000",
        **env,
    }
    processes.start("worker", "gatehouse-worker", "--processes", "1", "--threads", "4", env=env)
    return processes.api(env={**env, "BACKEND_ROLE": "api"})[1]


def hook(api: httpx.Client, r: Receiver, path: str, **body: object) -> dict:
    response = api.post(path, json={"url": r.url, **body})
    assert response.status_code == 201, response.text
    r.secrets.append(response.json()["secret"])
    return response.json()


def received(r: Receiver) -> list[dict]:
    return [got.event for got in list(r.received)]


def test_each_accounts_endpoint_receives_only_its_accounts_job_events_and_progress(
    processes,
    smtp,
    receivers,  # noqa: F811 - the imported fixture
):
    with running_sandbox(time_scale=1000, rows_per_day=3, page_size=40) as sandbox:
        url = stack(processes, smtp, WB_API_BASE_URL=sandbox.url, **scaled_limits(1000))
        api = httpx.Client(base_url=url, headers=ADMIN, timeout=30)
        accounts, keys, mine = {}, {}, {}
        for name in ("a", "b"):
            accounts[name] = api.post(
                "/v1/accounts", json={"name": name, "wbToken": f"seller-{name}"}
            ).json()["accountId"]
            keys[name] = api.post(f"/v1/accounts/{accounts[name]}/keys").json()["key"]
            receivers.append(Receiver())
            own = httpx.Client(base_url=url, headers=bearer(keys[name]), timeout=30)
            mine[name] = hook(own, receivers[-1], f"/v1/accounts/{accounts[name]}/webhooks/endpoints")
        ra, rb = receivers
        receivers.append(radmin := Receiver())
        hook(api, radmin, "/v1/admin/webhooks/endpoints", eventTypes=JOB_EVENTS)
        a_hooks = f"/v1/accounts/{accounts['a']}/webhooks/endpoints"
        b_key, a_key = bearer(keys["b"]), bearer(keys["a"])

        # An account's endpoint is its account's: another key sees nothing of it (404, as if absent)
        assert mine["a"]["accountId"] == accounts["a"] and mine["a"]["eventTypes"] is None
        for method, path in (
            ("GET", a_hooks),
            ("GET", f"{a_hooks}/{mine['a']['endpointId']}"),
            ("PATCH", f"{a_hooks}/{mine['a']['endpointId']}"),
            ("GET", f"{a_hooks}/{mine['a']['endpointId']}/stats"),
            # … nor through its own account's path
            ("GET", f"/v1/accounts/{accounts['b']}/webhooks/endpoints/{mine['a']['endpointId']}"),
            ("DELETE", f"/v1/accounts/{accounts['b']}/webhooks/endpoints/{mine['a']['endpointId']}"),
        ):
            answer = httpx.request(method, url + path, headers=b_key, json={} if method == "PATCH" else None)
            assert answer.status_code == 404, (method, path, answer.text)
        listed = httpx.get(url + f"/v1/accounts/{accounts['b']}/webhooks/endpoints", headers=b_key).json()
        assert [e["endpointId"] for e in listed["items"]] == [mine["b"]["endpointId"]]
        assert len(api.get("/v1/admin/webhooks/endpoints").json()["items"]) == 3  # staff see every one
        # … an account's key may subscribe only to its account's events, and never reach an admin route
        refused = httpx.post(
            url + a_hooks, json={"url": ra.url, "eventTypes": ["webhook.test"]}, headers=a_key
        )
        assert refused.status_code == 422 and refused.json()["field"] == "eventTypes", refused.text
        assert httpx.get(url + "/v1/admin/webhooks/endpoints", headers=a_key).status_code == 403

        # When each account runs a user job, a's first attempt failing on WB's side
        sandbox.faults(force_status=[{"seller": "seller-a", "status": 502, "times": 1}])
        jobs = {
            name: httpx.post(
                url + f"/v1/accounts/{accounts[name]}/autobidder/sync", json={}, headers=bearer(keys[name])
            ).json()["jobId"]
            for name in ("a", "b")
        }
        # (each event is its own delivery: they may arrive in any order)
        expected = {"a": ["running", "running", "retrying"], "b": ["running"]}
        for name, r in (("a", ra), ("b", rb)):
            wait_until(
                lambda r=r, n=name: (
                    sorted(e["data"].get("phase", e["type"]) for e in received(r))
                    == sorted([*expected[n], "wb.job.completed"])
                ),
                timeout=60,
                what=f"{name}'s job's progress and completed events at its endpoint",
            )

        # Then each account's endpoint received its own job's events only: its phases, live, and its end
        for name, r in (("a", ra), ("b", rb)):
            events = received(r)
            assert {e["data"]["accountId"] for e in events} == {accounts[name]}
            assert {e["data"]["jobId"] for e in events} == {jobs[name]}
            assert all(got.verified_by for got in r.received)
            progress = [e["data"] for e in events if e["type"] == "wb.job.progress"]
            assert all(p["message"] for p in progress), events
        retrying = next(e["data"] for e in received(ra) if e["data"].get("phase") == "retrying")
        assert "повторим (попытка 2 из 5)" in retrying["message"] and retrying["attempt"] == 2
        # … and the admin endpoint received both accounts' events
        wait_until(
            lambda: (
                {(e["data"]["accountId"], e["type"]) for e in received(radmin)}
                >= {(accounts[n], "wb.job.completed") for n in ("a", "b")}
            ),
            timeout=30,
            what="both accounts' events at the admin endpoint",
        )
        assert {e["data"]["jobId"] for e in received(radmin)} == set(jobs.values())


def test_a_rate_limited_endpoint_waits_without_spending_attempts_and_a_failing_one_is_disabled(
    processes,
    smtp,
    receivers,  # noqa: F811 - the imported fixture
    gh,
):
    url = stack(processes, smtp, WEBHOOK_DISABLE_AFTER_MS="2000")
    api = httpx.Client(base_url=url, headers=ADMIN, timeout=30)
    staff = api.post("/v1/admin/users", json={"email": "ops@gh.test", "name": "Ops"}).json()["userId"]
    paced, failing, told = Receiver(), Receiver(), Receiver()
    receivers.extend([paced, failing, told])
    failing.script(Reply(500))
    hooks = "/v1/admin/webhooks/endpoints"
    slow = hook(api, paced, hooks, eventTypes=["catalog.product.updated"], rateLimitPerSecond=1)
    bad = hook(api, failing, hooks, eventTypes=["catalog.product.updated"])
    hook(api, told, hooks, eventTypes=["webhook.endpoint.disabled"])
    assert slow["rateLimitPerSecond"] == 1 and bad["rateLimitPerSecond"] is None
    bad_id = bad["endpointId"]

    # When four events are raised together (one batch, one job per endpoint)
    events = [Event("catalog.product.updated", {"productId": str(uuid.uuid4())}) for _ in range(4)]
    with gh.uow.begin() as tx:
        tx.publish(*events)

    # Then the rate-limited endpoint gets one a second, each at its first attempt
    wait_until(lambda: len(paced.received) == 4, timeout=30, what="the four paced deliveries")
    times = sorted(got.at for got in paced.received)
    assert times[-1] - times[0] >= 3 - 0.05, times
    deliveries = api.get("/v1/admin/webhooks/deliveries", params={"endpointId": slow["endpointId"]}).json()
    assert [(d["status"], d["attemptCount"]) for d in deliveries["items"]] == [("delivered", 1)] * 4
    [job_id] = {d["jobId"] for d in deliveries["items"]}
    assert api.get(f"/v1/jobs/{job_id}").json()["progress"]["attempt"] == 1

    # … and the endpoint that fails every attempt for 2 s is disabled as failing
    wait_until(
        lambda: api.get(f"{hooks}/{bad_id}").json()["enabled"] is False, timeout=30, what="the disable"
    )
    disabled = api.get(f"{hooks}/{bad_id}").json()
    assert disabled["disabledReason"] == "failing" and disabled["disabledAt"] and disabled["failingSince"]
    assert datetime.fromisoformat(disabled["disabledAt"]) - datetime.fromisoformat(
        disabled["failingSince"]
    ) >= timedelta(milliseconds=2000)
    # … its deliveries are dead, saying why
    dead = api.get("/v1/admin/webhooks/deliveries", params={"endpointId": bad_id}).json()["items"]
    assert {(d["status"], d["deadReason"]["reason"]) for d in dead} == {("dead", "endpoint-failing")}
    one = api.get(f"/v1/admin/webhooks/deliveries/{dead[0]['deliveryId']}").json()
    assert one["deadReason"]["reason"] == "endpoint-failing" and one["attemptCount"] < 8
    # … the other endpoint hears of it (the failing one does not)
    wait_until(lambda: told.received, timeout=30, what="webhook.endpoint.disabled at the other endpoint")
    [notice] = received(told)
    assert notice["type"] == "webhook.endpoint.disabled"
    assert (notice["data"]["endpointId"], notice["data"]["reason"]) == (bad_id, "failing")
    assert all(got.event["type"] == "catalog.product.updated" for got in failing.received)
    # … and the staff get a notification and its e-mail
    with gh.engine.connect() as conn:
        kinds = conn.execute(
            text("SELECT kind FROM notifications WHERE user_id = :u"), {"u": staff}
        ).scalars()
        assert list(kinds) == ["webhook.endpoint.disabled"]
    wait_until(lambda: smtp.inbox.messages, timeout=30, what="the staff's e-mail")
    [(rcpt, message)] = smtp.inbox.messages
    assert rcpt == ["ops@gh.test"] and "Webhook" in message["Subject"]

    # The stats count exactly the attempts made: the failing endpoint's, and the paced one's
    with gh.engine.connect() as conn:
        made = conn.execute(
            text(
                "SELECT count(*), max(a.at) FROM webhook_attempts a JOIN webhook_deliveries d "
                "ON d.id = a.delivery_id WHERE d.endpoint_id = :e"
            ),
            {"e": bad_id},
        ).one()
    stats = api.get(f"{hooks}/{bad_id}/stats").json()
    assert (stats["attempts"], stats["successRate"]) == (made[0], 0.0)
    assert (
        stats["lastFailure"]["statusCode"] == 500
        and datetime.fromisoformat(stats["lastFailure"]["at"]) == made[1]
    )
    assert stats["latencyMs"]["p50"] is not None and stats["latencyMs"]["p95"] >= stats["latencyMs"]["p50"]
    ok = api.get(f"{hooks}/{slow['endpointId']}/stats").json()
    assert (ok["attempts"], ok["successRate"], ok["lastFailure"]) == (4, 1.0, None)
    later = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    assert api.get(f"{hooks}/{bad_id}/stats", params={"since": later}).json() == {
        "successRate": None,
        "attempts": 0,
        "latencyMs": {"p50": None, "p95": None},
        "lastFailure": None,
    }
    assert api.get(f"{hooks}/{bad_id}/stats", params={"since": "yesterday"}).status_code == 422
