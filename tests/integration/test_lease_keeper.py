"""The lease keeper renews each lease on its own heartbeat, whatever the others' (real PostgreSQL and Redis)."""

from __future__ import annotations

import time
import uuid

from gatehouse.composition import bootstrap
from gatehouse.gate import owner
from gatehouse.job_types import IMPORT_USER_FEEDS
from gatehouse_worker.runtime import JobContext
from gatehouse_worker.wiring import job_runtime, lease_keeper


def test_a_gate_heartbeat_shorter_than_the_liveness_beat_keeps_the_gate(settings, clean):
    # A gate lease of 600 ms renewed every 100 ms, while the liveness beat is 2 s: the keeper must
    # wake for the gate, not only for the liveness beat (it used to, and the gate ran out).
    gh = bootstrap(
        settings.model_copy(
            update={"gate_lease_ms": 600, "gate_heartbeat_ms": 100, "worker_heartbeat_ms": 2_000}
        )
    )
    s = gh.settings
    keeper = lease_keeper(gh, "test-worker")
    try:
        account = uuid.uuid4()
        with gh.uow.autocommit() as tx:
            job, _ = gh.jobs.create(tx, IMPORT_USER_FEEDS, account_id=None)
        claim = gh.jobs.claim(job.id, job.message_number, 3_000, worker="test-worker", start=True)
        me = owner(job.queue, job.id)
        acquired = gh.gate.acquire(
            str(account), me, tier="user", lease_ms=600, wanted_ttl_ms=1_000, waiting_ttl_ms=1_000,
            first_wait_ms=0,
        )  # fmt: skip
        assert acquired.proceed
        access = job_runtime(gh).wb_access
        ctx = JobContext(claim=claim, jobs=gh.jobs, wb_access=access, poll_delay_ms=s.gate_poll_delay_ms)
        keeper.add(ctx)
        keeper.holds_gate(ctx, str(account), me)
        keeper.start()

        # For five leases' worth of time the gate stays ours and the run is never told it lost it.
        until = time.monotonic() + 3.0
        while time.monotonic() < until:
            assert gh.gate.inspect(str(account)).holder == me
            assert not ctx.lost.is_set()
            time.sleep(0.05)
    finally:
        keeper.stop()
        gh.close()


def test_a_run_past_its_time_limit_has_its_leases_no_longer_renewed(settings, clean):
    # Two runs holding their rows and gates; one goes past its time limit: only the other's leases move.
    gh = bootstrap(settings)
    keeper = lease_keeper(gh, "test-worker")
    try:
        runs = []
        for _ in range(2):
            account = str(uuid.uuid4())
            with gh.uow.autocommit() as tx:
                job, _ = gh.jobs.create(tx, IMPORT_USER_FEEDS, account_id=None)
            claim = gh.jobs.claim(job.id, job.message_number, 3_000, worker="test-worker", start=True)
            me = owner(job.queue, job.id)
            assert gh.gate.acquire(
                account, me, tier="user", lease_ms=3_000, wanted_ttl_ms=1_000, waiting_ttl_ms=1_000,
                first_wait_ms=0,
            ).proceed  # fmt: skip
            ctx = JobContext(claim=claim, jobs=gh.jobs, wb_access=None, poll_delay_ms=500)  # type: ignore[arg-type]
            keeper.add(ctx)
            keeper.holds_gate(ctx, account, me)
            runs.append((ctx, account))
        (within, _), (overdue, overdue_account) = runs
        within.deadline = time.monotonic() + 60
        overdue.deadline = time.monotonic() - 0.001

        def leases():
            rows = {c.claim.job_id: gh.jobs.get(c.claim.job_id).lease_until for c, _ in runs}
            gates = {a: gh.gate.inspect(a).lease_ms_left for _, a in runs}
            return rows, gates

        rows_before, _ = leases()
        time.sleep(0.05)
        keeper.renew_rows()
        keeper.renew_gates()
        rows_after, gates_after = leases()

        assert rows_after[within.claim.job_id] > rows_before[within.claim.job_id]
        assert rows_after[overdue.claim.job_id] == rows_before[overdue.claim.job_id]
        assert gates_after[overdue_account] < gates_after[runs[0][1]]
        assert not overdue.lost.is_set()  # not lost: it stops on its own (time_limits), or its leases run out
    finally:
        keeper.stop()
        gh.close()
