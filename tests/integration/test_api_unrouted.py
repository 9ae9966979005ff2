"""Paths no route serves (issue 24): under /v1 the token is checked first (401 before any 404), and a
404 says what was not found. The Falcon app in-process, real PostgreSQL and Redis.
"""

from __future__ import annotations

import uuid

import pytest
from falcon import testing

from gatehouse_api.app import create_app
from tests.conftest import ADMIN_TOKEN

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
PROBLEM = "application/problem+json"
PRODUCTS = "/v1/admin/catalog/products"


@pytest.fixture
def client(gh):
    return testing.TestClient(create_app(gh))


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer nope"}])
@pytest.mark.parametrize("path", ["/v1/jobs/abc", "/v1/accounts/not-a-uuid/jobs", "/v1/nope", "/v1"])
def test_a_bad_token_is_401_before_any_404(client, headers, path):
    response = client.simulate_get(path, headers=headers)
    assert response.status_code == 401, response.text
    assert response.headers["content-type"] == PROBLEM and response.json["code"] == "UNAUTHORIZED"
    assert response.headers["www-authenticate"] == "Bearer"


@pytest.mark.parametrize(
    ("method", "path", "detail"),
    [
        ("GET", "/v1/jobs/abc", "job 'abc' not found: job ids are UUIDs"),
        ("POST", "/v1/jobs/abc/retry", "job 'abc' not found: job ids are UUIDs"),
        ("GET", "/v1/accounts/xyz/jobs", "account 'xyz' not found: account ids are UUIDs"),
        ("GET", f"{PRODUCTS}/p-1", "product 'p-1' not found: product ids are UUIDs"),
        (
            "GET",
            "/v1/admin/catalog/bulk-operations/7",
            "bulk operation '7' not found: bulk operation ids are UUIDs",
        ),
        ("GET", "/v1/nope", "no route GET /v1/nope"),
        ("DELETE", "/v2/nothing", "no route DELETE /v2/nothing"),
    ],
)
def test_a_404_says_what_was_not_found(client, method, path, detail):
    response = client.simulate_request(method, path, headers=ADMIN)
    assert response.status_code == 404, response.text
    assert response.headers["content-type"] == PROBLEM
    assert (response.json["code"], response.json["detail"]) == ("NOT_FOUND", detail)


def test_outside_v1_an_unknown_path_needs_no_token_and_a_real_id_stays_a_plain_404(client):
    response = client.simulate_get("/nothing-here")
    assert response.status_code == 404 and response.json["detail"] == "no route GET /nothing-here"
    response = client.simulate_get(f"/v1/jobs/{uuid.uuid4()}", headers=ADMIN)
    assert response.status_code == 404 and "UUIDs" not in response.json["detail"]
