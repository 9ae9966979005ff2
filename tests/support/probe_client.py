"""Reading what probe jobs did (tests.support.probe) and creating them."""

from __future__ import annotations

import json
import uuid
from collections import Counter

from gatehouse.composition import Components
from gatehouse.jobs import JobRecord
from tests.support.probe import PROBE, RUNS_KEY


def submit_probes(gh: Components, n: int, **payload: object) -> list[uuid.UUID]:
    return [gh.job_handlers.submit(PROBE, account_id=None, payload=dict(payload))[0].id for _ in range(n)]


def runs(gh: Components) -> list[dict]:
    return [json.loads(r) for r in gh.redis.lrange(RUNS_KEY, 0, -1)]


def run_counts(gh: Components) -> Counter:
    return Counter(r["job"] for r in runs(gh))


def job(gh: Components, job_id: uuid.UUID) -> JobRecord:
    row = gh.jobs.get(job_id)
    assert row is not None, f"no row for job {job_id}"
    return row


def states(gh: Components, ids: list[uuid.UUID]) -> Counter:
    return Counter(job(gh, i).state for i in ids)
