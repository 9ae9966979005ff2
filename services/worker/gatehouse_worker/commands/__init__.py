"""The operators' one-shot commands, each its own composition root: gatehouse-search-reindex and
gatehouse-cart-abandonment-sweep queue work for the workers and follow it; gatehouse-prune and
gatehouse-rotate-keys do theirs in their own process."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from psycopg import OperationalError as PsycopgOperationalError
from psycopg_pool import PoolTimeout
from sqlalchemy.exc import OperationalError

from gatehouse.errors import ConfigurationError

if TYPE_CHECKING:
    from gatehouse.composition import Components


def run(prog: str, work: Callable[[Components], int], *, exit_config: int) -> int:
    """``work`` with this command's components, closed after it: its exit code, or ``exit_config`` for a
    bad configuration (DATABASE_URL, REDIS_URL, …) or a PostgreSQL that does not answer, said on stderr."""
    from gatehouse import logs
    from gatehouse.composition import bootstrap  # here, not at import: --help answers at once
    from gatehouse.settings import load_settings

    try:
        settings = load_settings()
        logs.configure(settings.log_format, settings.log_level)  # what it prints is its answer, not logs
        built = bootstrap(settings)
    except ConfigurationError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return exit_config
    try:
        return work(built)
    except ConfigurationError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return exit_config
    except (OperationalError, PsycopgOperationalError, PoolTimeout) as exc:
        print(f"{prog}: PostgreSQL is not reachable: {getattr(exc, 'orig', exc)}", file=sys.stderr)
        return exit_config
    finally:
        built.close()
