"""gatehouse-prune [--dry-run]: delete now what outlived its retention, here, in this process.

The same deletion as the hourly ``maintenance:prune`` job (gatehouse.retention), in batches of
PRUNE_BATCH_SIZE, each its own transaction; running beside that job, or twice, deletes each row
once. It prints the rows deleted per table. With --dry-run it deletes nothing and prints, per
table, what it would delete.

Exit codes: 0 done; 4 bad configuration (DATABASE_URL / REDIS_URL) or PostgreSQL unreachable.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from gatehouse_worker import commands

if TYPE_CHECKING:
    from gatehouse.composition import Components

EXIT_OK, EXIT_CONFIG = 0, 4
PROG = "gatehouse-prune"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Delete finished jobs, webhook deliveries and their attempts, notifications and "
        "audit rows older than their retention (JOB_RETENTION_*, WEBHOOK_RETENTION_*, "
        "NOTIFICATION_RETENTION, AUDIT_RETENTION), in batches of PRUNE_BATCH_SIZE.",
    )
    parser.add_argument("--dry-run", action="store_true", help="print what it would delete; delete nothing")
    args = parser.parse_args(argv)

    def prune(built: Components) -> int:
        retention = built.retention_handlers
        run = retention.prunable() if args.dry_run else retention.prune()
        verb = "would delete" if args.dry_run else "deleted"
        for table, n in run.deleted.items():
            print(f"{table}: {verb} {n} row(s)")
        if not args.dry_run:
            print(f"in {run.batches} batch(es)")
        return EXIT_OK

    return commands.run(PROG, prune, exit_config=EXIT_CONFIG)


if __name__ == "__main__":
    sys.exit(main())
