from __future__ import annotations

from alembic import command

from gatehouse.migrate import alembic_config, upgrade


def test_models_and_migrations_agree(gh):
    command.check(alembic_config(gh.engine))  # raises if autogenerate would emit anything


def test_upgrade_is_idempotent(gh):
    upgrade(gh.engine)
    upgrade(gh.engine)
