"""Catalog search against real PostgreSQL: documents follow edits, ranking and prefixes, the re-index."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import pytest

from gatehouse.catalog import NewProduct, Price, ProductPatch
from gatehouse.catalog.bulk import OperationRecord, Reindex, Selection
from gatehouse.errors import ValidationFailed
from gatehouse.job_types import CATALOG_BULK_OPERATION
from gatehouse.jobs import JobMessage
from gatehouse.search import tsquery_of


def skus(hits) -> list[str]:
    return [h.sku for h in hits]


def product(gh, sku: str, name: str, **kw):
    return gh.catalog_handlers.create_product(NewProduct(sku=sku, name=name, price=Price(100, "PLN"), **kw))


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


def start_reindex(gh, requester) -> tuple[Reindex, tuple[JobMessage, ...]]:
    """A re-index in its own unit of work, and the messages sent after its commit."""
    with gh.uow.begin() as tx:
        reindex = gh.bulk.start_reindex(tx, requester=requester, reason="requested")
        sent = tuple(tx.messages)
    return reindex, sent


def reindex_to_end(gh, op_id, size=2):
    steps = []
    while (batch := run_batch(gh, op_id, size, actor="admin")) is not None:
        steps.append(batch.operation)
    return steps


def create_bulk(gh, ids, patch: ProductPatch, patch_json: dict):
    """A bulk operation through its handler (BULK_SYNC_THRESHOLD = 50: these run at once)."""
    assert gh.settings.bulk_sync_threshold == 50
    return gh.catalog_handlers.create_bulk_operation(
        Selection(product_ids=tuple(ids)),
        patch,
        {"productIds": [str(i) for i in ids], "patch": patch_json},
        requester=None,
        actor="admin",
    )


def test_documents_follow_create_batch_patch_and_bulk_edits(gh):
    chair = product(gh, "CH-1", "Krzesło dębowe", description="do jadalni")
    gh.catalog_handlers.create_products(
        [NewProduct(sku=f"T-{i}", name=f"Stół {i}", price=Price(100, "PLN")) for i in range(3)]
    )
    assert skus(gh.search.search("krzeslo")) == ["CH-1"]  # accents folded (gatehouse_fold), case folded
    assert skus(gh.search.search("jadalni")) == ["CH-1"]
    assert sorted(skus(gh.search.search("stol"))) == ["T-0", "T-1", "T-2"]

    gh.catalog_handlers.patch_product(chair.id, ProductPatch(name="Fotel", status="active"), actor="admin")
    assert skus(gh.search.search("krzeslo")) == []
    [hit] = gh.search.search("fotel")
    assert (hit.product_id, hit.status) == (chair.id, "active")
    assert skus(gh.search.search("fotel", status="draft")) == []

    ids = [p.id for p in gh.catalog.list_products(limit=10) if p.sku.startswith("T-")]
    op = create_bulk(gh, ids, ProductPatch(name="Biurko"), {"name": "Biurko"})
    assert op.status == "completed"
    assert skus(gh.search.search("stol")) == [] and len(gh.search.search("biurko")) == 3


def bulk(gh, ids, patch: ProductPatch, patch_json: dict):
    op = create_bulk(gh, ids, patch, patch_json)
    assert (op.status, op.succeeded) == ("completed", len(ids))


def test_bulk_patches_refresh_documents_only_when_a_document_input_changes(gh, sql):
    gh.catalog_handlers.create_attribute("colour", "Kolor", True)
    gh.catalog_handlers.create_attribute("supplier", "Dostawca", False)
    ids = [product(gh, f"B-{i}", f"Regał {i}", status="draft").id for i in range(3)]

    def documents() -> dict:
        return dict(sql("SELECT product_id, xmin::text FROM search_documents"))

    before = documents()
    bulk(gh, ids, ProductPatch(price=Price(990, "PLN")), {"price": {"amount": 990, "currency": "PLN"}})
    bulk(gh, ids, ProductPatch(attributes={"supplier": "Meblex"}), {"attributes": {"supplier": "Meblex"}})
    assert documents() == before  # neither a price nor a non-searchable attribute is in a document

    text_before = dict(sql("SELECT product_id, document::text FROM search_documents"))
    bulk(gh, ids, ProductPatch(status="active"), {"status": "active"})
    assert len(gh.search.search("regał", status="active")) == 3  # the status filter follows
    # … by moving the status alone: the text is as it was
    assert dict(sql("SELECT product_id, document::text FROM search_documents")) == text_before
    bulk(gh, ids, ProductPatch(attributes={"colour": "orzech"}), {"attributes": {"colour": "orzech"}})
    assert sorted(skus(gh.search.search("orzech"))) == ["B-0", "B-1", "B-2"]
    assert all(documents()[i] != before[i] for i in ids)


def test_a_status_patch_during_a_reindex_reaches_the_swapped_index(gh, sql):
    gh.catalog_handlers.create_attribute("colour", "Kolor", False)
    ids = [product(gh, f"S-{i}", f"Szafa {i}", status="draft").id for i in range(6)]
    _, reindex = gh.catalog_handlers.patch_attribute("colour", searchable=True, actor="admin")
    op_id = reindex.operation.id
    assert run_batch(gh, op_id, 2, actor="admin").operation.status == "running"  # 2 rows in the shadow

    bulk(gh, ids, ProductPatch(status="active"), {"status": "active"})
    reindex_to_end(gh, op_id)

    assert len(gh.search.search("szafa", status="active")) == 6
    assert gh.search.search("szafa", status="draft") == []


def test_ranking_weights_and_prefix_on_the_last_word(gh):
    product(gh, "A-1", "Lampa", description="lampa stojąca z abażurem")
    product(gh, "A-2", "Abażur lniany")
    product(gh, "A-3", "Kinkiet", description="mosiężny")
    # name (A) outranks description (C)
    assert skus(gh.search.search("abażur")) == ["A-2", "A-1"]
    # the last word is a prefix; the others are whole words
    assert skus(gh.search.search("kink")) == ["A-3"]
    assert skus(gh.search.search("lampa stoj")) == ["A-1"]
    assert skus(gh.search.search("lam stojąca")) == []
    assert skus(gh.search.search("a-3")) == ["A-3"]  # the sku is in the document
    hits = gh.search.search("abażur")
    assert hits[0].rank > hits[1].rank > 0
    assert len(gh.search.search("a", limit=1)) == 1


def test_only_searchable_attribute_values_are_found(gh):
    gh.catalog_handlers.create_attribute("color", "Kolor", True)
    gh.catalog_handlers.create_attribute("supplier", "Dostawca", False)
    product(gh, "C-1", "Krzesło", attributes={"color": "czerwony", "supplier": "Meblex"})
    assert skus(gh.search.search("czerwony")) == ["C-1"]
    assert skus(gh.search.search("meblex")) == []


@pytest.mark.parametrize(("q", "field"), [("", "q"), ("   ", "q"), ("!!!", "q"), ("x" * 201, "q")])
def test_bad_queries_are_refused(gh, q, field):
    with pytest.raises(ValidationFailed) as err:
        gh.search.search(q)
    assert err.value.field == field


def test_bad_status_and_limit_are_refused(gh):
    with pytest.raises(ValidationFailed):
        gh.search.search("a", status="gone")
    with pytest.raises(ValidationFailed):
        gh.search.search("a", limit=0)


def test_query_quoting_leaves_no_operator_through():
    assert tsquery_of("krzesło czerw") == "'krzesło' & 'czerw':*"
    assert tsquery_of("a&b | !c'd") == "'a' & 'b' & 'c' & 'd':*"


def test_a_flip_reindexes_into_the_shadow_and_swaps_at_the_end(gh, sql):
    gh.catalog_handlers.create_attribute("material", "Materiał", False)
    for i in range(5):
        product(gh, f"M-{i}", f"Stół {i}", attributes={"material": "dąb"})

    attribute, reindex = gh.catalog_handlers.patch_attribute("material", searchable=True, actor="admin")
    assert attribute.searchable and not reindex.already_running
    op = reindex.operation
    assert (op.type, op.status, op.total) == ("search_reindex", "pending", 5)
    [(state,)] = sql("SELECT state FROM jobs WHERE id = :id", id=op.id)
    # … its job's message sent after the flip's commit
    assert state == "waiting" and gh.dispatcher.queued_job_ids({CATALOG_BULK_OPERATION.queue}) == {str(op.id)}

    # A label change is no flip: no re-index
    assert gh.catalog_handlers.patch_attribute("material", label="Tworzywo", actor="admin")[1] is None

    first = run_batch(gh, op.id, 2, actor="admin").operation
    assert (first.status, first.processed) == ("running", 2)
    assert skus(gh.search.search("dab")) == []  # the live index is the old one while the shadow builds

    # An edit while the shadow builds: written into both, so the swap keeps it
    edited = gh.catalog.list_products(limit=10)[0]
    gh.catalog_handlers.patch_product(edited.id, ProductPatch(name="Ława"), actor="admin")
    late = product(gh, "M-late", "Regał", attributes={"material": "dąb"})  # after the listing

    steps = reindex_to_end(gh, op.id)
    assert [s.status for s in steps] == ["running", "completed"]
    done = gh.bulk.get(op.id)
    assert (done.processed, done.succeeded, done.failed) == (5, 5, 0)
    assert sorted(skus(gh.search.search("dab"))) == sorted([f"M-{i}" for i in range(5)] + ["M-late"])
    assert skus(gh.search.search("lawa")) == [edited.sku]
    assert skus(gh.search.search("regal")) == [late.sku]
    assert run_batch(gh, op.id, 2, actor="admin") is None  # a duplicate run is a no-op


def test_one_live_reindex_at_a_time(gh):
    product(gh, "R-1", "Stół")
    first, first_sent = start_reindex(gh, requester=None)
    again, again_sent = start_reindex(gh, requester=None)
    assert not first.already_running and again.already_running
    assert [m.job_id for m in first_sent] == [first.operation.id]
    assert again.operation.id == first.operation.id and again_sent == ()
    reindex_to_end(gh, first.operation.id)
    assert gh.bulk.get(first.operation.id).status == "completed"
    third, _ = start_reindex(gh, requester=None)
    assert not third.already_running and third.operation.id != first.operation.id


def test_a_reindex_of_an_empty_catalog_completes_and_notifies_its_requester(gh, sql):
    ala = gh.account_handlers.create_user("ala@example.com", "Ala")
    reindex, _ = start_reindex(gh, requester=ala.id)
    [batch] = [run_batch(gh, reindex.operation.id, 10, actor=str(ala.id))]
    assert batch.operation.status == "completed" and batch.operation.total == 0
    assert [m.actor for m in batch.sent] == ["notifications.email"]  # its e-mail
    [(kind,)] = sql("SELECT kind FROM notifications WHERE user_id = :u", u=ala.id)
    assert kind == "catalog.search_reindex.completed"
