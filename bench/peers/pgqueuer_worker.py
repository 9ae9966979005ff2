"""A PgQueuer worker process (python -m bench.peers.pgqueuer_worker): its defaults (10 rows a fetch)."""

from __future__ import annotations

import asyncio
import os
import signal

import psycopg
from pgqueuer.adapters.drivers.psycopg import PsycopgDriver
from pgqueuer.adapters.persistence.queries import Queries
from pgqueuer.core.qm import QueueManager

ENTRYPOINT = "noop"


async def main() -> None:
    async with await psycopg.AsyncConnection.connect(os.environ["PEERS_DSN"], autocommit=True) as conn:
        qm = QueueManager(Queries(PsycopgDriver(conn)))

        @qm.entrypoint(ENTRYPOINT)
        async def noop(job) -> None:
            return None

        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, qm.shutdown.set)
        await qm.run()


if __name__ == "__main__":
    asyncio.run(main())
