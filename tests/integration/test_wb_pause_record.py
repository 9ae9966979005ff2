"""WB 429 pauses noted per account (gatehouse.wb.pauses), and the worker's hook that never fails a job for it."""

from __future__ import annotations

import dataclasses
import json
import time
import uuid
from datetime import UTC, datetime, timedelta

from redis import Redis

from gatehouse import progress as P
from gatehouse import run_decision as rd
from gatehouse.errors import JobPaused
from gatehouse.job_types import IMPORT_USER_FEEDS
from gatehouse.wb import pauses
from gatehouse.wb.errors import WbRateLimited
from gatehouse_worker.runtime import JobContext
from gatehouse_worker.wiring import job_runtime


def test_a_pause_is_kept_newest_first_capped_and_expiring(gh):
    account, now = str(uuid.uuid4()), int(time.time() * 1000)
    jobs = [uuid.uuid4() for _ in range(pauses.KEEP + 3)]
    for i, job in enumerate(jobs):
        gh.pauses.record(account, job, at_ms=now + i, resume_at_ms=now + i + 1000, reason=P.WB_429)

    kept = gh.pauses.recent(account)
    assert [p.job_id for p in kept] == jobs[::-1][: pauses.KEEP]
    assert kept[0].resume_at - kept[0].at == timedelta(seconds=1) and kept[0].reason == "wb-429"
    assert 0 < gh.redis.pttl(gh.pauses.key(account)) <= pauses.TTL_MS
    # Older than a day: not recent any more, even while the list lives on
    assert gh.pauses.recent(account, now=datetime.now(UTC) + timedelta(hours=25)) == []
    other = str(uuid.uuid4())
    assert gh.pauses.recent_many([other, account])[0] == []
    assert gh.pauses.recent_many([]) == []


def claimed(gh):
    account = gh.account_handlers.create_account("Shop", "token").id
    job, _ = gh.job_handlers.submit(IMPORT_USER_FEEDS, account_id=account, payload={})
    claim = gh.jobs.claim(job.id, 1, 60_000, start=True)
    access = job_runtime(gh).wb_access  # what the worker gives its runs
    return account, JobContext(
        claim=claim, jobs=gh.jobs, wb_access=access, poll_delay_ms=gh.settings.gate_poll_delay_ms
    )


def limited(ctx):
    raise WbRateLimited("WB answered 429 on GET /report", retry_after_s=2.0)


def test_the_worker_notes_a_429_pause_for_the_account(gh):
    account, ctx = claimed(gh)
    before = int(time.time() * 1000)

    outcome = job_runtime(gh)._body(limited, ctx, IMPORT_USER_FEEDS, started=True, limit_ms=60_000)

    assert isinstance(outcome, rd.Paused) and outcome.phase == P.RATE_LIMITED
    [pause] = gh.pauses.recent(str(account))
    assert pause.job_id == ctx.job.id and pause.reason == P.WB_429
    assert before <= pause.at.timestamp() * 1000 <= pause.resume_at.timestamp() * 1000 - 1500
    raw = json.loads(gh.redis.lindex(gh.pauses.key(str(account)), 0))
    assert set(raw) == {"jobId", "at", "resumeAt", "reason"}


def test_other_pauses_are_not_429s_and_are_not_noted(gh):
    account, ctx = claimed(gh)

    def bucket_empty(ctx):
        raise JobPaused(
            "bucket", resume_at_ms=int(time.time() * 1000) + 500, phase=P.RATE_LIMITED, reason="bucket"
        )

    assert isinstance(
        job_runtime(gh)._body(bucket_empty, ctx, IMPORT_USER_FEEDS, started=True, limit_ms=60_000), rd.Paused
    )
    assert gh.pauses.recent(str(account)) == []


def test_a_redis_that_fails_to_note_the_pause_does_not_fail_the_job(gh, caplog):
    account, ctx = claimed(gh)
    dead = Redis(host="127.0.0.1", port=1, socket_connect_timeout=0.2, socket_timeout=0.2)
    runtime = job_runtime(dataclasses.replace(gh, pauses=pauses.AccountPauses(dead, prefix=gh.pauses.prefix)))

    outcome = runtime._body(limited, ctx, IMPORT_USER_FEEDS, started=True, limit_ms=60_000)

    assert isinstance(outcome, rd.Paused) and outcome.reason == P.WB_429
    assert "could not be noted" in caplog.text
    assert gh.pauses.recent(str(account)) == []
