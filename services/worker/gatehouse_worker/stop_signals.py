"""One graceful stop per stop request, however many copies of the signal reach a worker process.

The dramatiq CLI's main process forwards every SIGTERM, SIGINT and SIGHUP it
receives to its worker processes (SIGINT as SIGTERM), and a worker process
takes its second SIGTERM as "kill now". When the whole process group is
signalled (systemd's KillMode=control-group, Procfile runners, ``timeout``,
``kill -TERM -PGID``), each worker process gets the signal twice, once directly
and once forwarded, and used to be killed with its jobs half done.

Here a worker process keeps SIGTERM and SIGHUP blocked, and a thread takes them
with ``sigwaitinfo``, which says who sent each one:

- the first one, from anyone, starts dramatiq's graceful stop (running jobs get
  SHUTDOWN_TIMEOUT_MS; the queued ones stay queued);
- a second one forwarded by the main process means the main process itself was
  told twice (Ctrl-C twice at a terminal, a second SIGTERM to it): kill now, as
  dramatiq does;
- any other repeat is a copy of the same stop (a signal to the whole group) and
  is ignored.

dramatiq has no hook for this: ``install`` swaps the CLI's worker-process target
for ours, which changes how that process unblocks its signals, before the CLI
starts it. Where ``sigwaitinfo`` does not exist (macOS) dramatiq's handling stays.
"""

from __future__ import annotations

import _thread
import logging
import os
import signal
import threading

from dramatiq import cli

STOP_SIGNALS = frozenset({signal.SIGTERM, signal.SIGHUP})
log = logging.getLogger(__name__)

_dramatiq_worker_process = cli.worker_process


def install() -> None:
    """In the dramatiq CLI's main process, before ``cli.main`` starts its worker processes."""
    if hasattr(signal, "sigwaitinfo"):
        cli.worker_process = worker_process


def worker_process(*args: object) -> None:
    """The CLI's worker process, whose stop signals go through ``route`` instead of straight to dramatiq.

    The CLI starts it with its stop signals blocked and it unblocks them once dramatiq's
    handler is set (``try_unblock_signals``); in this process only, that unblocks the others.
    """
    cli.try_unblock_signals = _unblock_all_but_stop_signals
    return _dramatiq_worker_process(*args)


def _unblock_all_but_stop_signals() -> None:
    signal.pthread_sigmask(signal.SIG_UNBLOCK, set(cli.HANDLED_SIGNALS) - STOP_SIGNALS)
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)  # threads started from here on inherit it
    threading.Thread(target=route, args=(os.getppid(),), name="stop-signals", daemon=True).start()


def route(main_pid: int) -> None:
    """Takes the stop signals one by one: see the module's docstring."""
    stopping = False
    forwarded = 0  # stop signals sent by the CLI's main process
    while True:
        info = signal.sigwaitinfo(STOP_SIGNALS)
        from_main = info.si_pid == main_pid
        forwarded += from_main
        if not stopping:
            stopping = True
            # dramatiq's handler, run by the main thread as if the signal had reached it.
            _thread.interrupt_main(info.si_signo)
        elif from_main and forwarded > 1:
            log.warning("Killing worker process: its main process was told to stop a second time.")
            os._exit(cli.RET_KILLED)
        else:
            log.info(
                "%s from pid %d ignored: a copy of the stop already under way (the whole group was signalled).",
                signal.Signals(info.si_signo).name,
                info.si_pid,
            )
