"""Test-only: what each Python thread of a process is, visible from outside it.

Put this directory first on PYTHONPATH and set GATEHOUSE_THREAD_LOG to a
directory: every thread a process starts then names itself at the OS level
(``/proc/<pid>/task/<tid>/comm``, 15 characters; CPython 3.11 leaves every
thread with the process's name) and appends ``<tid> <class> <name>`` to
``GATEHOUSE_THREAD_LOG/<pid>``. Nothing else changes: no thread is added,
stopped or delayed. Forked children (gunicorn workers) inherit it.
"""

from __future__ import annotations

import ctypes
import os
import threading

_LOG = os.environ.get("GATEHOUSE_THREAD_LOG")

if _LOG:
    _PR_SET_NAME = 15
    _libc = ctypes.CDLL(None, use_errno=True)
    _bootstrap_inner = threading.Thread._bootstrap_inner

    def _noted(self: threading.Thread) -> None:
        try:
            _libc.prctl(_PR_SET_NAME, self.name.encode()[:15], 0, 0, 0)
            kind = f"{type(self).__module__}.{type(self).__qualname__}"
            with open(os.path.join(_LOG, str(os.getpid())), "a") as log:
                log.write(f"{threading.get_native_id()}\t{kind}\t{self.name}\n")
        except OSError:
            pass
        _bootstrap_inner(self)

    threading.Thread._bootstrap_inner = _noted
