"""The autobidder's view of an account: its campaigns, their current bids and recent stats."""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

from gatehouse.job_types import AUTOBIDDER_SYNC_USER
from gatehouse.wb import client as wb
from gatehouse.wb import tables
from gatehouse.wb.tables import WbData
from gatehouse_worker.runtime import JobContext, job

STATS_DAYS = 7  # fullstats allows up to 31 days per call
IDS_PER_CALL = 50  # and up to 50 campaigns
# WB keeps statistics for campaigns finished (7), active (9) and paused (11) only: fullstats is for those.
WITH_STATS = frozenset({7, 9, 11})


@job(AUTOBIDDER_SYNC_USER)
def autobidder_sync_user(ctx: JobContext, data: WbData) -> dict[str, Any]:
    client = ctx.wb()
    campaigns = (client.call(wb.ADVERTS) or {}).get("adverts", [])
    data.upsert(tables.CAMPAIGNS, ctx.job.account_id, campaigns)
    stats = sync_stats(ctx, data, client, campaigns, date.today(), days=STATS_DAYS)
    return {"campaigns": len(campaigns), "statDays": stats}


def sync_stats(
    ctx: JobContext, data: WbData, client: wb.WbClient, campaigns: list[dict], today: date, *, days: int
) -> int:
    """Fullstats of the ``days`` days before ``today`` of the ``campaigns`` (adverts v2 shape) WB
    keeps statistics for, 50 per call."""
    ids = [c["id"] for c in campaigns if c.get("status") in WITH_STATS]
    begin, end = (today - timedelta(days=days)).isoformat(), (today - timedelta(days=1)).isoformat()
    written = 0
    for start in range(0, len(ids), IDS_PER_CALL):
        chunk = ",".join(str(i) for i in ids[start : start + IDS_PER_CALL])
        answer = client.call(wb.FULLSTATS, params={"ids": chunk, "beginDate": begin, "endDate": end}) or []
        days = [{"advertId": item["advertId"], "day": day} for item in answer for day in item.get("days", [])]
        data.upsert(tables.CAMPAIGN_STATS, ctx.job.account_id, days)
        written += len(days)
    return written
