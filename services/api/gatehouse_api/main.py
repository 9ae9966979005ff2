"""gatehouse-api [gunicorn options…]: the Falcon API under gunicorn.

BACKEND_ROLE=all (default) also hosts consumers in each gunicorn worker;
api serves HTTP only; worker runs consumers only (as gatehouse-worker would).
"""

from __future__ import annotations

import importlib.util
import sys

from gunicorn.app.wsgiapp import WSGIApplication
from gunicorn.arbiter import Arbiter

from gatehouse.entrypoint import prepare_children
from gatehouse.errors import ConfigurationError
from gatehouse.settings import load_settings
from gatehouse_api import root


class GracefulArbiter(Arbiter):
    """SIGINT stops as gracefully as SIGTERM: requests and in-flight jobs finish."""

    def handle_int(self) -> None:
        self.handle_term()


class GatehouseApplication(WSGIApplication):
    def run(self) -> None:
        # WSGIApplication.run's own checks, then our arbiter instead of gunicorn's.
        try:
            GracefulArbiter(self).run()
        except RuntimeError as exc:
            sys.exit(f"gatehouse-api: {exc}")


def main() -> None:
    try:
        settings = load_settings()
        if settings.backend_role == "worker":
            try:
                from gatehouse_worker.main import worker
            except ImportError:
                raise ConfigurationError(
                    "BACKEND_ROLE=worker runs consumers only; this install has no gatehouse-worker package"
                ) from None
            worker()
            return
        for needed in ("database_url", "redis_url", "token_encryption_key", "console_secret"):
            settings.require(needed)
        if settings.backend_role == "all" and importlib.util.find_spec("gatehouse_worker") is None:
            raise ConfigurationError(
                "BACKEND_ROLE=all hosts the consumers, but the gatehouse-worker package is not "
                "installed here; set BACKEND_ROLE=api and run gatehouse-worker separately"
            )
    except ConfigurationError as exc:
        sys.exit(f"gatehouse-api: {exc}")
    root.use(prepare_children(settings, "gatehouse-api"))
    sys.argv = [
        "gatehouse-api",
        "--config",
        "python:gatehouse_api.gunicorn_conf",
        *sys.argv[1:],
        "gatehouse_api.app:get_app()",
    ]
    GatehouseApplication("%(prog)s [OPTIONS]").run()
