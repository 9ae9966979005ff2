"""``make chaos``: ``python -m tests.chaos`` runs CHAOS_MINUTES (default 10) minutes, seed CHAOS_SEED (default random)."""

from __future__ import annotations

import os
import sys

from tests.chaos.suite import run


def main() -> int:
    minutes = float(os.environ.get("CHAOS_MINUTES", "10"))
    seed = int(os.environ["CHAOS_SEED"]) if os.environ.get("CHAOS_SEED") else None
    report = run(minutes, seed)
    print(report.table(), flush=True)
    return 1 if report.failed else 0


if __name__ == "__main__":
    sys.exit(main())
