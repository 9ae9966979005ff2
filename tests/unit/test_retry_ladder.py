"""Retry policies as job types declare them: the WB ladder and explicit schedules."""

from __future__ import annotations

import pytest

from gatehouse.job_types import AUTOBIDDER_SYNC_USER, IMPORT_USER_FEEDS, IMPORT_USER_REPORT, RetryPolicy


def test_bullmq_ladder_from_60_s():
    # Attempt n failed → the next attempt waits base · 2^(n-1): 60, 120, 240, 480 s for 5 attempts.
    policy = RetryPolicy.exponential(attempts=5, base_ms=60_000)
    assert [policy.delay_ms(n) for n in range(1, 5)] == [60_000, 120_000, 240_000, 480_000]


def test_the_wb_user_jobs_keep_five_attempts_on_the_minute_ladder():
    for job_type in (IMPORT_USER_FEEDS, IMPORT_USER_REPORT, AUTOBIDDER_SYNC_USER):
        assert job_type.retry.attempts == 5
        assert [job_type.retry.delay_ms(n) for n in range(1, 5)] == [60_000, 120_000, 240_000, 480_000]


def test_an_explicit_schedule_gives_the_delay_after_each_attempt():
    # Svix's webhook schedule: immediately, 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h (8 attempts).
    svix = RetryPolicy.schedule(5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 36_000_000)
    assert svix.attempts == 8
    assert [svix.delay_ms(n) for n in range(1, 8)] == [
        5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 36_000_000,
    ]  # fmt: skip


def test_the_last_attempt_has_no_retry_and_a_policy_is_one_kind():
    with pytest.raises(ValueError):
        RetryPolicy.exponential(attempts=3, base_ms=1).delay_ms(3)
    with pytest.raises(ValueError):
        RetryPolicy(attempts=3)
    with pytest.raises(ValueError):
        RetryPolicy(attempts=3, base_ms=1, delays_ms=(1, 2))
    with pytest.raises(ValueError):
        RetryPolicy(attempts=3, delays_ms=(1,))
    assert RetryPolicy().attempts == 1
