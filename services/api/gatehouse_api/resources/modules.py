"""Modules (admin): list them, switch one on or off; its routes follow within a second."""

from __future__ import annotations

import falcon

from gatehouse.handlers import ModuleHandlers
from gatehouse.modules import MODULES, ModuleState, ModuleStates, module_of_path
from gatehouse_api.auth import principal, require_admin
from gatehouse_api.body import read_json
from gatehouse_api.openapi import contract, path
from gatehouse_api.schemas import ModuleList, ModuleView, SetModule


def module_view(m: ModuleState) -> dict:
    return ModuleView(
        name=m.name,
        installed=m.installed,
        enabled=m.enabled,
        queues=list(MODULES[m.name].queues),
        updatedAt=m.updated_at,
        updatedBy=m.updated_by,
    ).model_dump(mode="json")


class ModuleRoutes:
    """Falcon middleware: a route of a module that is off answers MODULE_DISABLED (after authentication)."""

    def __init__(self, modules: ModuleStates) -> None:
        self.modules = modules

    def process_resource(
        self, req: falcon.Request, resp: falcon.Response, resource: object, params: dict
    ) -> None:
        module = module_of_path(req.path)
        if module is not None and resource is not None:
            self.modules.require(module.name)


class Modules:
    def __init__(self, modules: ModuleStates) -> None:
        self.modules = modules

    @contract("List the modules", (200, ModuleList, "every module"), (401, 403))
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        require_admin(req)
        self.modules.all(fresh=True)
        resp.media = ModuleList(items=[module_view(self.modules.state(name)) for name in MODULES]).model_dump(
            mode="json"
        )


class Module:
    def __init__(self, handlers: ModuleHandlers, *, max_body_bytes: int) -> None:
        self.handlers, self.max_body_bytes = handlers, max_body_bytes

    @contract(
        "Switch a module on or off (every API and worker process follows within a second)",
        (200, ModuleView, "the module as it is now"),
        (400, 401, 403, 404, 413, 415, 422),
        body=(SetModule, True),
        params=[path("name", enum=list(MODULES))],
    )
    def on_put(self, req: falcon.Request, resp: falcon.Response, name: str) -> None:
        require_admin(req)
        body = read_json(req, SetModule, max_bytes=self.max_body_bytes)
        resp.media = module_view(
            self.handlers.set_module(
                name, enabled=body.enabled, installed=body.installed, by=principal(req).actor
            )
        )
