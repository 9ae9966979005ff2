"""After real work, every key in the deployment's Redis database starts with its BROKER_NAMESPACE.

A worker, an API and a scheduler run with a namespace of their own: a user
report paused by a WB 429 (gate, buckets, the pause noted), a second job of the
account handed the gate when the report lets it go, the webhook deliveries of
their outcomes (endpoint slots), the scheduler's ticks and the fan-out of one.
A watcher lists the database's keys all along (transient keys too: a gate, a
slot, a bucket live a second or less) and none may fall outside the prefix.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import date, timedelta

import httpx
import pytest
import redis

from gatehouse.composition import Components, bootstrap
from gatehouse.schedules import DEFAULTS
from tests.conftest import ADMIN_TOKEN
from tests.support.processes import wait_until
from tests.support.receiver import Receiver, Reply
from tests.support.wb_sandbox import running_sandbox, scaled_limits

PREFIX = "deploy-7"
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
ALLOW = "127.0.0.0/8"
SCALE = 1000
SELLER = "seller-prefix"
ONLY_ADS_EVERY_MINUTE = json.dumps(
    {
        "rnp-ads": {"cron": "* * * * *", "spread_ms": 0},  # its syncs due at the tick
        **{s.name: {"enabled": False} for s in DEFAULTS if s.name != "rnp-ads"},
    }
)
# What the activity below writes, each kind at least once (after the prefix).
KINDS = ("wb:gate:{", "wb:bucket:{", "account:{", "webhook:{", "workers", "worker:", "schedule:", "tick:")


class KeyWatcher:
    """Every key name seen in the database, listed every few milliseconds until stopped."""

    def __init__(self, url: str) -> None:
        self.client = redis.Redis.from_url(url)
        self.seen: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._stop.wait(0.02):
            self.look()

    def look(self) -> set[str]:
        self.seen |= {key.decode() for key in self.client.scan_iter(count=1000)}
        return self.seen

    def stop(self) -> set[str]:
        if not self._stop.is_set():
            self._stop.set()
            self._thread.join()
            self.client.close()
        return self.seen


@pytest.fixture
def sandbox():
    with running_sandbox(time_scale=SCALE, rows_per_day=3) as running:
        yield running


@pytest.fixture
def stack(settings, clean) -> Iterator[Components]:
    """This side's view of the deployment: its namespace, loopback webhooks allowed."""
    gh = bootstrap(settings.model_copy(update={"broker_namespace": PREFIX, "webhook_allowed_hosts": [ALLOW]}))
    yield gh
    gh.close()


@pytest.fixture
def keys(settings, clean) -> Iterator[KeyWatcher]:
    watcher = KeyWatcher(settings.redis_url)
    yield watcher
    watcher.stop()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    r.script(Reply(hold_s=0.3))  # each delivery holds its endpoint's slot a while
    yield r
    r.stop()


def status(url: str, job_id: str) -> dict:
    return httpx.get(f"{url}/v1/jobs/{job_id}", headers=ADMIN).json()


def test_every_key_a_working_deployment_writes_starts_with_its_namespace(
    processes, sandbox, stack, receiver, keys
):
    # Given a worker, an API and a scheduler of the deployment, all in namespace PREFIX
    receiver.secrets.append(
        stack.webhook_handlers.create_endpoint(receiver.url, event_types=None, description="").secret
    )
    env = {"BROKER_NAMESPACE": PREFIX, "WEBHOOK_ALLOWED_HOSTS": ALLOW}
    processes.start("scheduler", "gatehouse-scheduler", env={**env, "SCHEDULES": ONLY_ADS_EVERY_MINUTE})
    worker_env = {
        **env,
        "WB_API_BASE_URL": sandbox.url,
        "WB_REPORT_PAGE_ROWS": "30",  # several pages, so WB's 429 lands in the middle of the report
        "GATE_POLL_DELAY_MS": "300",
        **scaled_limits(SCALE),
    }
    processes.start("worker", "gatehouse-worker", "--processes", "1", "--threads", "4", env=worker_env)
    _, url = processes.api(env={**env, "BACKEND_ROLE": "api"})

    # When a report of an account runs into a WB 429, a second job of the account waits for its gate,
    # their outcomes go out as webhooks, and the scheduler ticks (at the next minute) and fans out
    account = httpx.post(f"{url}/v1/accounts", json={"name": "Shop", "wbToken": SELLER}, headers=ADMIN).json()
    sandbox.faults(force_429=[{"bucket": "report", "nth": 2, "retry_s": 1.0}])
    anchor = date.fromisoformat(sandbox.control.get("/__sandbox/config").json()["anchor"])
    period = {"dateFrom": str(anchor - timedelta(days=40)), "dateTo": str(anchor - timedelta(days=1))}
    accounts = f"{url}/v1/accounts/{account['accountId']}"
    report = httpx.post(
        f"{accounts}/digitization/imports", json={"kind": "report", **period}, headers=ADMIN
    ).json()["jobId"]
    sync = httpx.post(f"{accounts}/autobidder/sync", headers=ADMIN).json()["jobId"]

    for job in (report, sync):
        wait_until(lambda job=job: status(url, job)["state"] == "completed", timeout=60, what=f"{job} to end")
    wait_until(lambda: len(receiver.received) >= 2, timeout=30, what="both outcomes delivered")
    wait_until(
        lambda: any(k.endswith(":schedule:rnp-ads:last") for k in keys.look()),
        timeout=90,
        what="a tick of rnp-ads fanned out by the worker",
    )

    # Then every key the deployment wrote, however briefly, starts with its namespace
    seen = keys.stop()
    assert [k for k in seen if not k.startswith(f"{PREFIX}:")] == []
    assert [kind for kind in KINDS if not any(k.startswith(f"{PREFIX}:{kind}") for k in seen)] == []
