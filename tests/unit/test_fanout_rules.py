"""The fan-out's pure rules: a cron's cadence, each schedule's spread window, an account's offset in it."""

from __future__ import annotations

import uuid

import pytest

from gatehouse import job_types as jt
from gatehouse.fanout import offset_ms
from gatehouse.gate.vocabulary import DUE_AT_FIELD, GATE_TIER_FIELD, MAX_WAIT_FIELD, GateSpec
from gatehouse.schedules import FAN_OUTS, Schedule, cadence_ms, schedules

MINUTE, HOUR, DAY = 60_000, 3_600_000, 86_400_000


@pytest.mark.parametrize(
    ("cron", "cadence"),
    [
        ("*/5 * * * *", 5 * MINUTE),
        ("* * * * *", MINUTE),
        ("*/30 * * * *", 30 * MINUTE),
        ("15 * * * *", HOUR),
        ("0 2 * * *", DAY),
        ("0 2,3 * * *", HOUR),  # the shortest gap, not the average
        ("10,50 * * * *", 20 * MINUTE),  # across the hour: 50 → 10
        ("0 0 * * 1-5", DAY),
        ("0 0 * * 0", 7 * DAY),
        ("0 0 * * 7", 7 * DAY),  # 7 is Sunday too
        ("0 0 1 1 *", 365 * DAY),
        ("0 9 * * mon-fri", DAY),
        ("0 9 * * SAT", 7 * DAY),
        ("0 0 1-31 * *", DAY),  # every day written out is no day rule
        ("0 0 1-6,8-31 * 1", DAY),  # … but all days but the 7th is one (either day rule may match)
        ("0 0 7 * 0-6", 28 * DAY),  # every weekday is no weekday rule: the 7th of each month
        ("@hourly", HOUR),
        ("@daily", DAY),
    ],
)
def test_the_cadence_of_a_cron_is_the_shortest_time_between_two_runs(cron, cadence):
    assert cadence_ms(cron) == cadence


@pytest.mark.parametrize("cron", ["* * * *", "61 * * * *", "0 0 31 2 *", "x * * * *"])
def test_a_cron_it_cannot_read_fails_when_the_schedule_is_made(cron):
    with pytest.raises(ValueError):
        Schedule("bad", jt.RNP_ADS, cron)


def test_the_spread_is_half_the_cadence_unless_set_and_a_single_job_is_never_spread():
    by_name = schedules({})
    assert by_name["rnp-ads"].spread == 150_000  # the 5-minute ads tick spreads over 150 s
    assert by_name["digitization-incremental"].spread == 15 * MINUTE
    assert by_name["inventory"].spread == 30 * MINUTE
    assert by_name["digitization-backfill"].spread == 12 * HOUR
    assert {by_name[n].spread for n in ("cart-abandonment", "price-list-status", "rfq-expiry")} == {0}

    overridden = schedules({"rnp-ads": {"spread_ms": 60_000}, "inventory": {"spread_ms": 0}})
    assert (overridden["rnp-ads"].spread, overridden["inventory"].spread) == (60_000, 0)
    with pytest.raises(ValueError, match="nothing to spread"):
        schedules({"rfq-expiry": {"spread_ms": 1_000}})
    with pytest.raises(ValueError, match="unknown field"):
        schedules({"rnp-ads": {"spread": 1_000}})


def test_each_per_account_schedule_has_its_own_fan_out_job_type_and_a_single_job_one_has_none():
    by_name = schedules({})
    for name, schedule in by_name.items():
        if schedule.per_account:
            fan_out = schedule.fan_out
            assert (fan_out.name, fan_out.queue, fan_out.tier) == (
                f"fan-out:{name}",
                "schedules",
                "scheduled",
            )
            assert fan_out.gate is None and jt.REGISTRY[fan_out.name] is FAN_OUTS[name]
        else:
            assert schedule.fan_out is None


def test_an_accounts_offset_is_stable_within_the_window_and_the_offsets_spread_evenly():
    window = 150_000
    accounts = [uuid.uuid4() for _ in range(10_000)]
    offsets = [offset_ms(a, window) for a in accounts]
    assert offsets == [offset_ms(a, window) for a in accounts]  # the same at every tick
    assert all(0 <= o < window for o in offsets)
    # Ten slices of 15 s each hold about a tenth of the accounts (binomial: ±3 % is > 6 sigma).
    slices = [0] * 10
    for o in offsets:
        slices[o * 10 // window] += 1
    assert all(700 <= n <= 1_300 for n in slices), slices
    assert offset_ms(accounts[0], 0) == 0  # no window: due at the tick


def test_a_jobs_gate_wait_begins_when_it_is_due_and_a_promoted_one_waits_as_a_user_job():
    spec = GateSpec("scheduled", 300_000)
    assert spec.waits_from({}, 1_000) == 1_000
    assert spec.waits_from({DUE_AT_FIELD: 91_000}, 1_000) == 91_000
    assert spec.tier_of({}) == "scheduled"
    assert spec.tier_of({GATE_TIER_FIELD: "user"}) == "user"
    assert spec.tier_of({GATE_TIER_FIELD: "something else"}) == "scheduled"


def test_the_incremental_syncs_max_wait_follows_its_interval_unless_set():
    by_name = schedules({})
    assert by_name["digitization-incremental"].max_wait == 30 * MINUTE == jt.SYNC_INCREMENTAL.gate.max_wait_ms
    assert by_name["digitization-incremental"].payload() == {}  # the job type's: nothing to carry

    hourly = schedules({"digitization-incremental": {"cron": "0 * * * *"}})["digitization-incremental"]
    assert hourly.max_wait == HOUR and hourly.payload() == {MAX_WAIT_FIELD: HOUR}
    pinned = schedules({"digitization-incremental": {"cron": "0 * * * *", "max_wait_ms": 600_000}})
    assert pinned["digitization-incremental"].payload() == {MAX_WAIT_FIELD: 600_000}
    # Another schedule's max wait is its job type's, whatever its cron
    assert schedules({"rnp-ads": {"cron": "0 * * * *"}})["rnp-ads"].max_wait == 5 * MINUTE
