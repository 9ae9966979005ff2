"""Run time limits: how a job body past its job type's limit is stopped.

Two ways, in this order:

1. **Cooperatively**: the run's deadline is its thread's deadline
   (gatehouse.deadlines), so every WB call, webhook POST and SMTP exchange of the
   body ends by it at the latest, and the body's next cooperative point
   (``JobContext.ensure_held``: before each WB call, between batches, after a
   checkpoint) raises RunTimeLimitExceeded. A body that waits on I/O or works in
   steps stops here, at a point where its own code chose to be interruptible.
2. **Interrupted**, as the backstop for a body that loops without a cooperative
   point: the lease keeper, which already looks at every running job each tick,
   raises RunTimeLimitExceeded in the body's thread ``INTERRUPT_GRACE_S`` after
   the deadline (CPython's ``PyThreadState_SetAsyncExc``, as Dramatiq's TimeLimit
   does). An asynchronous exception lands at any bytecode, so it is kept inside
   the body: it is raised only while the thread is in the body, once, and a
   pending one is withdrawn as the body ends (``body_running``). It cannot wake
   a thread blocked in C (a socket read): the deadlines above bound those.

Why not Dramatiq's TimeLimit middleware: it knows messages, not runs (a gated job
waiting for its account would count its wait), interrupts with no cooperative
step first, and cannot tell the lease keeper to stop renewing the run's leases.
Past its limit a run's leases are no longer renewed (gatehouse_worker.leases), so
a thread that neither stops nor returns loses its row and gate within a lease and
recovery puts the job back in line.
"""

from __future__ import annotations

import contextlib
import ctypes
import threading
import time
from collections.abc import Iterator

from gatehouse import deadlines
from gatehouse.errors import RunTimeLimitExceeded
from gatehouse_worker.runtime import JobContext

# The cooperative stop and the bounded I/O get this long past the deadline before the interrupt.
INTERRUPT_GRACE_S = 1.0


@contextlib.contextmanager
def body_running(ctx: JobContext, limit_ms: int) -> Iterator[None]:
    """The body runs in this block, under its deadline; an interrupt may land only here."""
    ctx.deadline = time.monotonic() + limit_ms / 1000
    # The thread's deadline is the same instant, so I/O it cut short finds the run overdue (the
    # pipeline's time-limit); set, not nested: an earlier run's interrupt may have left its own.
    deadlines.reset(ctx.deadline)
    with ctx.limit_lock:
        ctx.body_thread = threading.get_ident()
    try:
        yield
    finally:
        with ctx.limit_lock:
            ctx.body_thread = None
            if ctx.interrupted:
                _set_async_exc(threading.get_ident(), None)  # withdraw one not yet raised
        deadlines.reset(None)


def interrupt_if_overdue(ctx: JobContext, now: float | None = None) -> bool:
    """Raise RunTimeLimitExceeded in the body's thread once it is past its deadline and the grace."""
    if not ctx.overdue((now or time.monotonic()) - INTERRUPT_GRACE_S):
        return False
    with ctx.limit_lock:
        if ctx.body_thread is None or ctx.interrupted:
            return False
        ctx.interrupted = True
        return _set_async_exc(ctx.body_thread, RunTimeLimitExceeded) == 1


def _set_async_exc(thread_id: int, exc: type[BaseException] | None) -> int:
    return ctypes.pythonapi.PyThreadState_SetAsyncExc(
        ctypes.c_ulong(thread_id), ctypes.py_object(exc) if exc is not None else None
    )
