"""Platform modules: features that an operator installs, enables and disables at run time.

A module owns route prefixes, queues and event types (``MODULES``). Its row in
``module_registrations`` says whether it is installed and enabled. While it is
off:

- its routes answer ``MODULE_DISABLED`` (409 when disabled; 404 when not
  installed — an uninstalled module has no routes at all), in every API process
  within a second (``ModuleStates`` caches the table for ``REFRESH_S``);
- its consumers are paused in every worker process (gatehouse_worker.holds):
  no message of its queues is taken, so none is dropped, lost or spends an
  attempt; a job already running finishes;
- its events are not emitted (``EventBus`` asks ``ModuleStates.emits``).

The WB side (digitization, autobidder) is not a module: it is the SaaS's core,
and switching it off would strand accounts' gates and schedules mid-flight.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from sqlalchemy import Column, DateTime, Engine, text
from sqlmodel import Field, SQLModel

from gatehouse.errors import GatehouseError, NotFound

if TYPE_CHECKING:
    from gatehouse.uow import Tx

REFRESH_S = 0.5  # a change reaches every process within about this long (plus one read)


@dataclass(frozen=True)
class Module:
    name: str
    route_prefixes: tuple[str, ...]
    queues: tuple[str, ...]
    event_prefixes: tuple[str, ...]


MODULES: dict[str, Module] = {
    m.name: m
    for m in (
        Module("catalog", ("/v1/admin/catalog",), ("catalog.bulk-operation",), ("catalog.",)),
        Module("webhooks", ("/v1/admin/webhooks",), ("webhook.deliver",), ("webhook.",)),
        Module("carts", ("/v1/admin/carts",), ("carts.sweep",), ("carts.",)),
        Module("price_lists", ("/v1/admin/price-lists",), ("price_lists.sweep",), ("price_lists.",)),
        Module("rfq", ("/v1/admin/rfqs",), ("rfq.sweep",), ("rfq.",)),
    )
}


class ModuleRegistration(SQLModel, table=True):
    __tablename__ = "module_registrations"

    name: str = Field(primary_key=True)
    installed: bool = Field(default=True, sa_column_kwargs={"server_default": text("true")})
    enabled: bool = Field(default=True, sa_column_kwargs={"server_default": text("true")})
    updated_at: datetime = Field(
        sa_column=Column(DateTime(timezone=True), nullable=False, server_default=text("now()"))
    )
    # Who changed it last: "admin", a staff user's id, or "migration".
    updated_by: str = Field(default="migration", sa_column_kwargs={"server_default": "migration"})


@dataclass(frozen=True)
class ModuleState:
    name: str
    installed: bool
    enabled: bool
    updated_at: datetime
    updated_by: str

    @property
    def on(self) -> bool:
        return self.installed and self.enabled


class ModuleDisabled(GatehouseError):
    """A route, command or consumer of a module that is off."""

    code = "MODULE_DISABLED"

    def __init__(self, state: ModuleState) -> None:
        what = "not installed" if not state.installed else "disabled"
        super().__init__(f"the {state.name} module is {what}")
        self.module = state.name
        self.installed = state.installed


def module_of_path(path: str) -> Module | None:
    return next((m for m in MODULES.values() if any(path.startswith(p) for p in m.route_prefixes)), None)


def module_of_queue(queue: str) -> Module | None:
    return next((m for m in MODULES.values() if queue in m.queues), None)


def module_of_event(event_type: str) -> Module | None:
    return next((m for m in MODULES.values() if event_type.startswith(m.event_prefixes)), None)


COLUMNS = "name, installed, enabled, updated_at, updated_by"


class ModuleStates:
    """The module table, read at most every REFRESH_S per process (one small SELECT)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._lock = threading.Lock()
        self._states: dict[str, ModuleState] = {}
        self._read_at = 0.0

    def all(self, *, fresh: bool = False) -> dict[str, ModuleState]:
        with self._lock:
            if fresh or time.monotonic() - self._read_at > REFRESH_S:
                with self.engine.connect() as conn:
                    rows = conn.execute(text(f"SELECT {COLUMNS} FROM module_registrations"))
                    self._states = {r.name: ModuleState(*r) for r in rows}
                self._read_at = time.monotonic()
            return dict(self._states)

    def state(self, name: str, *, fresh: bool = False) -> ModuleState:
        state = self.all(fresh=fresh).get(name)
        if state is None:  # a module the table does not know is not installed
            return ModuleState(name, False, False, datetime.min, "nobody")
        return state

    def require(self, name: str, *, fresh: bool = False) -> None:
        state = self.state(name, fresh=fresh)
        if not state.on:
            raise ModuleDisabled(state)

    def emits(self, event_type: str) -> bool:
        module = module_of_event(event_type)
        return module is None or self.state(module.name).on

    def set(
        self, tx: Tx, name: str, *, enabled: bool | None = None, installed: bool | None = None, by: str
    ) -> ModuleState:
        """Write the module's row in ``tx``; once it commits, ``expire`` lets this process see it."""
        if name not in MODULES:
            raise NotFound(f"no module {name!r} (modules: {', '.join(MODULES)})")
        row = tx.conn.execute(
            text(
                "INSERT INTO module_registrations (name, installed, enabled, updated_by) "
                "VALUES (:name, coalesce(:installed, true), coalesce(:enabled, true), :by) "
                "ON CONFLICT (name) DO UPDATE SET "
                "installed = coalesce(:installed, module_registrations.installed), "
                "enabled = coalesce(:enabled, module_registrations.enabled), "
                f"updated_by = :by, updated_at = now() RETURNING {COLUMNS}"
            ),
            {"name": name, "installed": installed, "enabled": enabled, "by": by},
        ).one()
        return ModuleState(*row)

    def expire(self) -> None:
        """The next read goes to the table (after a change commits, so this process sees it at once)."""
        with self._lock:
            self._read_at = 0.0
