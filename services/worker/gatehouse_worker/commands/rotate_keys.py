"""gatehouse-rotate-keys [--dry-run] [--batch-size N] [--max-batches N]: encrypt every stored secret
again with the first key of TOKEN_ENCRYPTION_KEY, here, in this process.

The WB tokens of the accounts and the webhook endpoints' secrets (current and previous) that are
not under the first key are re-encrypted with it (gatehouse.rotation), ``--batch-size`` rows a
transaction: stopped at any point, it leaves what it did committed, and run again it takes up
only what is left; a second run after a complete one changes nothing. It prints what it
re-encrypted and, per table, how many rows still use an old key; once that is 0 everywhere,
the old keys may be removed from TOKEN_ENCRYPTION_KEY. With --dry-run it only prints that count.

Exit codes: 0 no row uses an old key any more; 1 some still do (--max-batches stopped it, or a
secret no key decrypts: its key was removed too early); with --dry-run 0 whatever the count;
4 bad configuration (DATABASE_URL, REDIS_URL, TOKEN_ENCRYPTION_KEY) or PostgreSQL unreachable.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from gatehouse_worker import commands

if TYPE_CHECKING:
    from gatehouse.composition import Components

EXIT_OK, EXIT_LEFT, EXIT_CONFIG = 0, 1, 4
PROG = "gatehouse-rotate-keys"


def _positive(value: str) -> int:
    n = int(value)
    if n < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return n


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Re-encrypt every WB token and webhook secret with the first key of TOKEN_ENCRYPTION_KEY, "
        "in batches, and print how many rows still use an old key.",
    )
    parser.add_argument("--dry-run", action="store_true", help="only print how many rows use an old key")
    parser.add_argument("--batch-size", type=_positive, default=500, help="rows per transaction (500)")
    parser.add_argument("--max-batches", type=_positive, help="stop after this many batches (default: all)")
    args = parser.parse_args(argv)

    def rotate(built: Components) -> int:
        if args.dry_run:
            left = built.key_rotation.old_key_rows()
        else:
            run = built.key_rotation.rotate(batch_size=args.batch_size, max_batches=args.max_batches)
            for table, n in run.rotated.items():
                unreadable = f", {run.unreadable[table]} no key decrypts" if run.unreadable[table] else ""
                print(f"{table}: re-encrypted {n} row(s){unreadable}")
            print(f"in {run.batches} batch(es)")
            left = run.left
        for table, n in left.items():
            print(f"{table}: {n} row(s) still under an old key")
        return EXIT_LEFT if any(left.values()) and not args.dry_run else EXIT_OK

    return commands.run(PROG, rotate, exit_config=EXIT_CONFIG)


if __name__ == "__main__":
    sys.exit(main())
