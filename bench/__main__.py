"""`make bench`: run every benchmark module (``bench/bench_*.py``), or those named on the command line."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

names = sys.argv[1:] or sorted(p.stem for p in Path(__file__).parent.glob("bench_*.py"))
for name in names:
    module = importlib.import_module(f"bench.{name}")
    print(f"\n=== {name}: {module.__doc__.strip().splitlines()[0]}")
    module.main()
