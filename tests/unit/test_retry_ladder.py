from __future__ import annotations

from gatehouse_worker.middleware.lifecycle import retry_delay_ms


def test_bullmq_ladder_from_60_s():
    # Attempt n failed → the next attempt waits base · 2^(n-1): 60, 120, 240, 480 s for 5 attempts.
    assert [retry_delay_ms(60_000, n) for n in range(1, 5)] == [60_000, 120_000, 240_000, 480_000]
