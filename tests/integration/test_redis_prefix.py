"""Two deployments on one Redis database, told apart by BROKER_NAMESPACE alone.

Two compositions, built by ``bootstrap`` as two deployments would be, share the
test's Redis database (and, here, its PostgreSQL). What one writes — gates,
hand-off marks, WB pauses, buckets, webhook slots, worker liveness, schedule
runs — the other sees nothing of, through its stores or its admin views.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from falcon import testing

from gatehouse.composition import Components, bootstrap
from gatehouse.gate import GateState, job_of, owner
from gatehouse.workers import WorkerBeat
from gatehouse_api.app import create_app
from tests.conftest import ADMIN_TOKEN

A, B = "stack-a", "stack-b"
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
ASK = dict(tier="user", lease_ms=60_000, wanted_ttl_ms=30_000, waiting_ttl_ms=30_000)


@pytest.fixture
def stacks(settings, clean) -> Iterator[tuple[Components, Components]]:
    a, b = (bootstrap(settings.model_copy(update={"broker_namespace": ns})) for ns in (A, B))
    yield a, b
    a.close()
    b.close()


def get(gh: Components, path: str, **params: str) -> dict:
    response = testing.TestClient(create_app(gh)).simulate_get(path, params=params, headers=ADMIN)
    assert response.status_code == 200, response.text
    return response.json


def keys_of(gh: Components) -> set[str]:
    return {key.decode() for key in gh.redis.scan_iter(count=1000)}


def test_an_accounts_gate_held_in_one_deployment_is_free_in_the_other(stacks):
    a, b = stacks
    account = str(a.account_handlers.create_account("Shop", "token").id)
    holder, waiter, other = (owner("wb-user", uuid.uuid4()) for _ in range(3))
    now = int(time.time() * 1000)

    # Given, in A, the account's gate held with a job in line behind it and a WB pause noted
    assert a.gate.acquire(account, holder, first_wait_ms=now, **ASK).proceed
    assert not a.gate.acquire(account, waiter, first_wait_ms=now, **ASK).proceed
    a.pauses.record(account, uuid.uuid4(), at_ms=now, resume_at_ms=now + 1000, reason="wb-429")

    # Then B finds the account's gate free, nobody in line, no pause: its views show nothing of A's
    assert b.gate.inspect(account) == GateState()
    assert b.pauses.recent(account) == []
    gate_b = get(b, f"/v1/admin/accounts/{account}/gate")
    assert (gate_b["holder"], gate_b["wanted"], gate_b["waiting"], gate_b["recentPauses"]) == (
        None,
        None,
        [],
        [],
    )
    assert get(b, "/v1/admin/accounts", hot="true")["items"] == []
    # … while A's show its own
    gate_a = get(a, f"/v1/admin/accounts/{account}/gate")
    assert (gate_a["holder"], gate_a["waiting"]) == (str(job_of(holder)), [str(job_of(waiter))])
    assert [i["accountId"] for i in get(a, "/v1/admin/accounts", hot="true")["items"]] == [account]

    # When a job of B asks for the account's gate, it gets it at once, and A's holder keeps A's
    assert b.gate.acquire(account, other, first_wait_ms=now, **ASK).decision == "acquired"
    assert a.gate.inspect(account).holder == holder

    # … and A's hand-off to its waiter is A's alone: B's gate is neither freed nor marked
    assert a.gate.release(account, holder).best_waiter == waiter
    assert b.gate.handed_off(account) is None
    assert a.gate.handed_off(account) is not None
    assert b.gate.inspect(account).holder == other
    assert {k.split(":", 1)[0] for k in keys_of(a)} == {A, B}


def test_a_bucket_or_an_endpoints_slots_used_up_in_one_deployment_are_untouched_in_the_other(stacks):
    a, b = stacks
    take = dict(burst=1, limit=1, period_ms=60_000, now_ms=int(time.time() * 1000))
    endpoint = str(uuid.uuid4())

    # Given A's statistics bucket of the account drained and the endpoint's one slot taken in A
    assert a.buckets.take("4242", "statistics", **take) == 0
    assert a.buckets.take("4242", "statistics", **take) > 0
    assert a.webhook_slots.acquire(endpoint, "a-1", limit=1, lease_ms=60_000)
    assert not a.webhook_slots.acquire(endpoint, "a-2", limit=1, lease_ms=60_000)

    # Then B's bucket is full and B's slot free
    assert b.buckets.take("4242", "statistics", **take) == 0
    assert b.webhook_slots.acquire(endpoint, "b-1", limit=1, lease_ms=60_000)
    assert {k.split(":", 1)[0] for k in keys_of(a)} == {A, B}


def test_a_deployment_sees_only_its_own_workers_and_schedule_runs(stacks):
    a, b = stacks
    at = datetime(2030, 1, 2, 3, 4, tzinfo=UTC)

    # Given a worker of A beating and A's scheduler having run and planned rnp-ads
    a.liveness.beat("host:1:aaaa", WorkerBeat(threads=2, queues=("wb-user",)))
    a.schedule_runs.record_run("rnp-ads", at)
    a.schedule_runs.record_next("rnp-ads", at)

    # Then B knows no live worker and no run of rnp-ads, in its stores and in its overview
    assert b.liveness.alive() == {}
    assert b.schedule_runs.runs("rnp-ads") == (None, None)
    overview_b = get(b, "/v1/admin/overview")
    assert overview_b["workers"] == []
    ads_b = next(s for s in overview_b["schedules"] if s["name"] == "rnp-ads")
    assert (ads_b["lastRun"], ads_b["nextRun"]) == (None, None)
    # … while A's overview lists its worker and its run
    overview_a = get(a, "/v1/admin/overview")
    assert [w["name"] for w in overview_a["workers"]] == ["host:1:aaaa"]
    ads_a = next(s for s in overview_a["schedules"] if s["name"] == "rnp-ads")
    assert ads_a["lastRun"] is not None and ads_a["nextRun"] is not None
    assert {k.split(":", 1)[0] for k in keys_of(a)} == {A}
