"""Revocable, expiring keys, removable staff users and server-side console sessions, on two API workers.

One `gatehouse-api` with API_WORKERS=2 for the module: each check sends its requests on fresh
connections, so both workers answer some, and nothing one worker remembers may keep a key alive.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import httpx
import pytest
import redis

from gatehouse_api.console.session import COOKIE
from tests.conftest import ADMIN_TOKEN, shared_api
from tests.support.processes import wait_until

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
FORM = {"Content-Type": "application/x-www-form-urlencoded"}
IDLE_MS = 2_000
TRIES = 8  # requests per check, each on its own connection: both workers answer some
SESSIONS = "gatehouse:console:session:*"


@pytest.fixture(scope="module")
def two_workers(database_url: str, redis_url: str, tmp_path_factory) -> Iterator[str]:
    with shared_api(
        database_url,
        redis_url,
        tmp_path_factory.mktemp("api"),
        API_WORKERS="2",
        CONSOLE_IDLE_TIMEOUT_MS=str(IDLE_MS),
    ) as url:
        yield url


@pytest.fixture
def api(two_workers: str, clean: None) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=two_workers, timeout=30) as client:
        yield client


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def statuses(url: str, path: str, headers: dict[str, str]) -> set[int]:
    """The statuses of TRIES requests, each on a new connection (no keep-alive pins one worker)."""
    return {
        httpx.get(f"{url}{path}", headers={**headers, "Connection": "close"}).status_code
        for _ in range(TRIES)
    }


def new_account(api: httpx.Client) -> str:
    created = api.post("/v1/accounts", json={"name": "Shop", "wbToken": "t"}, headers=ADMIN)
    assert created.status_code == 201, created.text
    return created.json()["accountId"]


def issue(api: httpx.Client, path: str, headers: dict[str, str] = ADMIN, **body: str) -> str:
    issued = api.post(path, json=body, headers=headers) if body else api.post(path, headers=headers)
    assert issued.status_code == 201, issued.text
    return issued.json()["key"]


def new_user(api: httpx.Client, email: str = "ala@example.com") -> str:
    created = api.post("/v1/admin/users", json={"email": email, "name": "Ala"}, headers=ADMIN)
    assert created.status_code == 201, created.text
    return created.json()["userId"]


def sign_in(url: str, token: str) -> dict[str, str]:
    response = httpx.post(f"{url}/console/login", content=f"token={token}", headers=FORM)
    assert response.status_code == 303, response.text
    return {"Cookie": f"{COOKIE}={response.cookies[COOKIE]}"}


def csrf_of(url: str, cookie: dict[str, str]) -> str:
    page = httpx.get(f"{url}/console/modules", headers=cookie)
    assert page.status_code == 200, page.status_code
    return re.search(r'name="csrf" value="([0-9a-f]+)"', page.text).group(1)


def signed_in(url: str, cookie: dict[str, str]) -> bool:
    """The cookie's session reads a page (303 to the sign-in page once it has ended)."""
    status = httpx.get(f"{url}/console/modules", headers=cookie).status_code
    assert status in (200, 303), status
    return status == 200


def test_keys_are_listed_without_secrets_and_a_revoked_one_fails_at_once_everywhere(api, two_workers, sql):
    # Given an account key and a staff key, both used on every worker, the staff key signed in to the console
    account = new_account(api)
    account_key = issue(api, f"/v1/accounts/{account}/keys")
    user = new_user(api)
    staff_key = issue(api, f"/v1/admin/users/{user}/keys")
    assert statuses(two_workers, f"/v1/accounts/{account}", bearer(account_key)) == {200}
    assert statuses(two_workers, "/v1/admin/jobs", bearer(staff_key)) == {200}
    console = sign_in(two_workers, staff_key)
    assert signed_in(two_workers, console)

    # The lists show what a key is, never its secret (nor its hash)
    for path, key in (
        (f"/v1/accounts/{account}/keys", account_key),
        (f"/v1/admin/users/{user}/keys", staff_key),
    ):
        listed = api.get(path, headers=ADMIN)
        assert listed.status_code == 200, listed.text
        [item] = listed.json()["items"]
        key_id, secret = key.split("_", 2)[1:]
        assert set(item) == {"keyId", "createdAt", "lastUsedAt", "expiresAt"} and item["keyId"] == key_id
        assert item["lastUsedAt"] is not None and item["expiresAt"] is None
        assert secret not in listed.text and hashlib.sha256(secret.encode()).hexdigest() not in listed.text
    assert api.get(f"/v1/admin/users/{user}/keys", headers=bearer(staff_key)).status_code == 403

    # When both are revoked
    revoked = api.delete(f"/v1/accounts/{account}/keys/{account_key.split('_')[1]}", headers=ADMIN)
    assert revoked.status_code == 204, revoked.text
    revoked = api.delete(f"/v1/admin/users/{user}/keys/{staff_key.split('_')[1]}", headers=ADMIN)
    assert revoked.status_code == 204, revoked.text

    # Then every worker refuses them from the next request on, and the key's console session is over
    assert statuses(two_workers, f"/v1/accounts/{account}", bearer(account_key)) == {401}
    assert statuses(two_workers, "/v1/admin/jobs", bearer(staff_key)) == {401}
    assert not signed_in(two_workers, console)
    assert api.get(f"/v1/accounts/{account}/keys", headers=ADMIN).json()["items"] == []
    assert (
        api.delete(f"/v1/accounts/{account}/keys/{account_key.split('_')[1]}", headers=ADMIN).status_code
        == 404
    )
    assert api.delete(f"/v1/accounts/{account}/keys/a%00b", headers=ADMIN).status_code == 404
    audited = sql("SELECT action, entity, actor FROM audit_log WHERE action LIKE 'key.%' ORDER BY id")
    assert [tuple(r) for r in audited] == [
        ("key.issue", "account_key", "admin"),
        ("key.issue", "user_key", "admin"),
        ("key.revoke", "account_key", "admin"),
        ("key.revoke", "user_key", "admin"),
    ]


def test_an_expired_key_answers_401_and_its_last_use_is_written_once_a_minute(api, two_workers, sql):
    account = new_account(api)
    in_the_past = (datetime.now(UTC) - timedelta(seconds=1)).isoformat()
    refused = api.post(f"/v1/accounts/{account}/keys", json={"expiresAt": in_the_past}, headers=ADMIN)
    assert refused.status_code == 422 and refused.json()["field"] == "expiresAt"
    # Given a key that expires in an hour
    later = datetime.now(UTC) + timedelta(hours=1)
    key = issue(api, f"/v1/accounts/{account}/keys", expiresAt=later.isoformat())
    [listed] = api.get(f"/v1/accounts/{account}/keys", headers=ADMIN).json()["items"]
    assert datetime.fromisoformat(listed["expiresAt"]) == later and listed["lastUsedAt"] is None
    assert statuses(two_workers, f"/v1/accounts/{account}", bearer(key)) == {200}
    [(first_use,)] = sql("SELECT last_used_at FROM api_keys")
    assert first_use is not None
    assert statuses(two_workers, f"/v1/accounts/{account}", bearer(key)) == {200}
    assert sql("SELECT last_used_at FROM api_keys") == [(first_use,)]  # TRIES more uses, no write
    # When the hour has passed
    sql("UPDATE api_keys SET expires_at = now()")
    # Then every worker refuses it
    assert statuses(two_workers, f"/v1/accounts/{account}", bearer(key)) == {401}


def test_a_removed_user_s_keys_all_fail_and_their_audit_rows_stay(api, two_workers, sql):
    user = new_user(api)
    keys = [issue(api, f"/v1/admin/users/{user}/keys") for _ in range(2)]
    # Given the user did something audited with their key (issued an account key)
    issue(api, f"/v1/accounts/{new_account(api)}/keys", headers=bearer(keys[0]))
    assert sql("SELECT count(*) FROM audit_log WHERE actor = :u", u=user) == [(1,)]
    # Only the admin token removes a user
    assert api.delete(f"/v1/admin/users/{user}", headers=bearer(keys[1])).status_code == 403
    # When the admin token removes them
    assert api.delete(f"/v1/admin/users/{user}", headers=ADMIN).status_code == 204
    # Then none of their keys works, on any worker, and what they did is still on record
    for key in keys:
        assert statuses(two_workers, "/v1/admin/jobs", bearer(key)) == {401}
    assert sql("SELECT count(*) FROM audit_log WHERE actor = :u", u=user) == [(1,)]
    [(removal,)] = sql("SELECT after FROM audit_log WHERE action = 'user.remove' AND entity_id = :u", u=user)
    assert sorted(removal["revokedKeys"]) == sorted(k.split("_")[1] for k in keys)
    assert api.get("/v1/admin/users", headers=ADMIN).json()["items"] == []
    assert api.get(f"/v1/admin/users/{user}/keys", headers=ADMIN).status_code == 404
    assert api.delete(f"/v1/admin/users/{user}", headers=ADMIN).status_code == 404
    # Their e-mail is free for someone new
    assert new_user(api) != user


def test_logout_ends_the_session_everywhere_and_its_csrf_token_with_it(api, two_workers):
    cookie = sign_in(two_workers, ADMIN_TOKEN)
    value = cookie["Cookie"].split("=", 1)[1]
    # The cookie is an opaque random id: nothing of the admin token, different at each sign-in
    assert ADMIN_TOKEN not in value and hashlib.sha256(ADMIN_TOKEN.encode()).hexdigest()[:16] not in value
    assert re.fullmatch(r"[A-Za-z0-9_-]{43}", value)
    assert sign_in(two_workers, ADMIN_TOKEN) != cookie
    csrf = csrf_of(two_workers, cookie)
    logout = httpx.post(f"{two_workers}/console/logout", content=f"csrf={csrf}", headers={**cookie, **FORM})
    assert logout.status_code == 303
    # The saved cookie gets the sign-in page on every worker, and its old CSRF token acts no more
    for _ in range(TRIES):
        page = httpx.get(f"{two_workers}/console/modules", headers={**cookie, "Connection": "close"})
        assert page.status_code == 303 and page.headers["location"].startswith("/console/login")
    run = httpx.post(
        f"{two_workers}/console/modules/rfq", content=f"enabled=false&csrf={csrf}", headers={**cookie, **FORM}
    )
    assert run.status_code == 403
    modules = {m["name"]: m for m in api.get("/v1/admin/modules", headers=ADMIN).json()["items"]}
    assert modules["rfq"]["enabled"] is True


def test_an_idle_session_ends(two_workers, redis_url, clean):
    cookie = sign_in(two_workers, ADMIN_TOKEN)
    assert signed_in(two_workers, cookie)
    store = redis.Redis.from_url(redis_url)
    assert len(store.keys(SESSIONS)) == 1
    # Nobody touches it for CONSOLE_IDLE_TIMEOUT_MS: Redis lets it go, and the cookie opens nothing
    wait_until(lambda: not store.keys(SESSIONS), timeout=IDLE_MS / 1000 + 10, what="the idle session to end")
    assert not signed_in(two_workers, cookie)
