"""`make bench`: run every benchmark module (``bench/bench_*.py``), or those named on the command line.

Each module's ``main()`` prints its figures and returns them as ``list[Result]``; the run then
writes bench/report.md and bench/report.png (bench/report.py) for the modules it ran, and
prints where each figure stands. A module that fails is reported as failed; the others still run.
"""

from __future__ import annotations

import importlib
import sys
import time
import traceback
from pathlib import Path

from bench import report

names = sys.argv[1:] or sorted(p.stem for p in Path(__file__).parent.glob("bench_*.py"))
runs, failed = [], []
for name in names:
    module = importlib.import_module(f"bench.{name}")
    print(f"\n=== {name}: {module.__doc__.strip().splitlines()[0]}", flush=True)
    start = time.perf_counter()
    error = None
    try:
        results = module.main() or []
    except (Exception, SystemExit) as exc:
        traceback.print_exc()
        results, error = [], f"{type(exc).__name__}: {exc}"
        failed.append(name)
    seconds = time.perf_counter() - start
    runs.append(report.keep(name, results, seconds, error))
    print(f"--- {name} took {seconds:.0f} s", flush=True)

report.print_standing(report.write(runs, report.machine()))
print(f"\nwrote {report.HERE / 'report.md'} and {report.HERE / 'report.png'}")
if failed:
    sys.exit(f"failed: {', '.join(failed)}")
