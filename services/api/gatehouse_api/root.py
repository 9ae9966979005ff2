"""This API process tree's settings, read from the environment once.

gatehouse-api reads them before gunicorn starts (``use``); gunicorn's
configuration, its workers (forked, so they inherit them) and the app's
composition root (``gatehouse_api.app.get_app``) take them from here.
"""

from __future__ import annotations

from gatehouse.settings import Settings, load_settings

_settings: Settings | None = None


def use(settings: Settings) -> None:
    global _settings
    _settings = settings


def settings() -> Settings:
    """The settings given to ``use``; read now if gunicorn was started some other way."""
    if _settings is None:
        use(load_settings())
    return _settings
