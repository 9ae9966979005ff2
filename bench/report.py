"""`make bench`'s report: bench/report.md (the machine, every figure and where it stands) and bench/report.png.

Each run of ``python -m bench`` also keeps its modules' results in ``var/bench/<module>.json``;
``python -m bench.report`` writes the report again from every module's latest results kept
there (e.g. after running subsets separately).
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import platform
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import psycopg
import redis

from bench.support import REPO, Result
from gatehouse.settings import Settings

HERE = Path(__file__).resolve().parent
KEPT = REPO / "var" / "bench"


def machine() -> dict[str, str]:
    """On what machine (and servers) the figures were made."""
    info = {"date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")}
    info["cores (nproc)"] = str(len(os.sched_getaffinity(0)))
    cpuinfo = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    models = [line.split(":", 1)[1].strip() for line in cpuinfo.splitlines() if line.startswith("model name")]
    info["CPU"] = models[0] if models else platform.processor() or "unknown"
    meminfo = Path("/proc/meminfo").read_text() if Path("/proc/meminfo").exists() else ""
    for line in meminfo.splitlines():
        if line.startswith("MemTotal:"):
            info["memory"] = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
    info["OS"] = f"{platform.system()} {platform.release()}"
    info["Python"] = platform.python_version()
    base = Settings()
    dsn = (base.database_url or "postgresql://postgres@127.0.0.1:5432/postgres").replace(
        "postgresql+psycopg://", "postgresql://"
    )
    try:
        with psycopg.connect(dsn, connect_timeout=5) as conn:
            info["PostgreSQL"] = conn.execute("SHOW server_version").fetchone()[0]
    except psycopg.Error as exc:
        info["PostgreSQL"] = f"unknown ({type(exc).__name__})"
    try:
        client = redis.Redis.from_url(base.redis_url or "redis://127.0.0.1:6379/0", socket_timeout=5)
        info["Redis"] = client.info("server")["redis_version"]
        client.close()
    except redis.RedisError as exc:
        info["Redis"] = f"unknown ({type(exc).__name__})"
    return info


def keep(bench: str, results: list[Result], seconds: float, error: str | None = None) -> dict:
    """One module's results of this run, kept for ``python -m bench.report``."""
    KEPT.mkdir(parents=True, exist_ok=True)
    record = {
        "bench": bench,
        "seconds": seconds,
        "error": error,
        "when": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        # The machine is shared: how busy it was when the module ended (1-minute load average).
        "load": os.getloadavg()[0],
        "results": [dataclasses.asdict(r) for r in results],
    }
    (KEPT / f"{bench}.json").write_text(json.dumps(record, indent=1))
    return record


def kept() -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(KEPT.glob("bench_*.json"))]


def _fmt(value: float, unit: str) -> str:
    if unit == "ratio":
        return f"{value:.2f}"
    if abs(value) >= 100:
        return f"{value:,.0f} {unit}"
    return f"{value:.1f} {unit}"


def _score(r: Result) -> float:
    """How far past its target a figure is: > 1 passes, whichever side is better."""
    if r.higher_is_better:
        return r.value / r.target
    return r.target / r.value if r.value else float("inf")


def _stand(r: Result) -> str:
    if r.met is None:
        return "—"
    return "met" if r.met else "**missed**"


def write(
    runs: list[dict], info: dict[str, str], md: Path = HERE / "report.md", png: Path = HERE / "report.png"
):
    """The report of these runs (one record per module, as ``keep`` writes them). Returns the results."""
    results = [Result(**r) for run in runs for r in run["results"]]
    whens = sorted(run["when"] for run in runs)
    info = {**info, "runs": f"{whens[0][:16].replace('T', ' ')} – {whens[-1][11:16]} UTC"} if whens else info
    targeted = [r for r in results if r.target is not None]
    lines = [
        "# Benchmark report",
        "",
        "Written by `make bench` (`python -m bench`); the chart: `report.png`.",
        "",
    ]
    lines += ["## Machine", "", "| | |", "| --- | --- |"]
    lines += [f"| {k} | {v} |" for k, v in info.items()]
    lines += ["", "## Figures", ""]
    lines += ["| benchmark | figure | value | target | stands |", "| --- | --- | --- | --- | --- |"]
    for r in results:
        target = "" if r.target is None else ("≥ " if r.higher_is_better else "≤ ") + _fmt(r.target, r.unit)
        lines.append(f"| {r.bench} | {r.name} | {_fmt(r.value, r.unit)} | {target} | {_stand(r)} |")
    met = sum(r.met for r in targeted)
    lines += ["", f"{met} of {len(targeted)} targets met."]
    lines += ["", "## Runs", ""]
    lines += ["| benchmark | ended (UTC) | took | load average at its end | outcome |"]
    lines += ["| --- | --- | --- | --- | --- |"]
    for run in runs:
        outcome = f"failed: {run['error']}" if run.get("error") else "ok"
        load = f"{run['load']:.1f}" if "load" in run else "?"
        lines.append(f"| {run['bench']} | {run['when']} | {run['seconds']:.0f} s | {load} | {outcome} |")
    cores = int(info.get("cores (nproc)", "0") or 0)
    busiest = max((run.get("load", 0.0) for run in runs), default=0.0)
    if cores and busiest > cores:
        lines += [
            "",
            f"The load average reached {busiest:.1f} on {cores} cores (a benchmark's own processes — "
            "workers, API, PostgreSQL, the load generator — and anything else running): figures made "
            "while the machine was oversubscribed are lower (latencies higher) than on a bigger one; "
            "the ratios to floors measured in the same run suffer less than absolute figures.",
        ]
    lines.append("")
    md.write_text("\n".join(lines))
    chart(targeted, info, png)
    return results


def chart(targeted: list[Result], info: dict[str, str], png: Path) -> None:
    """Every figure with a target as its distance past the target (1 = the target; right of it passes)."""
    rows = list(reversed(targeted))
    fig, ax = plt.subplots(figsize=(10, 0.45 * len(rows) + 1.8))
    scores = [_score(r) for r in rows]
    colors = ["#2e7d32" if r.met else "#c62828" for r in rows]
    y = range(len(rows))
    ax.barh(y, scores, color=colors, height=0.6)
    ax.axvline(1.0, color="black", linewidth=1, linestyle="--")
    ax.set_yticks(list(y), [f"{r.bench.removeprefix('bench_')}: {r.name}" for r in rows], fontsize=8)
    ax.set_xscale("log")
    ax.set_xlabel("value / target (≥ target) or target / value (≤ target); right of 1 passes — log scale")
    for i, (r, s) in enumerate(zip(rows, scores, strict=True)):
        sign = "≥" if r.higher_is_better else "≤"
        ax.text(
            s,
            i,
            f"  {_fmt(r.value, r.unit)} (target {sign} {_fmt(r.target, r.unit)})",
            va="center",
            fontsize=7,
        )
    lo, hi = min([*scores, 0.5]), max([*scores, 2.0])
    ax.set_xlim(lo / 1.5, hi * 6)
    ax.set_title(
        f"Gatehouse benchmarks vs their targets — {info.get('runs', info.get('date', ''))}\n"
        f"{info.get('cores (nproc)', '?')} cores ({info.get('CPU', '?')}), {info.get('memory', '?')}, "
        f"Python {info.get('Python', '?')}, PostgreSQL {info.get('PostgreSQL', '?').split()[0]}, "
        f"Redis {info.get('Redis', '?')}",
        fontsize=8,
    )
    fig.tight_layout()
    fig.savefig(png, dpi=120)
    plt.close(fig)


def print_standing(results: list[Result]) -> None:
    print("\n=== where each stands")
    for r in results:
        target = "" if r.target is None else ("≥ " if r.higher_is_better else "≤ ") + _fmt(r.target, r.unit)
        stand = {None: "", True: "met", False: "MISSED"}[r.met]
        print(f"{r.bench:20} {r.name:44} {_fmt(r.value, r.unit):>16} {target:>14} {stand}")


if __name__ == "__main__":
    runs = kept()
    if not runs:
        sys.exit(f"no results kept in {KEPT}; run python -m bench first")
    print_standing(write(runs, machine()))
    print(f"wrote {HERE / 'report.md'} and {HERE / 'report.png'} from {len(runs)} kept runs")
