"""Bad input to a real gunicorn API answers a clear 4xx (never a 500), and HTTP methods behave.

Covers what the in-process contract tests cannot see: the request as gunicorn
hands it over (chunked bodies, HEAD, methods Falcon does not know).
"""

from __future__ import annotations

import json
import socket
import uuid
from urllib.parse import urlsplit

import httpx
import pytest

from tests.conftest import ADMIN_TOKEN

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
JSON = {**ADMIN, "Content-Type": "application/json"}
PROBLEM = "application/problem+json"


def assert_problem(response: httpx.Response, status: int, code: str) -> dict:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == PROBLEM
    body = response.json()
    assert body["status"] == status and body["code"] == code, body
    return body


def raw_request(url: str, head: str, body: bytes = b"") -> tuple[int, dict[str, str], bytes]:
    """One HTTP/1.1 request over a plain socket (to 127.0.0.1 only); the status, headers and body."""
    parts = urlsplit(url)
    assert parts.hostname == "127.0.0.1"
    with socket.create_connection((parts.hostname, parts.port), timeout=10) as sock:
        sock.sendall(head.encode() + b"\r\n" + body)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    header_block, _, rest = data.partition(b"\r\n\r\n")
    status_line, *lines = header_block.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}
    return int(status_line.split()[1]), headers, rest


@pytest.fixture
def api(module_api: str, gh) -> str:
    return module_api


@pytest.fixture
def account(gh) -> str:
    return str(gh.account_handlers.create_account("Shop", "wb-secret").id)


def chunks(data: bytes, size: int = 1000):
    for i in range(0, len(data), size):
        yield data[i : i + size]


def test_deeply_nested_json_is_400_invalid_json(api):
    for depth in (500, 10_000):  # beyond pydantic's nesting limit; beyond Python's recursion limit
        body = '{"a":' * depth + '"x"' + "}" * depth
        assert len(body) < 65_536  # not a size problem
        response = httpx.post(f"{api}/v1/accounts", content=body, headers=JSON)
        assert_problem(response, 400, "INVALID_JSON")
        deep_list = "[" * depth + "]" * depth
        response = httpx.post(f"{api}/v1/accounts", content=deep_list, headers=JSON)
        assert response.status_code in (400, 422), response.text
        assert response.headers["content-type"] == PROBLEM


@pytest.mark.parametrize(
    "limit", ["%C2%B2", "%D9%A3", "1" * 5000, "0" * 4000 + "5", "-1", "1e2", "%201", "+5"]
)
def test_odd_limits_are_422_naming_the_field(api, account, limit):
    response = httpx.get(f"{api}/v1/accounts/{account}/jobs?limit={limit}", headers=ADMIN)
    body = assert_problem(response, 422, "VALIDATION_ERROR")
    assert body["field"] == "limit"


def test_a_plain_limit_still_works(api, account):
    response = httpx.get(f"{api}/v1/accounts/{account}/jobs?limit=007", headers=ADMIN)
    assert response.status_code == 200, response.text
    body = response.json()  # the account's one job: the check of its token, written with it
    assert [j["type"] for j in body["items"]] == ["account-verify"] and body["nextCursor"] is None


def test_a_chunked_body_is_read(api, gh):
    body = b'{"name": "Chunked shop", "wbToken": "wb-secret"}'

    response = httpx.post(f"{api}/v1/accounts", content=chunks(body, 7), headers=JSON)

    assert response.request.headers.get("transfer-encoding") == "chunked"
    assert "content-length" not in response.request.headers
    assert response.status_code == 201, response.text
    account = gh.accounts.get(uuid.UUID(response.json()["accountId"]))
    assert account.name == "Chunked shop"


def test_a_chunked_body_past_the_limit_is_413(api, settings):
    huge = b'{"name": "' + b"x" * settings.max_body_bytes + b'", "wbToken": "t"}'

    response = httpx.post(f"{api}/v1/accounts", content=chunks(huge, 4096), headers=JSON)

    assert_problem(response, 413, "PAYLOAD_TOO_LARGE")


def test_a_chunked_import_creates_the_job(api, account):
    body = b'{"kind": "feeds", "dateFrom": "2026-10-01", "dateTo": "2026-10-31"}'
    url = f"{api}/v1/accounts/{account}/digitization/imports"

    response = httpx.post(url, content=chunks(body, 5), headers=JSON)

    assert response.status_code == 202, response.text
    assert response.json()["alreadyRunning"] is False


def test_head_answers_like_get_without_a_body(api, account):
    for path, headers in (
        ("/healthz", {}),
        ("/openapi.json", {}),
        (f"/v1/accounts/{account}", ADMIN),
        (f"/v1/accounts/{account}/jobs", ADMIN),
    ):
        get = httpx.get(f"{api}{path}", headers=headers)
        head = httpx.head(f"{api}{path}", headers=headers)
        assert get.status_code == 200, (path, get.text)
        assert head.status_code == 200, (path, head.status_code, head.text)
        assert head.content == b""
        assert head.headers["content-type"] == get.headers["content-type"]
    # HEAD keeps GET's errors too (status only).
    missing = httpx.head(f"{api}/v1/accounts/{uuid.uuid4()}", headers=ADMIN)
    assert missing.status_code == 404 and missing.content == b""
    assert httpx.head(f"{api}/v1/accounts/{account}").status_code == 401


def test_an_unknown_method_is_405_with_allow(api, account):
    job = f"/v1/jobs/{uuid.uuid4()}"
    status, headers, body = raw_request(
        api,
        f"FOO {job} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {ADMIN_TOKEN}\r\n"
        "Connection: close\r\nContent-Length: 0\r\n",
    )
    assert status == 405, body
    assert headers["content-type"] == PROBLEM
    assert set(headers["allow"].replace(" ", "").split(",")) == {"GET", "HEAD", "OPTIONS"}
    assert b'"METHOD_NOT_ALLOWED"' in body

    response = httpx.request("PURGE", f"{api}/v1/accounts/{account}/jobs", headers=ADMIN)
    assert_problem(response, 405, "METHOD_NOT_ALLOWED")
    assert "GET" in response.headers["allow"]
    # A known method the route does not serve keeps its 405, with the same Allow.
    response = httpx.delete(f"{api}{job}", headers=ADMIN)
    assert_problem(response, 405, "METHOD_NOT_ALLOWED")
    assert set(response.headers["allow"].replace(" ", "").split(",")) == {"GET", "HEAD", "OPTIONS"}


def test_a_request_target_with_raw_utf8_is_accepted(api):
    # Given a product whose name has a Polish letter
    product = {"sku": "KR-1", "name": "Krzesło biurowe", "price": {"amount": 100, "currency": "PLN"}}
    assert httpx.post(f"{api}/v1/admin/catalog/products", json=product, headers=ADMIN).status_code == 201
    auth = f"Host: 127.0.0.1\r\nAuthorization: Bearer {ADMIN_TOKEN}\r\nConnection: close\r\n"

    # When a client sends the query unencoded (raw UTF-8 bytes in the request line)
    status, headers, body = raw_request(api, f"GET /v1/admin/catalog/search?q=krzesło HTTP/1.1\r\n{auth}")

    # Then it is read as if percent-encoded: the search finds the product
    assert status == 200, body
    assert headers["content-type"] == "application/json"
    assert [hit["sku"] for hit in json.loads(body)["items"]] == ["KR-1"]
    # … and a path with raw UTF-8 is routed (here: to a 404 naming it)
    status, headers, body = raw_request(api, f"GET /v1/żółw HTTP/1.1\r\n{auth}")
    assert status == 404 and headers["content-type"] == PROBLEM, body
    assert json.loads(body)["detail"] == "no route GET /v1/żółw"


@pytest.mark.parametrize(
    ("request_head", "status", "code"),
    [
        ("GET /a\x01b HTTP/1.1\r\nHost: x\r\n", 400, "BAD_REQUEST"),  # a control character in the target
        ("GET /healthz HTTP/9.9\r\nHost: x\r\n", 400, "BAD_REQUEST"),  # no such HTTP version
        ("GET /healthz HTTP/1.1\nHost: x\n\n", 400, "BAD_REQUEST"),  # bare line feeds
        ("GET /healthz HTTP/1.1\r\nBad Name: x\r\n", 400, "BAD_REQUEST"),  # a space in a header name
        (f"GET /{'a' * 9000} HTTP/1.1\r\nHost: x\r\n", 414, "URI_TOO_LONG"),  # past limit_request_line
        (
            f"GET /healthz HTTP/1.1\r\nX-Big: {'a' * 9000}\r\n",
            431,
            "HEADERS_TOO_LARGE",
        ),  # one field too large
    ],
    ids=["control-char", "http-version", "bare-lf", "header-name", "uri-too-long", "field-too-large"],
)
def test_what_gunicorn_answers_itself_is_problem_json(api, request_head, status, code):
    got, headers, body = raw_request(api, request_head)
    assert got == status, body[:300]
    assert headers["content-type"] == PROBLEM, body[:300]
    problem = json.loads(body)
    assert (problem["status"], problem["code"]) == (status, code) and problem["detail"], problem


def test_a_nul_in_a_query_is_422_and_every_v1_answer_says_no_store(api, account):
    # A NUL byte in a query parameter, as gunicorn hands it over: a 422 naming it, not a 500 …
    nul = httpx.get(f"{api}/v1/admin/accounts?name=a%00b", headers=ADMIN)
    body = assert_problem(nul, 422, "VALIDATION_ERROR")
    assert body["field"] == "name", body
    # … and every /v1 answer, errors too, forbids caches (a new key must never be kept on the way)
    key = httpx.post(f"{api}/v1/accounts/{account}/keys", headers=ADMIN)
    assert key.status_code == 201, key.text
    unauthorized = httpx.get(f"{api}/v1/admin/accounts", headers={"Authorization": "Bearer nope"})
    assert unauthorized.status_code == 401
    for answer in (nul, key, unauthorized):
        assert answer.headers["cache-control"] == "no-store", answer.request.url
