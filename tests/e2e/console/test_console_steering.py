"""Steering in the browser, each action through its confirm page: pause and resume a queue from the
overview (its in-process consumers follow), and retry all failed jobs of a type from the jobs list."""

from __future__ import annotations

import uuid

from playwright.sync_api import expect

from tests.support.probe import PROBE
from tests.support.processes import wait_until


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
