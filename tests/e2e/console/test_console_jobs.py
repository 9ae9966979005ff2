"""Jobs in the browser: Retry a failed job and watch it run again; Cancel a waiting one and see it cancelled."""

from __future__ import annotations

import httpx
from playwright.sync_api import expect

from tests.conftest import ADMIN_TOKEN
from tests.e2e.console.test_console_gates import held_gate
from tests.support.probe import PROBE
from tests.support.processes import wait_until

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


def status(console, job_id) -> dict:
    return httpx.get(f"{console.url}/v1/jobs/{job_id}", headers=ADMIN).json()


def test_retry_a_failed_job_and_see_it_run_again(console, gh, sql):
    account = gh.account_handlers.create_account("Shop", "token").id
    job = gh.job_handlers.submit(
        PROBE, account_id=account, payload={"fail": "WB отклонил запрос", "seconds": 0}
    )[0].id
    wait_until(lambda: gh.jobs.get(job).state == "failed", timeout=30, what="the job to fail")
    # The cause is fixed (the next run succeeds, after a second's work)
    sql("UPDATE jobs SET payload = '{\"seconds\": 1}'::jsonb WHERE id = :id", id=job)

    page = console.open(f"/console/jobs/{job}")
    expect(page.locator("[data-state]")).to_have_text("failed")
    expect(page.locator("#job")).to_contain_text("RuntimeError")
    expect(page.get_by_role("link", name="Cancel…")).to_have_count(0)
    console.shot("job")
    assert console.axe() == []
    page.get_by_role("button", name="Retry").click()

    # Back on its page: it left failed, ran on a worker (claimed a second time) and completed
    expect(page).to_have_url(f"{console.url}/console/jobs/{job}")
    expect(page.locator("[data-state]")).not_to_have_text("failed")
    expect(page.locator("[data-state]")).to_have_text(
        "completed", timeout=20_000
    )  # the live region refreshes
    done = status(console, job)
    assert done["state"] == "completed" and done["progress"]["attempt"] == 1 and done["error"] is None
    assert gh.jobs.get(job).claims == 2


def test_cancel_a_waiting_job_and_see_it_cancelled(console, gh):
    _, holder, waiter, _ = held_gate(gh)

    page = console.open(f"/console/jobs/{waiter}")
    expect(page.locator("#job")).to_contain_text("waiting-account")
    expect(page.get_by_role("button", name="Retry")).to_have_count(0)
    page.get_by_role("link", name="Cancel…").click()
    page.get_by_role("button", name="Cancel the job").click()  # its confirm step

    expect(page.locator("[data-state]")).to_have_text("failed")
    expect(page.locator("#job")).to_contain_text("cancelled")
    expect(page.locator("#job")).to_contain_text("задача отменена оператором")
    cancelled = status(console, waiter)
    assert cancelled["state"] == "failed" and cancelled["error"]["code"] == "cancelled"
    # The running holder is cancelled cooperatively: its page offers Cancel too
    page = console.open(f"/console/jobs/{holder}")
    expect(page.locator("[data-state]")).to_have_text("active")
    expect(page.get_by_role("link", name="Cancel…")).to_have_count(1)
