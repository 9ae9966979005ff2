"""The lease keeper renews each lease on its own heartbeat, whatever the others' (real PostgreSQL and Redis)."""

from __future__ import annotations

import time
import uuid

from gatehouse.composition import bootstrap
from gatehouse.gate import owner
from gatehouse.job_types import IMPORT_USER_FEEDS
from gatehouse_worker.leases import LeaseKeeper
from gatehouse_worker.runtime import JobContext


def test_a_gate_heartbeat_shorter_than_the_liveness_beat_keeps_the_gate(settings, clean):
    # A gate lease of 600 ms renewed every 100 ms, while the liveness beat is 2 s: the keeper must
    # wake for the gate, not only for the liveness beat (it used to, and the gate ran out).
    gh = bootstrap(
        settings.model_copy(
            update={"gate_lease_ms": 600, "gate_heartbeat_ms": 100, "worker_heartbeat_ms": 2_000}
        )
    )
    keeper = LeaseKeeper(gh, "test-worker")
    try:
        account = uuid.uuid4()
        job, _ = gh.jobs.create(
            type=IMPORT_USER_FEEDS.name, queue=IMPORT_USER_FEEDS.queue, tier="user", account_id=None,
            max_attempts=1,
        )  # fmt: skip
        claim = gh.jobs.claim(job.id, job.delivery, 3_000, worker="test-worker", start=True)
        me = owner(job.queue, job.id)
        acquired = gh.gate.acquire(
            str(account), me, tier="user", lease_ms=600, wanted_ttl_ms=1_000, waiting_ttl_ms=1_000,
            first_wait_ms=0,
        )  # fmt: skip
        assert acquired.proceed
        ctx = JobContext(gatehouse=gh, claim=claim)
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
