"""The console's steering, in process: each action a confirm step (a GET that changes nothing) then
its form (the same handler as the JSON twin): queue and account holds, retry or cancel all matching,
module Disable."""

from __future__ import annotations

import uuid

import pytest
from falcon import testing

from gatehouse import progress as P
from gatehouse.job_types import IMPORT_USER_FEEDS
from gatehouse_api.app import create_app
from tests.integration.test_console_jobs import FORM, csrf, page
from tests.support.accounts import forget_account_checks

pytestmark = pytest.mark.usefixtures("clean")


@pytest.fixture
def client(gh):
    return testing.TestClient(create_app(gh))


def post(client, cookie, path: str, token: str, **fields: str):
    body = "&".join(f"{k}={v}" for k, v in {"csrf": token, **fields}.items())
    return client.simulate_post(path, body=body, headers={**cookie, **FORM})


def test_pause_and_resume_a_queue_and_an_account_after_their_confirm_steps(client, cookie, gh, sql):
    overview = page(client, cookie, "/console")
    for queue in ("maintenance", "schedules", "wb-user"):
        assert f'href="/console/queues/{queue}/pause"' in overview
    confirm = page(client, cookie, "/console/queues/wb-user/pause")
    assert "stay queued" in confirm and not gh.holds.queue_paused("wb-user")

    paused = post(client, cookie, "/console/queues/wb-user/pause", csrf(confirm))
    assert paused.status_code == 303 and gh.holds.queue_paused("wb-user")
    overview = page(client, cookie, "/console")
    assert "paused by admin" in overview and 'href="/console/queues/wb-user/resume"' in overview
    post(client, cookie, "/console/queues/wb-user/resume", csrf(overview))
    assert not gh.holds.queue_paused("wb-user")
    page(client, cookie, "/console/queues/nope/pause", status=404)

    account = gh.account_handlers.create_account("Shop", "token").id
    html = page(client, cookie, f"/console/accounts/{account}")
    assert f'href="/console/accounts/{account}/pause"' in html
    post(client, cookie, f"/console/accounts/{account}/pause", csrf(html))
    html = page(client, cookie, f"/console/accounts/{account}")
    assert "data-paused" in html and f'href="/console/accounts/{account}/resume"' in html
    assert [tuple(r) for r in sql("SELECT action FROM audit_log ORDER BY id")] == [
        ("queue.pause",), ("queue.resume",), ("account.pause",)
    ]  # fmt: skip


def test_retry_all_matching_says_the_count_then_queues_one_job(client, cookie, gh):
    accounts = [gh.account_handlers.create_account(f"Shop {n}", "token").id for n in range(3)]
    forget_account_checks(gh)
    jobs = [gh.job_handlers.submit(IMPORT_USER_FEEDS, account_id=a)[0].id for a in accounts]
    for job_id in jobs[:2]:
        claim = gh.jobs.claim(job_id, 1, 60_000, start=True)
        with gh.uow.autocommit() as tx:
            gh.jobs.finish(tx, claim, state="failed", progress=P.stored(P.FAILED), error={"code": "x"})

    listing = page(client, cookie, "/console/jobs?state=failed&type=import-user-feeds")
    assert 'href="/console/jobs/retry-all?state=failed&amp;type=import-user-feeds"' in listing
    assert "cancel-all" not in listing  # failed jobs are not cancelled
    confirm = page(client, cookie, "/console/jobs/retry-all?state=failed&type=import-user-feeds")
    assert "Retry 2 jobs?" in confirm and 'name="type" value="import-user-feeds"' in confirm

    queued = post(
        client, cookie, "/console/jobs/retry-all", csrf(confirm), state="failed", type="import-user-feeds"
    )
    assert queued.status_code == 303
    operation = gh.jobs.require(uuid.UUID(queued.headers["location"].rsplit("/", 1)[1]))
    assert operation.type == "maintenance:bulk-jobs" and operation.payload["filter"] == {
        "state": "failed", "type": "import-user-feeds"
    }  # fmt: skip
    assert "Cancel 1 job?" in page(client, cookie, f"/console/jobs/cancel-all?accountId={accounts[2]}")
    page(client, cookie, "/console/jobs/retry-all?state=waiting", status=422)


def test_disabling_a_module_takes_a_confirm_step(client, cookie, gh):
    html = page(client, cookie, "/console/modules")
    assert 'href="/console/modules/catalog/disable"' in html
    confirm = page(client, cookie, "/console/modules/catalog/disable")
    assert "MODULE_DISABLED" in confirm and gh.modules.state("catalog", fresh=True).on
    assert post(client, cookie, "/console/modules/catalog/disable", csrf(confirm)).status_code == 303
    assert not gh.modules.state("catalog", fresh=True).on
