"""Catalog bulk operations against real PostgreSQL: the sync path, batches, exactness, bad selections."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import pytest

from gatehouse.catalog import NewProduct, Price, ProductPatch
from gatehouse.catalog.bulk import OperationRecord, Selection
from gatehouse.errors import ValidationFailed
from gatehouse.job_types import REGISTRY
from gatehouse.jobs import JobMessage


def products(gh, n: int, prefix: str = "SKU") -> list[uuid.UUID]:
    gh.catalog_handlers.create_products(
        [NewProduct(sku=f"{prefix}-{i:05d}", name=f"p{i}", price=Price(100, "PLN")) for i in range(n)]
    )
    return [p.id for p in gh.catalog.list_products(limit=10_000)]


NEW_PRICE = ProductPatch(price=Price(250, "PLN"))


def queued(gh) -> set[str]:
    """The ids of the jobs with a message on any queue (no worker consumes them here)."""
    return gh.dispatcher.queued_job_ids({t.queue for t in REGISTRY.values()})


def create(
    gh, selection, patch, request, *, requester=None, actor="admin"
) -> tuple[OperationRecord, set[str]]:
    """Create an operation (its handler: one unit of work, BULK_SYNC_THRESHOLD = 50); returns it and
    the ids of the jobs whose messages were sent after its commit."""
    assert gh.settings.bulk_sync_threshold == 50
    before = queued(gh)
    op = gh.catalog_handlers.create_bulk_operation(
        selection, patch, request, requester=requester, actor=actor
    )
    return op, queued(gh) - before


def start(gh, ids, patch=NEW_PRICE):
    request = {"productIds": [str(i) for i in ids], "patch": {"price": {"amount": 250, "currency": "PLN"}}}
    return create(gh, Selection(product_ids=tuple(ids)), patch, request)


@dataclass(frozen=True)
class Batch:
    """A committed batch: the operation after it, and the messages its unit of work sent after the commit."""

    operation: OperationRecord
    sent: tuple[JobMessage, ...]


def run_batch(gh, op_id: uuid.UUID, size: int, *, actor: str) -> Batch | None:
    with gh.uow.begin() as tx:
        op = gh.bulk.run_batch(tx, op_id, size, actor=actor)
        sent = tuple(tx.messages)  # sent when the block ends (the commit), then cleared
    return None if op is None else Batch(op, sent)


def audit_rows(sql) -> int:
    return sql("SELECT count(*) FROM audit_log WHERE action = 'product.bulk_update'")[0][0]


def test_fifty_products_are_patched_at_once_in_one_transaction_and_recorded(gh, sql):
    ids = products(gh, 50)

    op, sent = start(gh, ids)

    assert sent == set() and op.status == "completed"  # no webhook endpoint: nothing to send
    assert (op.total, op.processed, op.succeeded, op.failed) == (50, 50, 50, 0)
    assert {gh.catalog.get_product(i).price_amount for i in ids} == {250}
    assert audit_rows(sql) == 50
    assert sql("SELECT count(*) FROM jobs")[0][0] == 0  # nothing queued
    assert gh.bulk.get(op.id).status == "completed"


def test_fifty_one_products_are_queued_with_their_job_row_in_the_same_transaction(gh, sql):
    ids = products(gh, 51)

    op, sent = start(gh, ids)

    assert op.status == "pending" and sent == {str(op.id)}  # its job's message, sent after the commit
    [(state, payload)] = sql("SELECT state, payload FROM jobs WHERE id = :id", id=op.id)
    assert (state, payload) == ("waiting", {"operationId": str(op.id)})
    assert {gh.catalog.get_product(i).price_amount for i in ids} == {100}  # not run on the request path


def test_batches_move_the_counters_exactly_and_a_finished_operation_takes_no_more(gh, sql):
    ids = products(gh, 51)
    op, _ = start(gh, ids)

    seen = []
    while (step := run_batch(gh, op.id, 20, actor="admin")) is not None:
        seen.append((step.operation.status, step.operation.processed))
        assert step.sent == ()  # started with the admin token: nobody to notify (and no endpoint)

    assert seen == [("running", 20), ("running", 40), ("completed", 51)]
    assert run_batch(gh, op.id, 20, actor="admin") is None  # a duplicate run is a no-op
    assert audit_rows(sql) == 51
    done = gh.bulk.get(op.id)
    assert (done.succeeded, done.failed, done.started_at is not None) == (51, 0, True)


def test_unknown_products_are_failed_items_not_an_error(gh):
    ids = products(gh, 3)
    ghost = uuid.uuid4()

    op, _ = start(gh, [*ids, ghost])

    assert (op.status, op.succeeded, op.failed) == ("completed", 3, 1)
    assert op.failed_items == [{"productId": str(ghost), "reason": "product not found"}]


def test_a_product_already_as_patched_succeeds_without_an_audit_row(gh, sql):
    ids = products(gh, 2)
    start(gh, ids[:1])

    op, _ = start(gh, ids)

    assert (op.succeeded, op.failed) == (2, 0)
    assert audit_rows(sql) == 2  # one per product actually changed


def test_a_filter_selects_by_status_sku_prefix_and_attributes(gh):
    products(gh, 3, prefix="A")
    products(gh, 2, prefix="B")
    patch = ProductPatch(status="active")

    op, _ = create(
        gh, Selection(sku_prefix="B-"), patch, {"filter": {"skuPrefix": "B-"}, "patch": {"status": "active"}}
    )

    assert op.total == 2
    assert sorted(p.sku for p in gh.catalog.list_products(status="active", limit=10)) == [
        "B-00000",
        "B-00001",
    ]


def test_an_empty_selection_is_refused(gh):
    with pytest.raises(ValidationFailed):
        create(gh, Selection(sku_prefix="NOPE"), ProductPatch(status="active"), {})


def test_the_requester_is_notified_once_when_a_queued_operation_ends_and_not_for_a_small_one(gh, sql):
    ala = gh.account_handlers.create_user("ala@example.com", "Ala")
    ids = products(gh, 60)
    request = {"productIds": [str(i) for i in ids], "patch": {"status": "active"}}

    def start_as_ala(selected):
        return create(
            gh, Selection(product_ids=tuple(selected)), ProductPatch(status="active"), request,
            requester=ala.id, actor=str(ala.id),
        )  # fmt: skip

    start_as_ala(ids[:10])  # synchronous: it already answered its requester
    op, _ = start_as_ala(ids)
    sent = [b.sent for b in iter(lambda: run_batch(gh, op.id, 25, actor=str(ala.id)), None)]

    assert [len(d) for d in sent] == [0, 0, 1]  # the e-mail, only from the batch that ended it
    [[email]] = [d for d in sent if d]
    assert email.queue == "notifications.email" and str(email.job_id) in queued(gh)  # sent after the commit
    [(kind, title, link)] = sql("SELECT kind, title, link FROM notifications WHERE user_id = :u", u=ala.id)
    assert (kind, title) == ("catalog.bulk_operation.completed", "Operacja masowa zakończona")
    assert link == f"/console/bulk-operations/{op.id}"  # its console page (the e-mail adds PUBLIC_URL)
    assert sql("SELECT count(*) FROM jobs WHERE type = 'notifications.email'")[0][0] == 1
    assert run_batch(gh, op.id, 25, actor=str(ala.id)) is None  # a late duplicate notifies nobody


def test_an_operation_accepted_while_redis_was_down_is_sent_by_reconciliation(gh, settings, caplog):
    import logging

    from gatehouse.composition import bootstrap
    from gatehouse.job_types import CATALOG_BULK_OPERATION
    from tests.support.processes import free_port

    ids = products(gh, 51)
    offline = bootstrap(settings.model_copy(update={"redis_url": f"redis://127.0.0.1:{free_port()}/0"}))
    request = {"productIds": [str(i) for i in ids], "patch": {"status": "active"}}
    # Redis is down: the send after the commit is logged, the rows are safe
    with caplog.at_level(logging.WARNING, logger="gatehouse.uow"):
        op = offline.catalog_handlers.create_bulk_operation(
            Selection(product_ids=tuple(ids)),
            ProductPatch(status="active"),
            request,
            requester=None,
            actor="admin",
        )
    offline.close()
    assert f"job {op.id} is saved but not enqueued" in caplog.text
    assert gh.bulk.get(op.id).status == "pending"
    assert not gh.dispatcher.queued_job_ids({CATALOG_BULK_OPERATION.queue})

    assert gh.job_handlers.reconcile(grace_ms=0) == 1
    assert gh.dispatcher.queued_job_ids({CATALOG_BULK_OPERATION.queue}) == {str(op.id)}


def test_a_batch_changes_and_audits_exactly_what_the_rules_say(gh, sql):
    # The batch's SQL against the pure rules (gatehouse.catalog.rules.apply), product by product.
    from gatehouse.catalog import rules

    gh.catalog_handlers.create_attribute("color", "Kolor", True)
    gh.catalog_handlers.create_attribute("size", "Rozmiar", False)
    gh.catalog_handlers.create_products(
        [
            NewProduct(sku="A", name="a", price=Price(100, "PLN"), attributes={"color": "red", "size": 1}),
            NewProduct(
                sku="B", name="b", price=Price(250, "PLN"), status="active", attributes={"size": True}
            ),
            NewProduct(sku="C", name="c", price=Price(100, "EUR"), attributes={"color": "blue"}),
        ]
    )
    before = {p.sku: p for p in gh.catalog.list_products(limit=10)}
    patch = ProductPatch(price=Price(250, "PLN"), status="active", attributes={"color": "blue", "size": None})
    expected = {
        sku: rules.apply(
            patch, name=p.name, description=p.description, price=Price(p.price_amount, p.price_currency),
            status=p.status, attributes=p.attributes,
        )
        for sku, p in before.items()
    }  # fmt: skip
    request = {"productIds": [], "patch": {}}

    create(gh, Selection(product_ids=tuple(p.id for p in before.values())), patch, request)

    after = {p.sku: p for p in gh.catalog.list_products(limit=10)}
    audits = {
        row[0]: (row[1], row[2])
        for row in sql(
            "SELECT p.sku, a.before, a.after FROM audit_log AS a JOIN products AS p ON p.id::text = a.entity_id "
            "WHERE a.action = 'product.bulk_update'"
        )
    }
    for sku, change in expected.items():
        merged = {**before[sku].attributes, **change.columns.get("attributes", before[sku].attributes)}
        assert after[sku].attributes == change.columns.get("attributes", before[sku].attributes), (
            sku,
            merged,
        )
        assert (after[sku].price_amount, after[sku].price_currency, after[sku].status) == (
            250,
            "PLN",
            "active",
        )
        if change.columns:
            assert audits[sku] == (change.before, change.after), sku
        else:
            assert sku not in audits


def test_a_product_the_patch_would_take_past_the_attribute_limit_is_a_failed_item(gh):
    from gatehouse.catalog.rules import ATTRIBUTES_MAX

    codes = [f"a{i}" for i in range(ATTRIBUTES_MAX + 1)]
    for code in codes:
        gh.catalog_handlers.create_attribute(code, code, False)
    full = {code: 1 for code in codes[:ATTRIBUTES_MAX]}
    gh.catalog_handlers.create_products(
        [
            NewProduct(sku="FULL", name="full", price=Price(1, "PLN"), attributes=full),
            NewProduct(sku="ROOM", name="room", price=Price(1, "PLN")),
        ]
    )
    by_sku = {p.sku: p.id for p in gh.catalog.list_products(limit=10)}
    patch = ProductPatch(attributes={codes[-1]: 2})

    op, _ = create(gh, Selection(product_ids=tuple(by_sku.values())), patch, {"productIds": [], "patch": {}})

    assert (op.succeeded, op.failed) == (1, 1)
    assert op.failed_items == [
        {"productId": str(by_sku["FULL"]), "reason": f"more than {ATTRIBUTES_MAX} attributes"}
    ]
    assert len(gh.catalog.get_product(by_sku["FULL"]).attributes) == ATTRIBUTES_MAX  # left as it was
    assert gh.catalog.get_product(by_sku["ROOM"]).attributes == {codes[-1]: 2}


def test_listed_ids_count_once_and_an_empty_attributes_patch_changes_nothing(gh, sql):
    ids = products(gh, 3)

    op, _ = start(gh, [*ids, ids[0]], patch=ProductPatch(attributes={}))

    assert (op.total, op.succeeded, op.failed) == (3, 3, 0)
    assert audit_rows(sql) == 0
