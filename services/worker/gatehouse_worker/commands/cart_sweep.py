"""gatehouse-cart-abandonment-sweep: run the cart abandonment sweep now, on the workers, and wait for it.

It reads the carts module's row first: with carts not installed or disabled it
changes nothing, prints MODULE_DISABLED and exits 2. Otherwise it queues the
sweep's job through the same idempotent path as the hourly tick (a sweep already
live is joined, not doubled) and, unless --no-wait, follows the job row until it
ends, printing how many carts it abandoned.

Exit codes: 0 done (or queued, with --no-wait); 1 the sweep failed; 2 the carts
module is off (MODULE_DISABLED); 3 --timeout passed before it ended; 4 bad
configuration (DATABASE_URL / REDIS_URL) or PostgreSQL unreachable.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING

from gatehouse.modules import ModuleDisabled
from gatehouse_worker import commands

if TYPE_CHECKING:
    from gatehouse.composition import Components

EXIT_OK, EXIT_FAILED, EXIT_MODULE_DISABLED, EXIT_TIMEOUT, EXIT_CONFIG = 0, 1, 2, 3, 4
PROG = "gatehouse-cart-abandonment-sweep"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Mark open carts untouched for CART_ABANDON_AFTER_MS abandoned (the sweep job, run by "
        "the workers, in batches of SWEEP_BATCH_SIZE) and wait for it to end.",
    )
    parser.add_argument("--no-wait", action="store_true", help="queue the sweep and exit")
    parser.add_argument("--timeout", type=float, default=600, help="give up waiting after SECONDS (600)")
    parser.add_argument("--interval", type=float, default=0.5, help="poll the job every SECONDS")
    args = parser.parse_args(argv)

    from gatehouse.sweeps.sweep import CART_ABANDONMENT

    def sweep(built: Components) -> int:
        try:
            built.modules.require(CART_ABANDONMENT.module, fresh=True)
        except ModuleDisabled as exc:
            print(
                f"{PROG}: {ModuleDisabled.code}: {exc} (module {exc.module}); nothing changed",
                file=sys.stderr,
            )
            return EXIT_MODULE_DISABLED
        job, created = built.job_handlers.submit(CART_ABANDONMENT.job_type, account_id=None)
        print(f"sweep job {job.id} {'queued' if created else 'already running: following it'}", flush=True)
        if args.no_wait:
            return EXIT_OK
        deadline = time.monotonic() + args.timeout
        while True:
            row = built.jobs.get(job.id)
            if row.state == "completed":
                result = row.result or {}
                if result.get("skipped"):
                    print(
                        f"{PROG}: {result.get('reason')}: module {result.get('module')} is off",
                        file=sys.stderr,
                    )
                    return EXIT_MODULE_DISABLED
                print(
                    f"abandoned {result.get('abandoned', 0)} cart(s) in {result.get('batches', 0)} batch(es)"
                )
                return EXIT_OK
            if row.state == "failed":
                message = (row.error or {}).get("message", "no reason recorded")
                print(f"{PROG}: sweep job {job.id} failed: {message}", file=sys.stderr)
                return EXIT_FAILED
            if time.monotonic() >= deadline:
                print(
                    f"{PROG}: sweep job {job.id} still {row.state} after {args.timeout:g} s", file=sys.stderr
                )
                return EXIT_TIMEOUT
            time.sleep(args.interval)

    return commands.run(PROG, sweep, exit_config=EXIT_CONFIG)


if __name__ == "__main__":
    sys.exit(main())
