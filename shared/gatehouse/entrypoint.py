"""What an entry point sets up before it forks children (gunicorn or dramatiq workers).

Import-light on purpose: prometheus-client picks its multiprocess mode when it
is first imported, so the directory must be exported before that happens.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from pathlib import Path

from gatehouse.errors import ConfigurationError
from gatehouse.settings import Settings, load_settings

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"


def settings_or_exit(prog: str, *, require: tuple[str, ...] = ("database_url", "redis_url")) -> Settings:
    """Settings, or exit non-zero with one line naming the bad or missing variable."""
    try:
        settings = load_settings()
        for field in require:
            settings.require(field)
        return settings
    except ConfigurationError as exc:
        sys.exit(f"{prog}: {exc}")


def prepare_children(settings: Settings, prog: str) -> Settings:
    """Fresh runtime directories for this process tree (never reused across starts); returns the
    settings that name them.

    ``metrics/`` for prometheus-client's multiprocess files, ``alive/`` for the
    worker processes' liveness files. They are exported too, for children that read
    their settings themselves (the dramatiq CLI's processes).
    """
    assert "prometheus_client" not in sys.modules, "export the metrics dir before importing prometheus_client"
    run = Path(tempfile.mkdtemp(prefix=f"{prog}-"))
    owner = os.getpid()  # forked children inherit atexit handlers; only the parent cleans up
    atexit.register(lambda: os.getpid() == owner and shutil.rmtree(run, ignore_errors=True))
    for name, variable in (("metrics", MULTIPROC_ENV), ("alive", "WORKER_ALIVE_DIR")):
        (run / name).mkdir()
        os.environ[variable] = str(run / name)
    return settings.model_copy(
        update={"prometheus_multiproc_dir": str(run / "metrics"), "worker_alive_dir": str(run / "alive")}
    )
