"""Secrets never leak: no log line, no error body, no answer after creation carries one.

Real processes (gatehouse-api and gatehouse-worker with LOG_LEVEL=DEBUG, gatehouse-wb-sandbox)
and a real webhook receiver. The secrets: the WB tokens of two accounts (one WB
accepts, one it refuses with 401), an account key, a staff user's key, the
admin token, and a webhook endpoint's secret before and after rotation. Each is
seen once where it is given out (the token by the client, a key or webhook
secret in its creation answer); after that the test uses all of them — a job
calling WB, a webhook delivery, wrong tokens, 401s, 403s, 422s with the secret
in the body, a WB 401 — and then searches every process's output, every answer
(bodies and headers), every table and every Redis value for each secret in the
forms it could take.
"""

from __future__ import annotations

import base64

import httpx
from sqlalchemy import text

from gatehouse_wb_sandbox.tokens import make_token
from tests.conftest import ADMIN_TOKEN
from tests.support.processes import free_port, wait_until
from tests.support.receiver import Receiver
from tests.support.wb_sandbox import scaled_limits

SELLER = "seller-secrets"


def forms(secret: str) -> set[str]:
    """The secret and the encodings it could be leaked in."""
    found = {secret, f"Bearer {secret}"}
    found.add(base64.b64encode(secret.encode()).decode())
    if secret.startswith("whsec_"):  # the key material itself, and its bytes in hex
        payload = secret.removeprefix("whsec_")
        found.add(payload)
        found.add(base64.b64decode(payload).hex())
    for prefix in ("ghk_", "ghu_"):  # the secret half of a key (its id half is an identifier)
        if secret.startswith(prefix):
            found.add(secret.removeprefix(prefix).split("_", 1)[1])
    if secret.count(".") == 2:  # a JWT's signature
        found.add(secret.rsplit(".", 1)[1])
    return {f for f in found if len(f) >= 12}


class Client:
    """httpx to the API, keeping every answer (bodies and headers) except the creation answers allowed to show a secret."""

    def __init__(self, url: str) -> None:
        self.http = httpx.Client(base_url=url, timeout=15)
        self.seen: list[str] = []

    def __call__(
        self, method: str, path: str, *, key: str | None = ADMIN_TOKEN, shows_secret: bool = False, **kw
    ):
        headers = kw.pop("headers", {})
        if key is not None:
            headers.setdefault("Authorization", f"Bearer {key}")
        response = self.http.request(method, path, headers=headers, **kw)
        if not shows_secret:
            # (what was answered: the request itself carries the secrets this test sends)
            self.seen.append(f"{response.status_code} {dict(response.headers)} {response.text}")
        return response


def test_no_secret_reaches_a_log_an_answer_a_row_or_a_redis_value(processes, gh, sql):
    receiver = Receiver()
    try:
        _run(processes, gh, sql, receiver)
    finally:
        receiver.stop()


def _run(processes, gh, sql, receiver: Receiver) -> None:
    # Given the WB sandbox, a worker and the API — as real processes, with LOG_LEVEL=DEBUG
    port = free_port()
    processes.start(
        "wb-sandbox", "gatehouse-wb-sandbox", "--bind", f"127.0.0.1:{port}", "--time-scale", "1000"
    )
    sandbox = f"http://127.0.0.1:{port}"
    wait_until(lambda: _answers(f"{sandbox}/__sandbox/health"), timeout=30, what="the WB sandbox")
    env = {
        "WB_API_BASE_URL": sandbox,
        **scaled_limits(1000),
        "WEBHOOK_ALLOWED_HOSTS": "127.0.0.1",
        "LOG_LEVEL": "DEBUG",
        "RETRY_DELAY_SCALE": "0.0001",
    }
    worker = processes.start("worker", "gatehouse-worker", "--processes", "1", "--threads", "4", env=env)
    # It sends every secret wrong three ways from one address: more than a lockout allows.
    api, url = processes.api(env={**env, "BACKEND_ROLE": "api", "AUTH_MAX_FAILURES": "1000"})
    client = Client(url)

    # … and the secrets, each given out once
    wb_token, refused_token = make_token(SELLER), "eyJhbGciOi.refused-by-wb-secret-token.c2lnbmF0dXJl"
    created = client("POST", "/v1/accounts", json={"name": "Shop", "wbToken": wb_token})
    assert created.status_code == 201, created.text
    account = created.json()["accountId"]
    refused = client("POST", "/v1/accounts", json={"name": "Refused", "wbToken": refused_token}).json()[
        "accountId"
    ]
    account_key = client("POST", f"/v1/accounts/{account}/keys", shows_secret=True).json()["key"]
    user = client("POST", "/v1/admin/users", json={"email": "ops@example.com", "name": "Ops"}).json()[
        "userId"
    ]
    user_key = client("POST", f"/v1/admin/users/{user}/keys", shows_secret=True).json()["key"]
    endpoint = client(
        "POST", "/v1/admin/webhooks/endpoints", json={"url": receiver.url}, key=user_key, shows_secret=True
    ).json()
    first_secret = endpoint["secret"]
    rotated = client(
        "POST", f"/v1/admin/webhooks/endpoints/{endpoint['endpointId']}/rotate-secret", shows_secret=True
    )
    second_secret = rotated.json()["secret"]
    receiver.secrets = [second_secret]
    secrets = {
        "WB token": wb_token,
        "refused WB token": refused_token,
        "account key": account_key,
        "user key": user_key,
        "admin token": ADMIN_TOKEN,
        "webhook secret": first_secret,
        "rotated webhook secret": second_secret,
    }

    # When a job calls WB with the token, and another meets WB's 401
    done = _job(client, f"/v1/accounts/{account}/autobidder/sync", account_key)
    assert done["state"] == "completed", done
    failed = _job(client, f"/v1/accounts/{refused}/autobidder/sync", ADMIN_TOKEN)
    assert failed["state"] == "failed" and failed["error"]["code"] == "wb-unauthorized", failed
    # … a webhook is delivered, signed with the rotated secret
    client("POST", f"/v1/admin/webhooks/endpoints/{endpoint['endpointId']}/test", key=user_key)
    wait_until(
        lambda: any(r.verified_by == (0,) for r in receiver.received), timeout=30, what="a signed delivery"
    )
    # … every secret is read back where it could be: the account, the endpoint, its deliveries, the jobs
    for path in (
        f"/v1/accounts/{account}",
        f"/v1/accounts/{account}/jobs",
        f"/v1/admin/webhooks/endpoints/{endpoint['endpointId']}",
        "/v1/admin/webhooks/endpoints",
        "/v1/admin/webhooks/deliveries",
        "/v1/admin/accounts",
        "/v1/admin/jobs",
        f"/v1/jobs/{failed['jobId']}",
    ):
        assert client("GET", path).status_code == 200, path
    # … and the errors: wrong and mangled tokens, secrets in bodies that are refused
    for key in secrets.values():
        for wrong in (key + "x", key[:-1], key.upper()):
            assert client("GET", f"/v1/accounts/{account}", key=wrong).status_code == 401
        assert (
            client("GET", "/v1/admin/jobs", headers={"Authorization": f"Basic {key}"}, key=None).status_code
            == 401
        )
        assert (
            client("GET", f"/v1/accounts/{account}", headers={"Authorization": key}, key=None).status_code
            == 401
        )
    assert client("GET", "/v1/admin/jobs", key=account_key).status_code == 403
    assert client("GET", f"/v1/accounts/{refused}", key=account_key).status_code == 404
    for body in (
        {"name": "", "wbToken": wb_token},
        {"name": "x", "wbToken": wb_token, "token": wb_token},
        {"name": wb_token * 20, "wbToken": wb_token},
        {"name": "x", "wbToken": [wb_token, user_key]},
    ):
        assert client("POST", "/v1/accounts", json=body).status_code == 422, body
    assert (
        client(
            "POST",
            "/v1/accounts",
            content=f'{{"name": "x", "wbToken": "{wb_token}"',
            headers={"Content-Type": "application/json"},
        ).status_code
        == 400
    )
    assert (
        client("POST", "/v1/admin/webhooks/endpoints", json={"url": f"https://{first_secret}/"}).status_code
        == 422
    )
    assert (
        client(
            "PATCH", f"/v1/admin/webhooks/endpoints/{endpoint['endpointId']}", json={"secret": second_secret}
        ).status_code
        == 422
    )
    assert (
        client(
            "POST",
            f"/v1/accounts/{account}/digitization/imports",
            key=account_key,
            json={"kind": account_key},
        ).status_code
        == 422
    )
    # (A secret a client puts in a URL or uses as a field's name is its own to lose: access logs
    # keep the URL, and an unknown field's 422 names the field.)

    # Then no secret, in any of its forms, is anywhere
    places = {proc.name: proc.log() for proc in processes.started}
    places["answers"] = "\n".join(client.seen)
    places["receiver"] = "\n".join(r.body.decode() + r.signature for r in receiver.received)
    places["tables"] = _tables(gh)
    places["redis"] = "\n".join(
        repr(gh.redis.dump(k)) + k.decode(errors="replace") for k in gh.redis.scan_iter(count=1000)
    )
    leaks = [
        (name, where, line[-400:])
        for name, secret in secrets.items()
        for form in forms(secret)
        for where, text_ in places.items()
        for line in text_.splitlines()
        if form in line
    ]
    assert leaks == [], "\n".join(f"{name} in {where}: {line}" for name, where, line in leaks)
    # (and the logs searched are the real ones: the worker's WB calls and delivery — its URL as scheme
    # and host — the API's requests)
    assert "/api/advert/" in worker.log() and "POST /v1/accounts" in api.log()
    assert "deliveries to http://127.0.0.1 delivered" in worker.log()


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def _job(client: Client, path: str, key: str) -> dict:
    job_id = client("POST", path, key=key, json={}).json()["jobId"]

    def finished():
        status = client("GET", f"/v1/jobs/{job_id}").json()
        return status if status["state"] in ("completed", "failed") else None

    return wait_until(finished, timeout=60, interval=0.1, what=f"job {job_id} to finish")


def _tables(gh) -> str:
    rows = []
    with gh.engine.connect() as conn:
        names = conn.execute(text("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")).scalars()
        for name in list(names):
            rows += [f"{name}: {r}" for r in conn.execute(text(f'SELECT t::text FROM "{name}" t')).scalars()]
    return "\n".join(rows)
