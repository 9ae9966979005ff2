"""Accounts & gates in the browser: a gate held by a real running job, a second job of the account waiting
with its countdown, the account marked hot, the waiting job on the jobs page; names rendered as text."""

from __future__ import annotations

import re

from playwright.sync_api import expect

from tests.support.probe import GATED_USER_A, GATED_USER_B
from tests.support.processes import wait_until

XSS = "<script>alert(1)</script>"


def phase(gh, job_id) -> str | None:
    return (gh.jobs.get(job_id).progress or {}).get("phase")


def held_gate(gh, name="Магазин «Север»"):
    """A gated probe job holding its account's gate (running for a minute), a second one waiting;
    before them, a short one that WB paused once (a 429) and that then completed."""
    account = gh.account_handlers.create_account(name, "token").id
    earlier = gh.job_handlers.submit(
        GATED_USER_B, account_id=account, payload={"seconds": 1.5, "pause_once_ms": 300}
    )[0].id
    wait_until(
        lambda: gh.jobs.get(earlier).state == "completed", timeout=30, what="the first job to complete"
    )
    holder = gh.job_handlers.submit(GATED_USER_A, account_id=account, payload={"seconds": 60})[0].id
    wait_until(lambda: gh.jobs.get(holder).started_at, timeout=30, what="the holder to start")
    waiter = gh.job_handlers.submit(GATED_USER_B, account_id=account, payload={"seconds": 0.1})[0].id
    wait_until(lambda: phase(gh, waiter) == "waiting-account", timeout=30, what="the second job to wait")
    return account, holder, waiter, earlier


def ticking(locator) -> None:
    """The countdown's text changes by itself (console.js ticks it every second)."""
    expect(locator).to_have_text(re.compile(r"^in \d"))
    first = locator.inner_text()
    expect(locator).not_to_have_text(first)


def test_see_a_gate_held_and_a_job_waiting_with_its_countdown(console, gh):
    account, holder, waiter, earlier = held_gate(gh)
    quiet = gh.account_handlers.create_account("Quiet shop", "token").id

    # The account's page: the holder, its lease ticking down, the waiting job in line
    page = console.open(f"/console/accounts/{account}")
    gate = page.locator("#gate")
    expect(gate.locator("a[data-holder]")).to_have_text(str(holder))
    expect(gate.locator(f"tr[data-waiter='{waiter}']")).to_contain_text("user")
    ticking(gate.locator("time[data-countdown]").first)
    # … the holder's run on the timeline (and in its text twin), the waiter among the recent jobs
    # … WB's 429 pause of the earlier job, and the runs of who held the gate when
    expect(page.locator("#pauses")).to_contain_text(str(earlier)[:8])
    expect(page.locator("#pauses")).to_contain_text("wb-429")
    runs = page.locator("#timeline ol.runs li")
    expect(runs).to_have_count(2)
    expect(runs.nth(0)).to_contain_text("completed")
    expect(runs.nth(1)).to_contain_text(f"{str(holder)[:8]} probe-user-a")
    expect(runs.nth(1)).to_contain_text("now (running)")
    expect(page.locator("#timeline svg rect")).to_have_count(2)
    waiting_row = page.locator(f"#account-jobs tr[data-job='{waiter}']")
    expect(waiting_row).to_contain_text("Ждём завершения другой задачи по этому кабинету")
    ticking(waiting_row.locator("time[data-countdown]"))
    shot = console.shot("account-gate")
    assert shot.stat().st_size > 10_000
    body = page.locator("main").inner_text()
    assert str(holder) in body and "Waiting, next first" in body and str(waiter) in body
    assert console.axe() == []

    # The accounts list: that account is hot, the quiet one is not
    page = console.open("/console/accounts")
    row = page.locator(f"tr[data-account='{account}']")
    expect(row).to_have_class("hot")
    expect(row).to_contain_text("hot")
    expect(row.get_by_role("link", name=str(holder)[:8])).to_be_visible()
    expect(row.get_by_role("link", name=str(waiter)[:8]).first).to_be_visible()
    expect(page.locator(f"tr[data-account='{quiet}']")).not_to_contain_text("hot")
    console.shot("accounts")
    assert console.axe() == []
    page.select_option("#f-hot", "true")
    page.get_by_role("button", name="Filter").click()
    expect(page.locator(f"tr[data-account='{account}']")).to_be_visible()
    expect(page.locator(f"tr[data-account='{quiet}']")).to_have_count(0)

    # The jobs page, filtered by phase: the waiting job, its Russian message and its countdown
    page = console.open("/console/jobs")
    page.select_option("#f-phase", "waiting-account")
    page.get_by_role("button", name="Filter").click()
    expect(page).to_have_url(re.compile(r"phase=waiting-account"))
    row = page.locator(f"#jobs tr[data-job='{waiter}']")
    expect(row).to_contain_text("Ждём завершения другой задачи по этому кабинету — проверим через")
    expect(row).to_contain_text("1/1")  # attempt 1 of 1: waiting uses none
    ticking(row.locator("time[data-countdown]"))
    expect(page.locator(f"#jobs tr[data-job='{holder}']")).to_have_count(0)
    console.shot("jobs")
    assert console.axe() == []


def test_an_account_named_like_a_script_renders_as_text(console, gh):
    dialogs: list[str] = []
    console.page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    account = gh.account_handlers.create_account(XSS, "token").id

    for path in ("/console/accounts", f"/console/accounts/{account}"):
        page = console.open(path)
        expect(page.get_by_text(XSS).first).to_be_visible()
        assert page.locator("main script").count() == 0
    assert dialogs == []
