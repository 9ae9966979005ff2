"""Bulk actions in the browser: a real 2,000-product operation on a real worker, watched live on its page.

The API runs without consumers (BACKEND_ROLE=api) so the operation waits, at
0 / 2000, until the test starts the worker with the page open; then the
counter must reach 2000 / 2000 through the page's live region alone: the
document is never reloaded (a marker set on ``window`` survives, the page
has one navigation) and ``body[data-refreshed-at]`` moves.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from gatehouse.catalog import NewProduct, Price, ProductPatch
from gatehouse.catalog.bulk import Selection
from gatehouse.catalog.rules import ATTRIBUTES_MAX
from tests.e2e.test_modules import logged, workers
from tests.support.processes import wait_until

TOTAL = 2_000
XSS = "<script>alert(1)</script>"


@pytest.fixture
def process_env(process_env):
    """The console's API hosts no consumers (the worker is started by the test) and refreshes fast."""
    return {**process_env, "BACKEND_ROLE": "api", "CONSOLE_REFRESH_MS": "400"}


def create_products(gh, n: int) -> list:
    for start in range(0, n, 1000):
        gh.catalog_handlers.create_products(
            [
                NewProduct(sku=f"CB-{i:05d}", name=f"Товар {i}", price=Price(100, "PLN"))
                for i in range(start, min(n, start + 1000))
            ]
        )
    with gh.engine.connect() as conn:
        return [p for (p,) in conn.exec_driver_sql("SELECT id FROM products ORDER BY id").fetchall()]


def queue(gh, ids, patch: dict, product_patch: ProductPatch):
    # Its job's message is sent after the commit and waits in Redis: no consumer yet
    return gh.catalog_handlers.create_bulk_operation(
        Selection(product_ids=tuple(ids)), product_patch, {"patch": patch}, requester=None, actor="admin"
    )


def test_a_bulk_operation_counter_reaches_the_total_without_a_reload(console, processes, gh):
    # Given a queued 2,000-product operation and nobody running it yet
    op = queue(gh, create_products(gh, TOTAL), {"price": {"amount": 555, "currency": "PLN"}},
               ProductPatch(price=Price(555, "PLN")))  # fmt: skip
    assert op.status == "pending"

    # When its page is open
    page = console.open(f"/console/bulk-operations/{op.id}")
    counter = page.locator("#operation [data-counter]")
    expect(counter).to_have_text(f"0 / {TOTAL}")
    expect(page.locator("#operation svg.bar")).to_have_attribute("data-total", str(TOTAL))
    assert page.locator("#operation").get_attribute("data-live") is not None
    page.evaluate("window.__sameDocument = 'yes'")
    refreshed = page.evaluate("document.body.dataset.refreshedAt || ''")
    assert console.axe() == []

    # And a worker starts, in small batches so the counter has steps to show
    procs = workers(processes, 1, BULK_BATCH_SIZE="25")
    wait_until(lambda: logged(procs, "Worker process is ready"), timeout=30, what="the worker")

    # Then the counter moves to the total on the page as it is
    seen: list[int] = []

    def done() -> bool:
        text = counter.text_content() or ""
        m = re.fullmatch(rf"(\d+) / {TOTAL}", text.strip())
        if m and (not seen or seen[-1] != int(m.group(1))):
            seen.append(int(m.group(1)))
        return bool(seen) and seen[-1] == TOTAL

    wait_until(done, timeout=90, interval=0.1, what="the counter to reach the total")
    assert seen[0] < TOTAL and seen == sorted(seen), seen
    expect(page.locator("#operation svg.bar")).to_have_attribute("data-processed", str(TOTAL))
    expect(page.locator("#operation svg.bar .bar-succeeded")).to_have_attribute("width", str(TOTAL))
    expect(page.locator("#operation .badge")).to_have_text("completed")
    assert page.evaluate("window.__sameDocument") == "yes"  # never reloaded
    assert page.evaluate("performance.getEntriesByType('navigation').length") == 1
    assert page.evaluate("document.body.dataset.refreshedAt || ''") not in ("", refreshed)
    assert gh.bulk.get(op.id).succeeded == TOTAL
    print("counter values seen:", seen[:10], "…", len(seen), "steps")
    console.shot("bulk-operation")
    assert console.axe() == []

    # And the list shows it completed, its bar full
    page = console.open("/console/bulk-operations?status=completed")
    row = page.locator(f"tr[data-operation='{op.id}']")
    expect(row.locator("[data-counter]")).to_have_text(f"{TOTAL} / {TOTAL}")
    expect(row.locator("svg.bar .bar-succeeded")).to_have_attribute("width", str(TOTAL))
    console.shot("bulk-operations")
    assert console.axe() == []


def test_a_failed_items_product_name_renders_as_text_and_the_operation_shows_its_failure(console, gh):
    dialogs: list[str] = []
    console.page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    codes = [f"c{i}" for i in range(ATTRIBUTES_MAX + 1)]
    for code in codes:
        gh.catalog_handlers.create_attribute(code, code, False)
    gh.catalog_handlers.create_products(
        [NewProduct(sku="XSS-1", name=XSS, price=Price(1, "PLN"), attributes=dict.fromkeys(codes[:-1], 1))]
    )
    [product] = gh.catalog.list_products(limit=1)
    op = gh.catalog_handlers.create_bulk_operation(
        Selection(product_ids=(product.id,)), ProductPatch(attributes={codes[-1]: 1}),
        {"patch": {"attributes": {codes[-1]: 1}}}, requester=None, actor="admin",
    )  # fmt: skip
    assert op.failed == 1

    page = console.open(f"/console/bulk-operations/{op.id}")

    row = page.locator(f"#failures tr[data-failure='{product.id}']")
    expect(row).to_contain_text("XSS-1")
    expect(row).to_contain_text(XSS)  # the name, as text
    expect(row).to_contain_text(f"more than {ATTRIBUTES_MAX} attributes")
    assert page.locator("#failures script").count() == 0
    assert dialogs == []
    assert console.axe() == []
    # Its one item failed: not a green "completed" and a full blue bar, but a warning and a red part
    expect(page.locator("#operation .badge")).to_have_text("completed with 1 failed")
    expect(page.locator("#operation .badge")).to_have_class(re.compile(r"\bwarn\b"))
    expect(page.locator("#operation svg.bar .bar-failed")).to_have_attribute("width", "1")
    expect(page.locator("#operation svg.bar .bar-failed")).to_have_css("fill", "rgb(164, 14, 38)")  # --bad
    expect(page.locator("#operation svg.bar .bar-succeeded")).to_have_css(
        "fill", "rgb(11, 92, 173)"
    )  # --accent
    console.shot("bulk-operation-with-failures")
    page = console.open("/console/bulk-operations")
    row = page.locator(f"tr[data-operation='{op.id}']")
    expect(row.locator(".badge")).to_have_text("completed with 1 failed")
    expect(row).to_contain_text("failed 1")
    expect(page.locator(f"tr[data-operation='{op.id}'] svg.bar .bar-failed")).to_have_css(
        "fill", "rgb(164, 14, 38)"
    )
    assert console.axe() == []
