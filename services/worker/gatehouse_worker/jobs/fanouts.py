"""The fan-out jobs of the per-account schedules: each writes its tick's jobs, chunk by chunk (gatehouse.fanout)."""

from __future__ import annotations

from typing import Any

from gatehouse.fanout import TICK_FIELD, FanOutHandlers
from gatehouse.schedules import FAN_OUTS
from gatehouse_worker.runtime import JobContext, job


def _fan_out(name: str):
    def body(ctx: JobContext, fan_outs: FanOutHandlers) -> dict[str, Any]:
        # Each chunk commits with its checkpoint: a retried or requeued run carries on after it.
        return fan_outs.run(
            name, tick_ms=ctx.payload[TICK_FIELD], resume=ctx.checkpoint, save=ctx.save_checkpoint
        )

    body.__name__ = body.__qualname__ = f"fan_out_{name.replace('-', '_')}"
    return job(FAN_OUTS[name])(body)


BODIES = {name: _fan_out(name) for name in FAN_OUTS}
