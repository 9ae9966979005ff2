"""Modules in the browser: switching one off pauses its queue in a real worker; back on, it drains."""

from __future__ import annotations

from playwright.sync_api import expect

from tests.e2e.test_modules import logged, workers
from tests.support.processes import wait_until

QUEUE = "catalog.bulk-operation"


def test_disable_a_module_and_see_its_queue_paused(console, processes, gh):
    procs = workers(processes, n=1)
    wait_until(lambda: logged(procs, "Worker process is ready"), timeout=30, what="the worker")
    page = console.open("/console/modules")
    row = page.locator("tr[data-module=catalog]")
    expect(row).to_contain_text("enabled")
    expect(row).to_contain_text(QUEUE)
    row.get_by_role("link", name="Disable…").click()
    page.get_by_role("button", name="Disable the module").click()  # its confirm step
    expect(page.locator("tr[data-module=catalog]")).to_contain_text("disabled")
    assert not gh.modules.state("catalog", fresh=True).enabled
    wait_until(
        lambda: logged(procs, f"queue {QUEUE} is held (module catalog is off): its consumer is paused"),
        timeout=20,
        what="the worker to pause the queue",
    )
    console.shot("modules")
    page.locator("tr[data-module=catalog]").get_by_role("button", name="Enable").click()
    expect(page.locator("tr[data-module=catalog]")).to_contain_text("enabled")
    assert console.axe() == []
