from __future__ import annotations

import pytest

from tests.deploy.manifests import Rendered, kustomize, operator_copy

OVERLAYS = ("dev", "prod")


@pytest.fixture(scope="session")
def renders(tmp_path_factory) -> dict[str, Rendered]:
    """Both overlays rendered by kustomize, as `kubectl apply -k` would apply them."""
    tree = operator_copy(tmp_path_factory.mktemp("infra"))
    return {name: Rendered(name, kustomize(tree / "overlays" / name)) for name in OVERLAYS}


@pytest.fixture(params=OVERLAYS)
def rendered(request, renders) -> Rendered:
    return renders[request.param]
