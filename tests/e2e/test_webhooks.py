"""Webhooks end to end: real worker processes, a real receiver verifying signatures with the README's helper.

Only loopback is ever contacted: the receivers listen on 127.0.0.1 / ::1, which
the tests allowlist (WEBHOOK_ALLOWED_HOSTS) where a delivery must go through.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from gatehouse.catalog import NewProduct, Price, ProductPatch
from gatehouse.composition import Gatehouse, bootstrap
from gatehouse.webhooks.store import Created
from tests.support.processes import wait_until
from tests.support.receiver import Receiver, Reply

ALLOW = "127.0.0.0/8,::1"
# Svix's schedule at 1/10,000: 0, 0.5 ms, 30 ms, 180 ms, 0.72 s, 1.8 s, 3.6 s, 3.6 s.
SCALE = 0.0001
SCHEDULE_MS = [0, 5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 36_000_000]


@pytest.fixture
def wh(settings, clean) -> Iterator[Gatehouse]:
    """The producer side with loopback allowlisted (the receivers of these tests)."""
    gatehouse = bootstrap(settings.model_copy(update={"webhook_allowed_hosts": ALLOW.split(","), "retry_delay_scale": SCALE}))
    yield gatehouse
    gatehouse.close()


@pytest.fixture
def receivers() -> Iterator[list[Receiver]]:
    made: list[Receiver] = []
    yield made
    for r in made:
        r.stop()


def receiver(receivers: list[Receiver], **kw) -> Receiver:
    r = Receiver(**kw)
    receivers.append(r)
    return r


def worker(processes, **env: str) -> None:
    processes.start(
        "worker",
        "gatehouse-worker",
        "--processes",
        "1",
        "--threads",
        "4",
        env={"WEBHOOK_ALLOWED_HOSTS": ALLOW, "RETRY_DELAY_SCALE": str(SCALE), "WEBHOOK_TIMEOUT_MS": "3000", **env},
    )


def endpoint(wh: Gatehouse, r: Receiver, **kw) -> Created:
    created = wh.webhooks.create_endpoint(r.url, **kw)
    r.secrets.append(created.secret)
    return created


def product_updated(wh: Gatehouse) -> None:
    """One domain event: a product edit raises catalog.product.updated (its jobs sent after commit)."""
    p = wh.catalog.create_product(NewProduct(sku="W-1", name="Stół", price=Price(100, "PLN")))
    wh.catalog.patch_product(p.id, ProductPatch(name="Stół dębowy"), actor="admin")


def test_an_event_to_three_endpoints_is_three_verified_deliveries(wh, processes, receivers):
    rs = [receiver(receivers) for _ in range(3)]
    for r in rs:
        endpoint(wh, r)
    worker(processes)

    product_updated(wh)

    for r in rs:
        wait_until(lambda r=r: r.received, timeout=30, what="the delivery")
    got = [r.received[0] for r in rs]
    assert all(g.verified_by == (0,) for g in got)
    assert {g.event["type"] for g in got} == {"catalog.product.updated"}
    assert len({g.webhook_id for g in got}) == 1 and got[0].webhook_id.startswith("msg_")
    deliveries = wh.webhooks.list_deliveries()
    wait_until(
        lambda: all(d.status == "delivered" for d in wh.webhooks.list_deliveries()), timeout=10, what="delivered"
    )
    assert len(deliveries) == 3
