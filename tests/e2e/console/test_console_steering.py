"""Steering in the browser, each action through its confirm page: pause and resume a queue from the
overview (its in-process consumers follow), and retry all failed jobs of a type from the jobs list;
pause and resume an account, cancel all waiting jobs of a type, cancel a running import (against the
WB sandbox), and the jobs list's search."""

from __future__ import annotations

import uuid

import httpx
import pytest
from playwright.sync_api import expect

from tests.e2e.console.conftest import signed_in
from tests.e2e.test_job_retry_cancel import ADMIN, FEEDS, create_account
from tests.support.probe import PROBE
from tests.support.processes import wait_until
from tests.support.wb_sandbox import running_sandbox, scaled_limits

SELLER = "seller-console-steer"  # a raw (non-JWT) token is its own seller id


def test_pause_and_resume_a_queue_then_retry_all_matching(console, gh, sql):
    # The overview lists every queue, maintenance and schedules too, each with its button
    page = console.open("/console")
    for queue in ("maintenance", "schedules", "probe"):
        expect(page.locator(f"tr[data-queue='{queue}']")).to_be_visible()
    page.locator("tr[data-queue=probe]").get_by_role("link", name="Pause…").click()
    expect(page.get_by_role("alert")).to_contain_text("stay queued")
    assert console.axe() == []
    page.get_by_role("button", name="Pause the queue").click()
    expect(page.locator("tr[data-queue=probe]")).to_contain_text("paused by admin")
    assert gh.holds.queue_paused("probe")

    # While it is paused, a job of the queue waits untouched
    job = gh.job_handlers.submit(PROBE, account_id=None, payload={"fail": "nope"})[0].id
    page.locator("tr[data-queue=probe]").get_by_role("link", name="Resume…").click()
    assert gh.jobs.get(job).claims == 0
    page.get_by_role("button", name="Resume the queue").click()
    expect(page.locator("tr[data-queue=probe]")).not_to_contain_text("paused")
    wait_until(lambda: gh.jobs.get(job).state == "failed", timeout=20, what="the job to run and fail")

    # Two failed probes: "Retry all matching" says how many, then one job retries them
    other = gh.job_handlers.submit(PROBE, account_id=None, payload={"fail": "nope"})[0].id
    wait_until(lambda: gh.jobs.get(other).state == "failed", timeout=20, what="the second job to fail")
    sql("UPDATE jobs SET payload = '{}'::jsonb WHERE type = 'probe'")  # the cause is fixed
    page = console.open("/console/jobs?state=failed&type=probe")
    page.get_by_role("link", name="Retry all matching…").click()
    expect(page.locator("h1")).to_have_text("Retry 2 jobs?")
    console.shot("retry-all")
    assert console.axe() == []
    page.get_by_role("button", name="Retry all matching").click()

    # … landing on the page of the job doing it, which completes; both probes ran again and completed
    operation = uuid.UUID(page.url.rsplit("/", 1)[1])
    assert gh.jobs.get(operation).type == "maintenance:bulk-jobs"
    expect(page.locator("[data-state]")).to_have_text("completed", timeout=20_000)
    assert gh.jobs.get(operation).result == {"action": "retry", "matched": 2, "done": 2, "skipped": 0}
    wait_until(
        lambda: {gh.jobs.get(j).state for j in (job, other)} == {"completed"}, timeout=20, what="the retries"
    )


@pytest.fixture
def wb_console(browser, processes):
    """A console on an API whose in-process consumers call the WB sandbox (its pages of 10 rows make an
    import of October ~60 pages long)."""
    with running_sandbox(time_scale=1000, rows_per_day=20, page_size=10) as sandbox:
        env = {"WB_API_BASE_URL": sandbox.url, "GATE_POLL_DELAY_MS": "300", **scaled_limits(1000)}
        with signed_in(browser, processes.api(env=env)[1]) as console:
            yield console, sandbox


def test_pause_an_account_cancel_all_matching_cancel_a_running_import_and_search(
    wb_console, processes, gh, sql
):
    (console, sandbox), api = wb_console, processes.started[0]
    account = create_account(console.url, SELLER)  # named Shop

    def paused() -> bool:
        return httpx.get(f"{console.url}/v1/accounts/{account}", headers=ADMIN).json()["paused"]

    # An account's WB jobs paused from its page, then resumed; each change audited with the session's actor
    page = console.open(f"/console/accounts/{account}")
    page.get_by_role("link", name="Pause its WB jobs…").click()
    expect(page.get_by_role("alert")).to_contain_text("no attempt spent")
    page.get_by_role("button", name="Pause the account").click()
    expect(page.locator("#hold [data-paused]")).to_be_visible()
    assert paused()
    page.get_by_role("link", name="Resume…").click()
    page.get_by_role("button", name="Resume the account").click()
    expect(page.get_by_role("link", name="Pause its WB jobs…")).to_be_visible()
    expect(page.locator("#hold [data-paused]")).to_have_count(0)
    assert not paused()
    holds = "SELECT actor, action FROM audit_log WHERE entity_id = :id AND action IN ('account.pause', 'account.resume') ORDER BY id"
    assert [tuple(r) for r in sql(holds, id=account)] == [
        ("admin", "account.pause"),
        ("admin", "account.resume"),
    ]

    # Three probes wait in their paused queue; the search finds one by its id's first 8 digits
    assert httpx.post(f"{console.url}/v1/admin/queues/probe/pause", headers=ADMIN).status_code == 200
    wait_until(lambda: "queue probe is held" in api.log(), timeout=10, what="the consumers to see the hold")
    probes = [gh.job_handlers.submit(PROBE, account_id=None, payload={})[0].id for _ in range(3)]
    page = console.open("/console/jobs")
    page.locator("#f-q").fill(str(probes[0])[:8])
    page.get_by_role("button", name="Filter").click()
    expect(page.locator("#jobs tr[data-job]")).to_have_count(1)
    expect(page.locator("#jobs tr[data-job]")).to_have_attribute("data-job", str(probes[0]))

    # "Cancel all matching" says how many, then one job cancels them: failed, cancelled
    page = console.open("/console/jobs?state=waiting&type=probe")
    page.get_by_role("link", name="Cancel all matching…").click()
    expect(page.locator("h1")).to_have_text("Cancel 3 jobs?")
    page.get_by_role("button", name="Cancel all matching").click()
    operation = uuid.UUID(page.url.rsplit("/", 1)[1])
    assert gh.jobs.get(operation).type == "maintenance:bulk-jobs"
    expect(page.locator("[data-state]")).to_have_text("completed", timeout=20_000)
    assert gh.jobs.get(operation).result == {"action": "cancel", "matched": 3, "done": 3, "skipped": 0}
    assert {(gh.jobs.get(j).state, gh.jobs.get(j).error["code"]) for j in probes} == {("failed", "cancelled")}

    # A running import (each WB call 2.5 s: it is inside one while we click) cancelled from its page …
    sandbox.faults(latency_ms=2500)
    imports = f"{console.url}/v1/accounts/{account}/digitization/imports"
    running = httpx.post(imports, json=FEEDS, headers=ADMIN).json()["jobId"]
    wait_until(
        lambda: sandbox.log(SELLER) and gh.jobs.get(uuid.UUID(running)).state == "active",
        timeout=15,
        what="the import to run and call WB",
    )
    page = console.open(f"/console/jobs/{running}")
    page.get_by_role("link", name="Cancel…").click()
    expect(page.locator("h1")).to_contain_text("(active)?")
    expect(page.get_by_role("alert")).to_contain_text("stops at its next checkpoint or WB call")
    page.get_by_role("button", name="Cancel the job").click()
    expect(page.locator("[data-stopping]")).to_contain_text("An operator cancelled it")

    # … stops at its next WB call: failed, cancelled
    expect(page.locator("[data-state]")).to_have_text("failed", timeout=15_000)
    assert gh.jobs.get(uuid.UUID(running)).error["code"] == "cancelled"

    # The search by a part of its account's name (any case), of the imports, finds this one alone
    page = console.open("/console/jobs?type=import-user-feeds")
    page.locator("#f-q").fill("SHO")
    page.get_by_role("button", name="Filter").click()
    expect(page.locator("#jobs tr[data-job]")).to_have_count(1)
    expect(page.locator("#jobs tr[data-job]")).to_have_attribute("data-job", running)
