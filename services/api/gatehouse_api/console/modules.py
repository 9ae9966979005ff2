"""Modules: each one's switch and what switching it off pauses (routes, consumers, events); switching
one off after a confirm step."""

from __future__ import annotations

import falcon

from gatehouse.errors import NotFound
from gatehouse.handlers import ModuleHandlers
from gatehouse.modules import MODULES, ModuleStates
from gatehouse_api.console.web import PREFIX, Confirmed, Console, Page, back, form
from gatehouse_api.resources.modules import module_view


class Modules(Page):
    def __init__(self, console: Console, modules: ModuleStates) -> None:
        super().__init__(console)
        self.modules = modules

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        self.modules.all(fresh=True)
        items = [module_view(self.modules.state(name)) for name in MODULES]
        self.console.render(req, resp, "modules.html", modules=items, catalog=MODULES)


class SetModule(Page):
    """The form twin of PUT /v1/admin/modules/{name} (``enabled`` = true or false)."""

    def __init__(self, console: Console, handlers: ModuleHandlers) -> None:
        super().__init__(console)
        self.handlers = handlers

    def on_post(self, req: falcon.Request, resp: falcon.Response, name: str) -> None:
        enabled = form(req).get("enabled", "").lower()
        if enabled not in ("true", "false"):
            raise falcon.HTTPBadRequest(description="enabled must be true or false")
        self.handlers.set_module(name, enabled=enabled == "true", by=req.context.principal.actor)
        back(resp, f"{PREFIX}/modules")


class DisableModule(Confirmed):
    """PUT /v1/admin/modules/{name} with ``enabled: false``, after a confirm step (enabling is one click)."""

    label = "Disable the module"

    def __init__(self, console: Console, handlers: ModuleHandlers) -> None:
        super().__init__(console)
        self.handlers = handlers

    def describe(self, req: falcon.Request, name: str) -> tuple[str, str, str]:
        if name not in MODULES:
            raise NotFound(f"no module {name!r}")
        return (
            f"Disable the {name} module?",
            "Its routes answer MODULE_DISABLED, its queues are paused in every worker (messages stay "
            "queued, running jobs finish) and its events are not raised, until it is enabled again.",
            f'PUT /v1/admin/modules/{name} {{"enabled": false}}',
        )

    def act(self, req: falcon.Request, actor: str, name: str) -> None:
        self.handlers.set_module(name, enabled=False, by=actor)

    def done(self, name: str) -> str:
        return f"{PREFIX}/modules"
