"""The use cases of carts, price lists and RFQs: their admin writes, and running a sweep to its end."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any

from gatehouse.catalog import CatalogStore
from gatehouse.errors import ValidationFailed
from gatehouse.modules import ModuleDisabled, ModuleStates
from gatehouse.sweeps import rules
from gatehouse.sweeps import sweep as sweeps
from gatehouse.sweeps.store import SweepStore
from gatehouse.sweeps.tables import CartRecord, PriceListRecord, RfqRecord
from gatehouse.uow import Tx, UnitOfWork

log = logging.getLogger(__name__)


class SweepHandlers:
    def __init__(
        self,
        uow: UnitOfWork,
        store: SweepStore,
        catalog: CatalogStore,
        modules: ModuleStates,
        *,
        batch_size: int,
        abandon_after_ms: int,
    ) -> None:
        # Carts build on the catalog: an item names a product by its sku.
        self.uow, self.store, self.catalog, self.modules = uow, store, catalog, modules
        self.batch_size, self.abandon_after_ms = batch_size, abandon_after_ms

    def create_cart(self, customer_ref: str, items: list[dict[str, Any]]) -> CartRecord:
        with self.uow.begin() as tx:
            self._require_products(tx, items)
            return self.store.create_cart(tx, customer_ref, items)

    def set_cart_items(self, cart_id: uuid.UUID, items: list[dict[str, Any]], *, actor: str) -> CartRecord:
        with self.uow.begin() as tx:
            self._require_products(tx, items)
            return self.store.set_cart_items(tx, cart_id, items, actor=actor)

    def _require_products(self, tx: Tx, items: list[dict[str, Any]]) -> None:
        """Every item's sku is a product of the catalog; each one that is not is an error (``items.N.sku``)."""
        rules.check_items(items)
        missing = self.catalog.missing_skus(tx, [item["sku"] for item in items])
        if missing:
            raise ValidationFailed.of(
                [
                    (f"items.{n}.sku", f"items.{n}.sku: no product has the sku {item['sku']!r}")
                    for n, item in enumerate(items)
                    if item["sku"] in missing
                ]
            )

    def create_price_list(self, name: str, valid_from: datetime, valid_to: datetime) -> PriceListRecord:
        with self.uow.begin() as tx:
            return self.store.create_price_list(tx, name, valid_from, valid_to)

    def create_rfq(self, customer_ref: str, expires_at: datetime) -> RfqRecord:
        with self.uow.begin() as tx:
            return self.store.create_rfq(tx, customer_ref, expires_at)

    def run(self, name: str, *, between_batches: Callable[[], None] = lambda: None) -> sweeps.SweepRun:
        """Run the sweep ``name`` (``SWEEPS``) to its end, a transaction per batch of SWEEP_BATCH_SIZE.

        Before each batch its module's row is read fresh: off before the first batch raises
        ModuleDisabled; off later stops the run between batches. ``between_batches`` runs after
        each committed batch (a job checks it still holds its row).
        """
        sweep = sweeps.SWEEPS[name]
        done = sweeps.SweepRun(sweep)
        while True:
            try:
                self.modules.require(sweep.module, fresh=True)
            except ModuleDisabled:
                if done.batches == 0:
                    raise
                done.stopped = ModuleDisabled.code
                log.info(
                    "%s: module %s went off; stopped after %d batch(es)", name, sweep.module, done.batches
                )
                return done
            with self.uow.begin() as tx:
                flipped = sweeps.run_batch(
                    tx, sweep, size=self.batch_size, params={"abandon_after_ms": self.abandon_after_ms}
                )
            if not flipped:
                return done
            done.batches += 1
            for status, ids in flipped.items():
                done.flipped[status] = done.flipped.get(status, 0) + len(ids)
            between_batches()
