"""Fixtures of the in-process console tests (each module brings its own ``client``: the app on its Components)."""

from __future__ import annotations

import pytest

from gatehouse_api.console.session import COOKIE
from tests.conftest import ADMIN_TOKEN

FORM = {"Content-Type": "application/x-www-form-urlencoded"}


@pytest.fixture
def cookie(client) -> dict:
    """A signed-in console session (the admin token) on the module's ``client``."""
    response = client.simulate_post("/console/login", body=f"token={ADMIN_TOKEN}", headers=FORM)
    assert response.status_code == 303, response.text
    return {"Cookie": f"{COOKIE}={response.cookies[COOKIE].value}"}
