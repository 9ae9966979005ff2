"""Overview and schedules in the browser: a real worker alive, numbers moving without a reload, a module's
queue paused, and Run now turning into the tick's job on a worker."""

from __future__ import annotations

import httpx
from playwright.sync_api import expect

from gatehouse.job_types import CART_ABANDONMENT_SWEEP, REGISTRY
from tests.conftest import ADMIN_TOKEN
from tests.e2e.test_modules import logged, workers
from tests.support.probe import PROBE
from tests.support.processes import wait_until

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


def worker_of(gh, proc) -> str:
    """The worker name (host:pid:tail) of the dramatiq process under ``proc``, once it has beaten."""
    pids = {str(p) for p in proc.tree()}

    def named():
        names = [n.decode() for n in gh.redis.zrange(gh.liveness.workers_key, 0, -1)]
        return next((n for n in names if n.split(":")[-2] in pids), None)

    return wait_until(named, timeout=30, what="the worker's first heartbeat")


def mark_document(page) -> str:
    """Tag this document; a navigation would lose the tag. Returns the last refresh stamp."""
    page.evaluate("window.__sameDocument = 'yes'")
    return page.evaluate("document.body.dataset.refreshedAt || ''")


def still_same_document(page, refreshed: str) -> None:
    assert page.evaluate("window.__sameDocument") == "yes"  # never reloaded or navigated
    assert page.evaluate("performance.getEntriesByType('navigation').length") == 1
    assert page.evaluate("document.body.dataset.refreshedAt || ''") not in ("", refreshed)


def test_the_overview_shows_a_live_worker_and_its_numbers_move_without_a_reload(console, processes, gh):
    # Given a real worker process (2 threads) beside the API
    [proc] = workers(processes, n=1)
    wait_until(lambda: logged([proc], "Worker process is ready"), timeout=30, what="the worker")
    name = worker_of(gh, proc)

    # When the operator opens the overview
    page = console.open("/console")

    # Then the worker is alive, with its threads and the queues it consumes, and every queue is listed
    worker = page.locator(f"#workers tr[data-worker='{name}']")
    expect(worker).to_contain_text("alive")
    expect(worker).to_contain_text("busy 0 of 2 threads")
    expect(worker).to_contain_text("wb-user")
    expect(worker).to_contain_text("schedules")
    for queue in {t.queue for t in REGISTRY.values()}:
        expect(page.locator(f"#queues tr[data-queue='{queue}']")).to_be_visible()
    expect(page.locator("[data-store=postgresql]")).to_contain_text("up")
    expect(page.locator("[data-store=redis]")).to_contain_text("up")
    running = page.locator("#queues tr[data-queue='probe'] [data-count=running]")
    expect(running).to_have_text("0")
    refreshed = mark_document(page)

    # When a job starts running while the page is open
    job = gh.job_handlers.submit(PROBE, account_id=None, payload={"seconds": 30})[0].id
    wait_until(lambda: gh.jobs.get(job).state == "active", timeout=20, what="the probe to run")

    # Then its queue's running count and some worker's busy threads move, in the same document
    expect(running).to_have_text("1", timeout=20_000)
    holder = gh.jobs.get(job).worker
    expect(page.locator(f"#workers tr[data-worker='{holder}'] [data-busy]")).to_contain_text("busy 1 of")
    # and what that worker is doing: the job itself, linked
    doing = page.locator(f"#workers tr[data-worker='{holder}'] [data-running] a[href='/console/jobs/{job}']")
    expect(doing).to_be_visible()
    still_same_document(page, refreshed)

    text = page.locator("main").inner_text()
    for key in ("wb-user", "webhook.deliver", "catalog.bulk-operation", "probe", "alive", name):
        assert key in text, key
    shot = console.shot("overview")
    assert shot.stat().st_size > 10_000
    assert console.axe() == []


def test_a_module_switched_off_through_the_json_api_marks_its_queue_paused(console):
    page = console.open("/console")
    row = page.locator("#queues tr[data-queue='catalog.bulk-operation']")
    expect(row).to_be_visible()
    expect(row).not_to_contain_text("paused")
    refreshed = mark_document(page)

    response = httpx.put(f"{console.url}/v1/admin/modules/catalog", json={"enabled": False}, headers=ADMIN)
    assert response.status_code == 200, response.text

    expect(row.locator("[data-paused]")).to_have_text("paused (module off)", timeout=20_000)
    expect(page.locator("#queues tr[data-queue='wb-user']")).not_to_contain_text("paused")
    still_same_document(page, refreshed)


def test_run_now_sends_the_tick_and_its_fan_out_creates_the_job_on_a_worker(console, processes, gh, sql):
    [proc] = workers(processes, n=1)
    wait_until(lambda: logged([proc], "Worker process is ready"), timeout=30, what="the worker")
    page = console.open("/console/schedules")
    row = page.locator("tr[data-schedule='cart-abandonment']")
    expect(row.locator("[data-last-run]")).to_have_text("—")
    expect(row).to_contain_text("one system job")

    row.get_by_role("button", name="Run now").click()

    # The page comes back with its note, and the tick's fan-out makes the sweep's job, which runs
    expect(page).to_have_url(f"{console.url}/console/schedules?ran=cart-abandonment")
    expect(page.locator("[data-ran]")).to_have_text(
        "Tick sent for cart-abandonment: a worker fans it out in a moment."
    )
    rows = wait_until(
        lambda: (
            (r := sql("SELECT state FROM jobs WHERE type = :t", t=CART_ABANDONMENT_SWEEP.name))
            and r[0].state == "completed"
            and r
        ),
        timeout=30,
        what="the sweep job of the tick",
    )
    assert len(rows) == 1
    # … and its last run shows up without a reload (the schedules table is a live region)
    expect(page.locator("tr[data-schedule='cart-abandonment'] [data-last-run]")).not_to_have_text(
        "—", timeout=20_000
    )
    console.shot("schedules")
    assert console.axe() == []
