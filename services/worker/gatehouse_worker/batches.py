"""Group commit: the claims and the outcomes of a worker process's threads, one statement per batch.

A consumer thread that claims a message, or writes how its run ended, hands the
request to its process's batcher and waits for its own answer. The batcher's
thread takes every request waiting when it is free and runs them as one
statement (``JobStore.claim_many``, ``JobStore.finish_many``): under load the
batch grows while the previous statement runs (and for WINDOW_S more), so N
threads pay one round trip and one commit instead of N; a request that comes
alone runs at once, never held back for company. The fencing is the statement's, row by row: a stale or duplicate
message claims nothing, a run that lost its row finishes nothing.

A batch that fails (PostgreSQL down) fails each of its requests with the
batch's error, and each thread handles it as it did its own statement (the
claim puts the message back, the outcome write retries). A process killed with
a batch in flight leaves the rows as the statement left them, all or none: a
committed claim is a running job of a dead worker (recovery requeues it), an
uncommitted one is a message still waiting to be claimed.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from queue import Empty, SimpleQueue
from typing import Generic, TypeVar

from gatehouse.jobs import Claim, JobStore, Outcome

log = logging.getLogger(__name__)
Req = TypeVar("Req")
Res = TypeVar("Res")
# Bounds one statement's arrays (a batch is at most every consumer thread's request anyway).
MAX_BATCH = 256
# Under load (the last batch had more than one request) a batch waits this long for more: half
# as many statements and commits for the same jobs here (batches of 4-8 instead of 1-3), at
# the cost of a millisecond a claim. A request that comes alone runs at once.
WINDOW_S = 0.001


class GroupCommit(Generic[Req, Res]):
    """Requests of many threads, run ``MAX_BATCH`` at most at a time by one thread of its own.

    The thread starts on the first request (after any fork: a dramatiq or gunicorn
    child starts its own) and is a daemon: a process that exits takes it along.
    """

    def __init__(self, name: str, run: Callable[[Sequence[Req]], Sequence[Res]]) -> None:
        self._name, self._run = name, run
        self._queue: SimpleQueue[tuple[Req, Future[Res]]] = SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def submit(self, request: Req) -> Res:
        """Run ``request`` in the next batch and return its answer (or raise the batch's error)."""
        if self._thread is None:
            with self._lock:
                if self._thread is None:
                    self._thread = threading.Thread(target=self._loop, name=self._name, daemon=True)
                    self._thread.start()
        future: Future[Res] = Future()
        self._queue.put((request, future))
        return future.result()

    def _loop(self) -> None:
        busy = False  # the last batch had company: more is likely on its way
        while True:
            batch = [self._queue.get()]
            until = time.monotonic() + (WINDOW_S if busy else 0.0)
            while len(batch) < MAX_BATCH:
                try:
                    batch.append(self._queue.get(timeout=max(0.0, until - time.monotonic())))
                except Empty:
                    break
            busy = len(batch) > 1
            try:
                answers = self._run([request for request, _ in batch])
            except BaseException as exc:  # every waiter gets the error; this thread goes on
                for _, future in batch:
                    future.set_exception(exc)
                continue
            for (_, future), answer in zip(batch, answers, strict=True):
                future.set_result(answer)


class RowBatches:
    """The job rows' claims and outcomes of one worker process, each kind batched across its threads."""

    def __init__(self, jobs: JobStore, *, worker: str, lease_ms: int) -> None:
        self._claims: GroupCommit[tuple[uuid.UUID, int, bool], Claim | None] = GroupCommit(
            "claim-batcher", lambda batch: jobs.claim_many(batch, lease_ms, worker=worker)
        )
        self._outcomes: GroupCommit[Outcome, bool] = GroupCommit("finish-batcher", jobs.finish_many)

    def claim(self, job_id: uuid.UUID, number: int, *, start: bool) -> Claim | None:
        """``JobStore.claim`` for this process's worker and lease, batched."""
        return self._claims.submit((job_id, number, start))

    def finish(self, outcome: Outcome) -> bool:
        """``JobStore.finish`` in autocommit, batched: False if the run had lost its row."""
        return self._outcomes.submit(outcome)
