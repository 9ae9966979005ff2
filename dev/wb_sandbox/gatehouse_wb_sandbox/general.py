"""General (01-general): ``GET /ping`` on every host and ``GET /api/v1/seller-info`` on common-api."""

from __future__ import annotations

from datetime import datetime

from gatehouse_wb_sandbox.calls import Call, Reply
from gatehouse_wb_sandbox.data import MSK, seller_profile


def ping(call: Call) -> Reply:
    """The token reached the host and its category fits (the gateway checked both)."""
    return Reply(200, {"TS": datetime.now(MSK).isoformat(timespec="seconds"), "Status": "OK"})


def seller_info(call: Call) -> Reply:
    profile = seller_profile(call.sandbox.spec, call.seller)
    return Reply(
        200, {"name": profile.name, "sid": call.seller, "tin": profile.tin, "tradeMark": profile.trade_mark}
    )
