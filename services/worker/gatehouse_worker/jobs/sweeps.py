"""The sweeps of carts, price lists and RFQs: each job runs its sweep to the end (gatehouse.sweeps).

A sweep's module off: the job does nothing and says so in its result.
"""

from __future__ import annotations

from typing import Any

from gatehouse.modules import ModuleDisabled
from gatehouse.sweeps.handlers import SweepHandlers
from gatehouse.sweeps.sweep import SWEEPS
from gatehouse_worker.runtime import JobContext, job


def _sweep(name: str):
    def body(ctx: JobContext, sweeps: SweepHandlers) -> dict[str, Any]:
        try:
            # Between batches: a run that lost its row stops (its batches so far are committed).
            return sweeps.run(name, between_batches=ctx.ensure_held).result()
        except ModuleDisabled as exc:
            return {"skipped": True, "reason": ModuleDisabled.code, "module": exc.module}

    body.__name__ = body.__qualname__ = name.replace("-", "_")
    return job(SWEEPS[name].job_type)(body)


cart_abandonment = _sweep("cart-abandonment")
price_list_status = _sweep("price-list-status")
rfq_expiry = _sweep("rfq-expiry")
