"""gatehouse-search-reindex: queue a re-index of the catalog search; with --wait, follow it to its end.

Exit codes: 0 queued (or, with --wait, completed); 1 the operation failed;
2 bad configuration (DATABASE_URL / REDIS_URL) or PostgreSQL unreachable;
3 --timeout passed before it ended.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING

from gatehouse_worker import commands

if TYPE_CHECKING:
    from gatehouse.composition import Components

EXIT_OK, EXIT_FAILED, EXIT_CONFIG, EXIT_TIMEOUT = 0, 1, 2, 3


def _counters(op) -> str:
    return f"{op.status}: processed {op.processed}/{op.total}, succeeded {op.succeeded}, failed {op.failed}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="gatehouse-search-reindex",
        description="Rebuild every product's search document (a search_reindex bulk operation run by "
        "the workers) and swap the new index in when it is complete.",
    )
    parser.add_argument("--wait", action="store_true", help="follow the counters until it ends")
    parser.add_argument("--timeout", type=float, default=None, help="with --wait: give up after SECONDS")
    parser.add_argument("--interval", type=float, default=0.5, help="with --wait: poll every SECONDS")
    args = parser.parse_args(argv)

    def reindex_now(built: Components) -> int:
        reindex = built.catalog_handlers.start_reindex(requester=None, reason="cli")
        op = reindex.operation
        state = "already running" if reindex.already_running else "queued"
        print(f"re-index {op.id} {state} ({op.total} products)", flush=True)
        if not args.wait:
            return EXIT_OK
        deadline = None if args.timeout is None else time.monotonic() + args.timeout
        last = None
        while True:
            op = built.bulk.get(op.id)
            line = _counters(op)
            if line != last:
                print(line, flush=True)
                last = line
            if op.status == "completed":
                return EXIT_OK
            if op.status == "failed":
                message = (op.error or {}).get("message", "no reason recorded")
                print(f"re-index {op.id} failed: {message}", file=sys.stderr)
                return EXIT_FAILED
            if deadline is not None and time.monotonic() >= deadline:
                print(f"re-index {op.id} still {op.status} after {args.timeout:g} s", file=sys.stderr)
                return EXIT_TIMEOUT
            time.sleep(args.interval)

    return commands.run("gatehouse-search-reindex", reindex_now, exit_config=EXIT_CONFIG)


if __name__ == "__main__":
    sys.exit(main())
