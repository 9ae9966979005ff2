"""The job API under real gunicorn: the creation race, the retry ladder as seen by a poller.

Schemathesis over every operation: tests/e2e/test_openapi_fuzz.py.
"""

from __future__ import annotations

import json
import re
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime

import httpx

from tests.conftest import ADMIN_TOKEN
from tests.support.probe import ATTEMPTS_KEY, FLAKY
from tests.support.processes import wait_until

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
FEEDS = {"kind": "feeds", "dateFrom": "2026-10-01", "dateTo": "2026-10-31"}


def create_account(url: str) -> str:
    response = httpx.post(f"{url}/v1/accounts", json={"name": "Shop", "wbToken": "t"}, headers=ADMIN)
    assert response.status_code == 201, response.text
    return response.json()["accountId"]


def test_50_concurrent_identical_posts_make_one_job_and_one_message(processes, gh, sql):
    # Given the API alone (no consumers) on two gunicorn workers with four threads each
    _, url = processes.api(env={"BACKEND_ROLE": "api", "API_WORKERS": "2", "API_THREADS": "4"})
    account = create_account(url)

    # When 50 clients post the same import at once, each trying again after a 503 STORE_UNAVAILABLE as
    # the API asks (a loaded CI machine once answered one of the 50 so)
    def post(_: int) -> httpx.Response:
        for _ in range(3):
            response = httpx.post(
                f"{url}/v1/accounts/{account}/digitization/imports", json=FEEDS, headers=ADMIN, timeout=30
            )
            if response.status_code != 503:
                break
            assert response.json()["code"] == "STORE_UNAVAILABLE", response.text
        return response

    with ThreadPoolExecutor(50) as pool:
        responses = list(pool.map(post, range(50)))

    # Then all are accepted, one created the job and 49 were told it is already running
    refused = [r.text for r in responses if r.status_code != 202]
    assert not refused, f"{len(refused)} of 50 not accepted: {refused[:3]}"
    bodies = [r.json() for r in responses]
    assert len({b["jobId"] for b in bodies}) == 1
    assert sorted(b["alreadyRunning"] for b in bodies) == [False] + [True] * 49
    imports = "SELECT id FROM jobs WHERE account_id = :a AND type = 'import-user-feeds'"
    assert [str(r.id) for r in sql(imports, a=uuid.UUID(account))] == [bodies[0]["jobId"]]
    # … and exactly one message was enqueued for it (beside the account's token check's)
    verify = sql(
        "SELECT id FROM jobs WHERE account_id = :a AND type = 'account-verify'", a=uuid.UUID(account)
    )
    assert gh.dispatcher.queued_job_ids({"wb-user"}) == {bodies[0]["jobId"], str(verify[0].id)}
    assert gh.redis.llen("gatehouse:wb-user") == gh.redis.hlen("gatehouse:wb-user.msgs") == 2


def test_a_poller_sees_the_retry_ladder_then_the_failure(processes, gh, settings):
    # Given workers with an 800 ms base delay (a poll on a loaded machine can take a few hundred ms, and each
    # delay must outlast one), and a job failing (WB down) on every one of its 5 attempts
    processes.start(
        "worker",
        "gatehouse-worker",
        "--processes",
        "1",
        "--threads",
        "2",
        env={"RETRY_DELAY_SCALE": str(800 / 60_000)},
    )
    _, url = processes.api(env={"BACKEND_ROLE": "api"})
    job_id = gh.job_handlers.submit(FLAKY, account_id=None)[0].id

    # When a client polls its status until it ends
    seen: dict[tuple, dict] = {}

    def poll() -> bool:
        status = httpx.get(f"{url}/v1/jobs/{job_id}", headers=ADMIN).json()
        if status["progress"]:
            seen.setdefault(
                (status["state"], status["progress"]["phase"], status["progress"]["attempt"]), status
            )
        return status["state"] == "failed"

    wait_until(poll, timeout=45, interval=0.02, what="the job to fail for good")

    # Then it saw each retry: delayed, phase retrying, the next attempt of 5, its eta and the Russian message
    attempts = [json.loads(a) for a in gh.redis.lrange(ATTEMPTS_KEY, 0, -1)]
    assert [a["attempt"] for a in attempts] == [1, 2, 3, 4, 5]
    for n in (2, 3, 4, 5):
        status = seen[("delayed", "retrying", n)]
        progress = status["progress"]
        assert progress["maxAttempts"] == 5
        assert re.fullmatch(
            rf"Wildberries временно недоступен — повторим \(попытка {n} из 5\) через (~\d+ с|несколько секунд)",
            progress["message"],
        ), progress["message"]
        resume_at = datetime.fromisoformat(progress["resumeAt"]).timestamp()
        failed_at, ran_at = attempts[n - 2]["at"], attempts[n - 1]["at"]
        # resumeAt is the real eta: base · 2^(n-2) after the failure, and the next attempt ran then
        assert abs((resume_at - failed_at) - 0.8 * 2 ** (n - 2)) < 0.1
        assert resume_at - 0.005 <= ran_at < resume_at + 0.5
    final = httpx.get(f"{url}/v1/jobs/{job_id}", headers=ADMIN).json()
    assert final["progress"]["phase"] == "failed" and final["progress"]["attempt"] == 5
    assert final["error"]["code"] == "wb-unavailable"
    assert final["progress"]["message"].startswith("Не получилось после 5 попыток")
