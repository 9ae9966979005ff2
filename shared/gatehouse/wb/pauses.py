"""Recent WB 429 pauses of each seller account: which job WB stopped, when, and until when.

The worker records one when WB answered 429 and the job paused (gatehouse_worker.pipeline);
operators read them (GET /v1/admin/accounts, the console) to see which account is hot.
Each account keeps its last ``KEEP`` pauses for ``TTL_MS`` in a Redis list, newest first:
LPUSH + LTRIM + PEXPIRE in one round trip, under the deployment's prefix. A pause is a fact
for operators, never part of a job's outcome: ``record`` is best effort and the caller logs
its Redis errors.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime

from redis import Redis

from gatehouse import hot

KEEP = 20
TTL_MS = 24 * 3600 * 1000


def pauses_key(prefix: str, account_id: str) -> str:
    # The braces are a Cluster hash tag, as in the gate's keys: one account, one slot.
    return f"{prefix}:account:{{{account_id}}}:pauses"


@dataclass(frozen=True)
class Pause:
    job_id: uuid.UUID
    at: datetime
    resume_at: datetime
    reason: str


def _ms(at: datetime) -> int:
    return int(at.timestamp() * 1000)


def _at(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, UTC)


class AccountPauses:
    """The accounts' recent pauses in Redis, every key starting with ``prefix``."""

    def __init__(self, redis: Redis, *, prefix: str) -> None:
        self.redis = redis
        self.prefix = prefix

    def key(self, account_id: str) -> str:
        return pauses_key(self.prefix, account_id)

    def record(
        self, account_id: str, job_id: uuid.UUID, *, at_ms: int, resume_at_ms: int, reason: str
    ) -> None:
        """Note a pause of ``job_id`` (WB stopped it at ``at_ms`` until ``resume_at_ms``), newest first."""
        entry = json.dumps({"jobId": str(job_id), "at": at_ms, "resumeAt": resume_at_ms, "reason": reason})
        key = self.key(account_id)
        pipe = self.redis.pipeline(transaction=True)
        pipe.lpush(key, entry)
        pipe.ltrim(key, 0, KEEP - 1)
        pipe.pexpire(key, TTL_MS)
        hot.note(pipe, self.prefix, account_id, until_ms=at_ms + TTL_MS)  # the pause makes it hot a day
        pipe.execute()

    def recent_many(self, account_ids: list[str], *, now: datetime | None = None) -> list[list[Pause]]:
        """Each account's pauses of the last ``TTL_MS``, newest first, in one round trip."""
        if not account_ids:
            return []
        pipe = self.redis.pipeline(transaction=False)
        for account_id in account_ids:
            pipe.lrange(self.key(account_id), 0, KEEP - 1)
        since = _ms(now or datetime.now(UTC)) - TTL_MS
        out = []
        for raw_list in pipe.execute():
            pauses = []
            for raw in raw_list:
                item = json.loads(raw)
                if item["at"] >= since:
                    pauses.append(
                        Pause(
                            uuid.UUID(item["jobId"]), _at(item["at"]), _at(item["resumeAt"]), item["reason"]
                        )
                    )
            out.append(pauses)
        return out

    def recent(self, account_id: str, *, now: datetime | None = None) -> list[Pause]:
        return self.recent_many([account_id], now=now)[0]
