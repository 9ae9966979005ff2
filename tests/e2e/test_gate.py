"""The per-account gate with real gatehouse-worker processes, real Redis and PostgreSQL, ms timings."""

from __future__ import annotations

import itertools
import json
import time
import uuid
from datetime import timedelta

import httpx
import pytest

from tests.conftest import ADMIN_TOKEN
from tests.support.probe import GATED_SCHED_A, GATED_SCHED_B, GATED_USER_A, GATED_USER_B, RUNS_KEY
from tests.support.processes import wait_until
from tests.support.wb_sandbox import running_sandbox, scaled_limits

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
GATE_ENV = {"GATE_LEASE_MS": "2000", "GATE_HEARTBEAT_MS": "300", "GATE_POLL_DELAY_MS": "500"}


def worker(processes, name="worker", **env):
    return processes.start(
        name, "gatehouse-worker", "--processes", "1", "--threads", "4", env={**GATE_ENV, **env}
    )


def account(gh) -> uuid.UUID:
    return gh.account_handlers.create_account(f"acc-{uuid.uuid4().hex[:6]}", "token").id


def segments(gh) -> dict[str, list[dict]]:
    by_job: dict[str, list[dict]] = {}
    for raw in gh.redis.lrange(RUNS_KEY, 0, -1):
        seg = json.loads(raw)
        by_job.setdefault(seg["job"], []).append(seg)
    return by_job


def done(gh, *ids) -> bool:
    return all(gh.jobs.get(i).state in ("completed", "failed") for i in ids)


def assert_no_overlap(spans: list[tuple[float, float]]) -> None:
    spans = sorted(spans)
    for (_, end), (start, _) in itertools.pairwise(spans):
        assert start >= end, f"overlapping runs: {spans}"


# -- the real imports ------------------------------------------------------------------


@pytest.fixture
def slow_sandbox():
    # Every WB call takes 60 ms, so an import runs long enough to be overlapped if the gate let it.
    with running_sandbox(time_scale=1000, rows_per_day=3, page_size=20, latency_ms=60) as sandbox:
        yield sandbox


def test_imports_of_one_account_never_overlap_while_other_accounts_run_alongside(processes, gh, slow_sandbox):
    worker(processes, WB_API_BASE_URL=slow_sandbox.url, **scaled_limits(1000))
    _, url = processes.api(env={"BACKEND_ROLE": "api", **GATE_ENV})
    accounts = [
        httpx.post(f"{url}/v1/accounts", json={"name": n, "wbToken": n}, headers=ADMIN).json()["accountId"]
        for n in ("s1", "s2")
    ]
    period = {"dateFrom": "2026-09-01", "dateTo": "2026-11-29"}

    # When feeds and report of each account are started together
    jobs = {
        (acc, kind): httpx.post(f"{url}/v1/accounts/{acc}/digitization/imports", json={"kind": kind, **period}, headers=ADMIN).json()["jobId"]
        for acc in accounts
        for kind in ("feeds", "report")
    }  # fmt: skip

    # Then the second job of an account says what it waits for (the job holding the gate, its own place
    # in line), and has not used an attempt
    def waiting_status():
        for (acc, kind), job_id in jobs.items():
            status = httpx.get(f"{url}/v1/jobs/{job_id}", headers=ADMIN).json()
            if (status["progress"] or {}).get("waitingFor"):
                return acc, kind, status
        return None

    acc, kind, status = wait_until(
        waiting_status, timeout=20, interval=0.01, what="a job waiting for its account"
    )
    holder = "report" if kind == "feeds" else "feeds"
    assert status["state"] == "delayed"
    waiting_for = status["progress"]["waitingFor"]
    assert waiting_for["phase"] in ("running", "rate-limited")
    assert waiting_for == {
        "jobId": jobs[(acc, holder)],
        "type": f"import-user-{holder}",
        "tier": "user",
        "phase": waiting_for["phase"],
    }
    assert status["progress"]["position"] == 1
    what = {"report": "импорта отчёта", "feeds": "импорта заказов и продаж"}[holder]
    assert status["progress"]["message"].startswith(
        f"Ждём завершения {what} по этому кабинету — вы следующий, проверим через"
    )
    assert status["progress"]["resumeAt"] is not None
    assert status["progress"]["attempt"] == 1

    # … all complete, one account's never overlap, and the two accounts ran side by side
    ids = [uuid.UUID(j) for j in jobs.values()]
    wait_until(lambda: done(gh, *ids), timeout=60, what="all imports to finish")
    rows = {key: gh.jobs.get(uuid.UUID(j)) for key, j in jobs.items()}
    assert {r.state for r in rows.values()} == {"completed"}
    assert {r.attempt for r in rows.values()} == {1}
    spans = {key: (r.started_at, r.finished_at) for key, r in rows.items()}
    for acc in accounts:
        assert_no_overlap([spans[(acc, "feeds")], spans[(acc, "report")]])
    first, second = ([spans[(acc, k)] for k in ("feeds", "report")] for acc in accounts)
    assert min(e for _, e in first) > min(s for s, _ in second) and min(e for _, e in second) > min(
        s for s, _ in first
    )


# -- priority, max wait, hand-off ------------------------------------------------------


def test_a_user_job_goes_before_a_scheduled_job_that_was_queued_earlier(processes, gh):
    worker(processes)
    acc = account(gh)
    holder = gh.job_handlers.submit(GATED_SCHED_A, account_id=acc, payload={"seconds": 1.0})[0].id
    wait_until(lambda: gh.jobs.get(holder).started_at, what="the scheduled job to hold the gate")
    earlier = gh.job_handlers.submit(GATED_SCHED_B, account_id=acc, payload={"seconds": 0.1})[0].id
    wait_until(
        lambda: (gh.jobs.get(earlier).progress or {}).get("phase") == "waiting-account", what="it to wait"
    )
    user = gh.job_handlers.submit(GATED_USER_A, account_id=acc, payload={"seconds": 0.1})[0].id

    wait_until(lambda: done(gh, holder, earlier, user), timeout=20, what="all three to finish")

    started = {j: gh.jobs.get(j).started_at for j in (holder, earlier, user)}
    assert started[holder] < started[user] < started[earlier]


def test_a_scheduled_job_past_its_max_wait_is_skipped_and_a_user_job_never_is(processes, gh):
    worker(processes)
    acc = account(gh)
    holder = gh.job_handlers.submit(GATED_SCHED_A, account_id=acc, payload={"seconds": 2.0})[0].id
    wait_until(lambda: gh.jobs.get(holder).started_at, what="the holder to start")
    scheduled = gh.job_handlers.submit(
        GATED_SCHED_B, account_id=acc, payload={"seconds": 0.1, "maxWaitMs": 600}
    )[0].id
    user = gh.job_handlers.submit(GATED_USER_A, account_id=acc, payload={"seconds": 0.1})[0].id

    wait_until(lambda: done(gh, holder, scheduled, user), timeout=20, what="all to finish")

    skipped, patient = gh.jobs.get(scheduled), gh.jobs.get(user)
    assert (skipped.state, skipped.result) == ("completed", {"skipped": True, "reason": "account-busy"})
    assert skipped.started_at is None and str(scheduled) not in segments(gh)
    assert patient.state == "completed" and patient.started_at > gh.jobs.get(holder).finished_at - timedelta(
        milliseconds=1
    )


def test_release_wakes_the_next_job_at_once_not_after_its_poll_delay(processes, gh, api_url):
    # Given a 15 s poll (the seed's value): only the instant hand-off can start the waiter sooner
    worker(processes, GATE_POLL_DELAY_MS="15000")
    acc = account(gh)
    first = gh.job_handlers.submit(GATED_USER_A, account_id=acc, payload={"seconds": 1.0})[0].id
    wait_until(lambda: gh.jobs.get(first).started_at, what="the first job to start")
    second = gh.job_handlers.submit(GATED_USER_B, account_id=acc, payload={"seconds": 0.1})[0].id
    wait_until(
        lambda: (gh.jobs.get(second).progress or {}).get("phase") == "waiting-account", what="it to wait"
    )

    # The operator view shows who holds, who wants and who waits
    gate = httpx.get(f"{api_url}/v1/admin/accounts/{acc}/gate", headers=ADMIN).json()
    assert gate["holder"] == str(first) and gate["waiting"] == [str(second)] and gate["wanted"] == str(second)
    assert 0 < gate["leaseMsLeft"] <= 2000

    wait_until(lambda: done(gh, first, second), timeout=10, what="both to finish")
    gap = gh.jobs.get(second).started_at - gh.jobs.get(first).finished_at
    assert timedelta(0) <= gap < timedelta(seconds=1)


@pytest.fixture
def api_url(processes):
    return processes.api(env={"BACKEND_ROLE": "api"})[1]


# -- crashes and re-entrancy -----------------------------------------------------------


def test_a_killed_worker_leaves_the_gate_for_at_most_one_lease_and_the_job_completes_once(processes, gh):
    doomed = worker(processes, "doomed")
    acc = account(gh)
    job_id = gh.job_handlers.submit(GATED_USER_A, account_id=acc, payload={"seconds": 1.5})[0].id
    wait_until(lambda: gh.jobs.get(job_id).started_at, what="the job to start")
    held = gh.gate.inspect(str(acc))
    assert held.holder.endswith(str(job_id))

    # When the worker dies without a chance to clean up
    doomed.kill_tree()
    killed_at = time.monotonic()

    # Then the lease lapses within one lease (2 s) …
    wait_until(
        lambda: gh.gate.inspect(str(acc)).holder is None, timeout=3, interval=0.02, what="the lease to lapse"
    )
    assert time.monotonic() - killed_at <= 2.2
    # … and a new worker gets the redelivered job and completes it exactly once
    worker(processes, "survivor")
    wait_until(lambda: done(gh, job_id), timeout=30, what="the job to complete after redelivery")
    assert gh.jobs.get(job_id).state == "completed"
    assert [s["paused"] for s in segments(gh)[str(job_id)]] == [False]


def test_a_job_paused_by_wb_keeps_the_gate_and_gets_it_back(processes, gh):
    worker(processes)
    acc = account(gh)
    # Given a job that pauses for WB half way (800 ms) and another job of the account queued behind it
    pausing = gh.job_handlers.submit(
        GATED_USER_A, account_id=acc, payload={"seconds": 0.4, "pause_once_ms": 800}
    )[0].id
    wait_until(lambda: gh.jobs.get(pausing).started_at, what="the first job to start")
    other = gh.job_handlers.submit(GATED_USER_B, account_id=acc, payload={"seconds": 0.1})[0].id

    # When the pause is over
    wait_until(lambda: (gh.jobs.get(pausing).progress or {}).get("phase") == "rate-limited", what="the pause")
    paused = gh.jobs.get(pausing)
    assert paused.state == "delayed" and paused.attempt == 1
    wait_until(lambda: done(gh, pausing, other), timeout=20, what="both to finish")

    # Then the paused job resumed before the other job ran at all: nothing came in between
    runs = segments(gh)
    first_end = max(s["end"] for s in runs[str(pausing)])
    assert min(s["start"] for s in runs[str(other)]) >= first_end
    assert gh.jobs.get(pausing).attempt == 1
