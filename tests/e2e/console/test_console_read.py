"""The console's read side in the browser: overview counts that link to their jobs, account names and
the name filter (an inline error that keeps the form), a job's attempts and its gate's holder, local
time beside UTC, and every main page at 390 px without sideways scroll."""

from __future__ import annotations

import re

from playwright.sync_api import expect

from tests.e2e.console.test_console_gates import held_gate
from tests.support.probe import PROBE
from tests.support.processes import wait_until


def test_from_an_overview_count_to_the_job_its_attempts_and_its_gates_holder(console, gh):
    account, holder, waiter, earlier = held_gate(gh, name="Магазин «Север»")
    for _ in range(2):
        gh.account_handlers.create_account("Близнец", "token")
    failed = gh.job_handlers.submit(PROBE, account_id=account, payload={"fail": "WB отклонил запрос"})[0].id
    wait_until(lambda: gh.jobs.get(failed).state == "failed", timeout=30, what="the job to fail")

    # The overview's failed count of the probe queue links to the jobs behind it, by name
    page = console.open("/console")
    page.locator("tr[data-queue='probe'] [data-count='failed24h'] a").click()
    expect(page).to_have_url(re.compile(r"/console/jobs\?.*state=failed.*finishedAfter="))
    expect(page.locator("#f-queue")).to_have_value("probe")
    row = page.locator(f"tr[data-job='{failed}']")
    expect(page.locator("#jobs tbody tr")).to_have_count(1)
    expect(row.get_by_role("link", name="Магазин «Север»")).to_have_attribute("title", str(account))

    # A name that no account has, or two have: said beside the form, whose values stay
    for name, why in (("Никто", "no account is named “Никто”"), ("Близнец", "more than one account")):
        page.fill("#f-account", name)
        page.get_by_role("button", name="Filter").click()
        expect(page.locator("#filter-error")).to_contain_text(why)
        expect(page.locator("#f-account")).to_have_value(name)
        expect(page.locator("#f-state")).to_have_value("failed")
        expect(page.locator("nav[aria-label=Console]")).to_be_visible()  # the page, not an error page
    page.fill("#f-account", "магазин «север»")  # any case
    page.get_by_role("button", name="Filter").click()
    expect(page.locator("#filter-error")).to_have_count(0)
    expect(page.locator(f"tr[data-job='{failed}']")).to_be_visible()

    # A job WB paused once: two attempts, parked then completed, each with its worker and duration
    page = console.open(f"/console/jobs/{earlier}")
    attempts = page.locator("#attempts tbody tr")
    expect(attempts).to_have_count(2)
    assert [attempts.nth(i).get_attribute("data-outcome") for i in range(2)] == ["parked", "completed"]
    expect(attempts.nth(1)).to_contain_text(gh.jobs.attempts(earlier)[1].worker)
    expect(page.locator("[data-total-ms]")).to_contain_text("from created to finished")
    # UTC as rendered, the browser's local time beside it (console.js)
    created = page.locator("#job time[datetime]").first
    expect(created).to_contain_text("UTC")
    expect(created).to_have_attribute("data-local", re.compile(r"\d"))
    expect(page.locator("#job .local-time").first).to_contain_text("local")
    console.shot("job-attempts")
    assert console.axe() == []

    # A job waiting for its account's gate names the holder, a link to it
    page = console.open(f"/console/jobs/{waiter}")
    expect(page.locator("#gate-holder")).to_contain_text("probe-user-a")
    page.locator("#gate-holder a").click()
    expect(page).to_have_url(f"{console.url}/console/jobs/{holder}")


def test_every_main_page_fits_390_px_without_sideways_scroll(console, gh):
    account, _, waiter, earlier = held_gate(gh, name="Магазин с очень длинным названием «Север-Юг»")
    console.page.set_viewport_size({"width": 390, "height": 844})
    for path in (
        "/console",
        "/console/jobs",
        f"/console/jobs/{earlier}",
        f"/console/jobs/{waiter}",
        "/console/throughput",
        "/console/accounts",
        f"/console/accounts/{account}",
        "/console/bulk-operations",
        "/console/webhooks/endpoints",
        "/console/webhooks/deliveries",
        "/console/modules",
        "/console/schedules",
    ):
        page = console.open(path)
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 390, f"{path} is {width} px wide at 390 px"
    console.shot("throughput-390")
