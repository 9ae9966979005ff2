"""The fleet benchmarks at a tiny size, so they cannot rot: bench_fleet on real processes, bench_fleet_reads in process."""

from __future__ import annotations

import math

import pytest

from bench import bench_fleet, bench_fleet_reads, bench_soak
from tests.conftest import TEST_REDIS_DB


@pytest.fixture
def bench_stores(pg_server: str, redis_server: str, monkeypatch) -> None:
    """The benches' throwaway database on the tests' server, their Redis database the tests' own."""
    monkeypatch.setenv("DATABASE_URL", pg_server)
    monkeypatch.setenv("REDIS_URL", redis_server)
    monkeypatch.setenv("GATEHOUSE_BENCH_REDIS_DB", str(TEST_REDIS_DB))


def test_bench_fleet_runs_a_tick_and_a_sweep_and_reports_every_figure(bench_stores, monkeypatch, capsys):
    monkeypatch.setattr(bench_fleet, "ACCOUNTS", 30)
    monkeypatch.setattr(bench_fleet, "ROUNDS", 1)
    monkeypatch.setattr(bench_fleet, "PROCESSES", 1)
    monkeypatch.setattr(bench_fleet, "THREADS", 4)
    monkeypatch.setattr(bench_fleet, "IDLE_S", 1.5)
    monkeypatch.setattr(bench_fleet, "DRAIN_TIMEOUT_S", 60)
    monkeypatch.setenv("FLEET_SCHEDULES", "rnp-ads,rfq-expiry")

    results = {r.name: r.value for r in bench_fleet.main()}
    out = capsys.readouterr().out

    assert "rnp-ads" in out and "not drained" not in out, out
    # Retention ran on the run's database (its counts are the steady state's measured side).
    assert "gatehouse-prune (rc 0)" in out, out
    # Every account got its ads job, measured from its row: 30 children × 288 ticks a day / 30 accounts.
    assert results["job rows per account per day"] == 288
    for figure in ("fan-out/floor, rnp-ads", "drain s, rnp-ads", "worker CPU ms/job, rnp-ads"):
        assert math.isfinite(results[figure]) and results[figure] > 0, (figure, out)
    assert math.isfinite(results["status poll p99 during tick / idle"]), out
    assert results["Redis bytes per account, fullest"] > 0
    assert results["jobs bytes per row"] > 100
    assert results["WB calls per account per minute"] > 0
    # The ads sync against its floor (the same calls and upserts, bare)
    assert math.isfinite(results["worker CPU/floor, rnp-ads"]) and results["worker CPU/floor, rnp-ads"] > 0


def test_bench_soak_samples_every_figure_and_plots_them(bench_stores, monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(bench_soak, "ACCOUNTS", 30)
    monkeypatch.setattr(bench_soak, "MINUTES", 1.0)
    monkeypatch.setattr(bench_soak, "SAMPLE_S", 10.0)
    monkeypatch.setattr(bench_soak, "PLOT", tmp_path / "soak.png")

    results = {r.name: r.value for r in bench_soak.main()}

    out = capsys.readouterr().out
    assert "autovacuum on" in out, out
    assert (tmp_path / "soak.png").stat().st_size > 10_000
    assert math.isfinite(results["growth after the first third, jobs"]), out
    assert results["worker CPU ms per run (median)"] > 0, out
    assert math.isfinite(results["status poll p99 later / first third"]), out


def test_bench_fleet_reads_measures_every_probe_at_both_sizes(bench_stores, monkeypatch, capsys):
    monkeypatch.setattr(bench_fleet_reads, "ACCOUNTS", 400)
    monkeypatch.setattr(bench_fleet_reads, "ROUNDS", 3)
    monkeypatch.setattr(bench_fleet_reads, "STATS_SETTLE_S", 0)  # its scan counts are not asserted here

    results = {r.name: r.value for r in bench_fleet_reads.main()}

    out = capsys.readouterr().out
    assert f"{400 * bench_fleet_reads.ROWS_PER_ACCOUNT:,} rows" in out, out
    assert math.isfinite(results["status poll GET /v1/jobs/{id} p99 full/empty"])
    assert any(name.startswith("console jobs?phase=waiting-account") for name in results)
