"""The console's doors: sign-in, the session cookie, CSRF, same-origin, headers, escaping (Falcon in-process)."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest
from falcon import testing
from pydantic import SecretStr

from gatehouse.composition import bootstrap
from gatehouse.errors import ConfigurationError
from gatehouse_api.app import create_app
from gatehouse_api.console.session import COOKIE
from tests.conftest import ADMIN_TOKEN

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
FORM = {"Content-Type": "application/x-www-form-urlencoded"}


@pytest.fixture
def client(gh):
    return testing.TestClient(create_app(gh))


def sign_in(client, token: str = ADMIN_TOKEN):
    return client.simulate_post("/console/login", body=f"token={token}&next=/console/modules", headers=FORM)


def session(client) -> dict:
    response = sign_in(client)
    assert response.status_code == 303, response.text
    return {"Cookie": f"{COOKIE}={response.cookies[COOKIE].value}"}


def csrf_of(client, cookie: dict) -> str:
    page = client.simulate_get("/console/modules", headers=cookie).text
    return re.search(r'name="csrf" value="([0-9a-f]+)"', page).group(1)


def module_enabled(gh, name: str) -> bool:
    return gh.modules.state(name, fresh=True).enabled


def test_every_page_without_a_session_redirects_to_the_login(client):
    response = client.simulate_get("/console/modules")
    assert response.status_code == 303
    assert response.headers["location"] == "/console/login?next=/console/modules"
    assert client.simulate_get("/console/login").status_code == 200


def test_the_admin_token_signs_in_with_a_strict_httponly_expiring_cookie(client, settings):
    response = sign_in(client)
    assert response.status_code == 303 and response.headers["location"] == "/console/modules"
    cookie = response.cookies[COOKIE]
    assert cookie.http_only and cookie.same_site == "Strict" and cookie.path == "/console"
    assert not cookie.secure  # SESSION_COOKIE_SECURE=false in tests (plain http)
    assert cookie.max_age == settings.console_session_ms // 1000
    assert ADMIN_TOKEN not in cookie.value
    page = client.simulate_get("/console/modules", headers={"Cookie": f"{COOKIE}={cookie.value}"})
    assert page.status_code == 200 and "catalog.bulk-operation" in page.text


def test_the_secure_flag_follows_the_setting_not_a_request_header(gh):
    proxied = {**FORM, "X-Forwarded-Proto": "https"}
    plain = testing.TestClient(create_app(gh))
    assert (
        not plain.simulate_post("/console/login", body=f"token={ADMIN_TOKEN}", headers=proxied)
        .cookies[COOKIE]
        .secure
    )
    secure = testing.TestClient(
        create_app(replace(gh, settings=gh.settings.model_copy(update={"session_cookie_secure": True})))
    )
    assert (
        secure.simulate_post("/console/login", body=f"token={ADMIN_TOKEN}", headers=FORM)
        .cookies[COOKIE]
        .secure
    )


def test_a_staff_key_signs_in_and_its_session_ends_with_the_key(client, gh, sql):
    user = gh.account_handlers.create_user("ops@example.com", "Ops")
    key = gh.account_handlers.issue_user_key(user.id, actor="admin")
    response = sign_in(client, key)
    cookie = {"Cookie": f"{COOKIE}={response.cookies[COOKIE].value}"}
    page = client.simulate_get("/console/modules", headers=cookie)
    assert page.status_code == 200 and "/console/users" not in page.text
    # Staff users are the admin token's, in the console as in the JSON API
    assert client.simulate_get("/console/users", headers=cookie).status_code == 403
    assert client.simulate_get(f"/console/users/{user.id}/remove", headers=cookie).status_code == 403
    assert "/console/users" in client.simulate_get("/console/modules", headers=session(client)).text
    sql("DELETE FROM user_api_keys WHERE user_id = :id", id=user.id)
    assert client.simulate_get("/console/modules", headers=cookie).status_code == 303


def test_account_keys_and_wrong_tokens_cannot_open_the_console(client):
    account = client.simulate_post("/v1/accounts", json={"name": "Shop", "wbToken": "t"}, headers=ADMIN).json
    key = client.simulate_post(f"/v1/accounts/{account['accountId']}/keys", headers=ADMIN).json["key"]
    for token in (key, "wrong", ""):
        response = sign_in(client, token)
        assert response.status_code == 401 and COOKIE not in response.cookies
        assert "Account keys cannot open the console" in response.text


def test_a_forged_or_too_old_cookie_is_no_session(client, gh):
    cookie = session(client)["Cookie"].split("=", 1)[1]
    forged = cookie[:-2] + ("AA" if not cookie.endswith("AA") else "BB")
    page = client.simulate_get("/console/modules", headers={"Cookie": f"{COOKIE}={forged}"})
    assert page.status_code == 303
    # The same cookie, read by an API whose sessions last less than its age: it ends, everywhere
    expired = replace(gh, settings=gh.settings.model_copy(update={"console_session_ms": 1}))
    page = testing.TestClient(create_app(expired)).simulate_get(
        "/console/modules", headers={"Cookie": f"{COOKIE}={cookie}"}
    )
    assert page.status_code == 303
    assert (
        client.simulate_get("/console/modules", headers={"Cookie": f"{COOKIE}={cookie}"}).status_code == 303
    )


def test_a_new_admin_token_ends_the_admin_sessions_everywhere(client, gh):
    # The sessions live in Redis: an API process started with another ADMIN_TOKEN (and the same
    # CONSOLE_SECRET) refuses them and ends them for every process
    cookie = session(client)
    assert client.simulate_get("/console/modules", headers=cookie).status_code == 200
    renewed = replace(
        gh, settings=gh.settings.model_copy(update={"admin_token": SecretStr("a-new-admin-token")})
    )
    assert (
        testing.TestClient(create_app(renewed)).simulate_get("/console/modules", headers=cookie).status_code
        == 303
    )
    assert client.simulate_get("/console/modules", headers=cookie).status_code == 303


def test_without_a_console_secret_the_api_does_not_start(gh):
    with pytest.raises(ConfigurationError, match="CONSOLE_SECRET"):
        create_app(replace(gh, settings=gh.settings.model_copy(update={"console_secret": None})))


def test_an_action_without_the_csrf_token_is_refused_and_changes_nothing(client, gh):
    cookie = session(client)
    for body in ("enabled=false", "enabled=false&csrf=deadbeef"):
        response = client.simulate_post("/console/modules/catalog", body=body, headers={**cookie, **FORM})
        assert response.status_code == 403
        assert "CSRF" in response.text
    assert module_enabled(gh, "catalog")
    token = csrf_of(client, cookie)
    response = client.simulate_post(
        "/console/modules/catalog", body=f"enabled=false&csrf={token}", headers={**cookie, **FORM}
    )
    assert response.status_code == 303 and not module_enabled(gh, "catalog")


def test_a_cross_site_request_cannot_act_even_with_the_token(client, gh):
    cookie = session(client)
    token = csrf_of(client, cookie)
    for header in ({"Sec-Fetch-Site": "cross-site"}, {"Origin": "https://evil.example"}):
        response = client.simulate_post(
            "/console/modules/catalog",
            body=f"enabled=false&csrf={token}",
            headers={**cookie, **FORM, **header},
        )
        assert response.status_code == 403
    assert module_enabled(gh, "catalog")
    login = client.simulate_post(
        "/console/login", body=f"token={ADMIN_TOKEN}", headers={**FORM, "Sec-Fetch-Site": "cross-site"}
    )
    assert login.status_code == 403 and COOKIE not in login.cookies


def test_a_post_without_a_session_is_refused(client, gh):
    response = client.simulate_post("/console/modules/catalog", body="enabled=false", headers=FORM)
    assert response.status_code == 403 and module_enabled(gh, "catalog")


def test_logout_needs_the_token_and_clears_the_cookie(client):
    cookie = session(client)
    assert client.simulate_post("/console/logout", headers={**cookie, **FORM}).status_code == 403
    response = client.simulate_post(
        "/console/logout", body=f"csrf={csrf_of(client, cookie)}", headers={**cookie, **FORM}
    )
    assert response.status_code == 303 and response.headers["location"] == "/console/login"
    assert response.cookies[COOKIE].value == ""


def test_console_answers_carry_strict_security_headers(client):
    for response in (
        client.simulate_get("/console/login"),
        client.simulate_get("/console/modules", headers=session(client)),
    ):
        csp = response.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "unsafe-inline" not in csp and "frame-ancestors 'none'" in csp
        assert response.headers["x-frame-options"] == "DENY"
        assert response.headers["x-content-type-options"] == "nosniff"
        assert response.headers["referrer-policy"] == "same-origin"


def test_pages_load_nothing_from_elsewhere(client):
    page = client.simulate_get("/console/modules", headers=session(client)).text
    for url in re.findall(r'(?:src|href)="([^"]+)"', page):
        assert url.startswith(("/console", "#", "data:")), url
    assert (
        client.simulate_get("/console/static/console.js")
        .headers["content-type"]
        .startswith("text/javascript")
    )
    assert client.simulate_get("/console/static/../app.py").status_code == 404


def test_an_unknown_page_is_an_html_404(client):
    response = client.simulate_get("/console/modules/nope/more", headers=session(client))
    assert response.status_code == 404 and response.headers["content-type"].startswith("text/html")


def test_without_redis_the_console_answers_503_not_a_500(gh, settings):
    cookie = session(testing.TestClient(create_app(gh)))
    gone = bootstrap(
        settings.model_copy(update={"redis_url": "redis://127.0.0.1:1/0", "redis_timeout_ms": 200})
    )
    try:
        page = testing.TestClient(create_app(gone)).simulate_get("/console/modules", headers=cookie)
    finally:
        gone.close()
    assert page.status_code == 503
