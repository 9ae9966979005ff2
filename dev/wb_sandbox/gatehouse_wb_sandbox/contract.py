"""WB's contract: its OpenAPI YAML (``openapi/``), the operations in it, and checks against it.

The YAML is loaded once per process. An operation is found by WB's host label
(``statistics-api``, ``finance-api``, …: the first label of the operation's
``servers`` URL), method and path. ``/ping`` is documented once, under
common-api, but every host serves it: ``/ping`` on any host is that operation.

``check_request`` and ``check_response`` validate with openapi-core against
that one operation and return readable violations (an empty list: valid).
``limit_tables`` reads each operation's ``description_limit`` table.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

SPEC_DIR = Path(__file__).with_name("openapi")
SPEC_FILES = (
    "01-general.yaml",
    "02-items.yaml",
    "08-promotion.yaml",
    "11-analytics.yaml",
    "12-reports.yaml",
    "13-finances.yaml",
)
HOSTS = ("statistics-api", "finance-api", "advert-api", "seller-analytics-api", "content-api", "common-api")
PING = "/ping"
PING_HOST = "common-api"  # where the YAML documents /ping
_METHODS = ("get", "post", "put", "patch", "delete")
_PROBLEM_TYPES = ("application/problem+json",)


@dataclass(frozen=True)
class Operation:
    host: str  # WB's host label, as asked for (any host for /ping)
    method: str  # upper case
    path: str
    file: str
    server: str  # the documented base URL (https://<host>.wildberries.ru)
    spec: dict[str, Any]  # the operation object, as in the YAML

    @property
    def key(self) -> tuple[str, str, str]:
        return self.host, self.method, self.path


@dataclass(frozen=True)
class _Documented:
    file: str
    server: str
    path_item: dict[str, Any]
    document: dict[str, Any]


def _load(path: Path) -> dict[str, Any]:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    with path.open("rb") as stream:
        return yaml.load(stream, Loader=loader)


def _host_of(url: str) -> str | None:
    match = re.fullmatch(r"https://([a-z0-9-]+)\.wildberries\.ru/?", url)
    if match is None or match[1].endswith("-sandbox"):
        return None
    return match[1]


@cache
def _index() -> dict[tuple[str, str, str], _Documented]:
    """(host, METHOD, path) -> where the YAML documents it; only our hosts."""
    index: dict[tuple[str, str, str], _Documented] = {}
    for name in SPEC_FILES:
        document = _load(SPEC_DIR / name)
        for path, item in document["paths"].items():
            for method in _METHODS:
                if method not in item:
                    continue
                servers = item[method].get("servers") or item.get("servers") or document.get("servers") or []
                for server in servers:
                    host = _host_of(server["url"])
                    if host in HOSTS:
                        index[host, method.upper(), path] = _Documented(
                            name, server["url"].rstrip("/"), item, document
                        )
    return index


def operation(host: str, method: str, path: str) -> Operation | None:
    """The documented operation for a call to WB's ``host`` (None: WB has no such operation there)."""
    method = method.upper()
    documented_host = PING_HOST if path == PING and host in HOSTS else host
    found = _index().get((documented_host, method, path))
    if found is None:
        return None
    return Operation(host, method, path, found.file, found.server, found.path_item[method.lower()])


def operations() -> list[Operation]:
    """Every documented operation on our hosts (``/ping`` once, under common-api)."""
    return [operation(*key) for key in _index()]  # type: ignore[misc]


@cache
def _api(documented_host: str, method: str, path: str) -> Any:
    """An openapi-core OpenAPI holding just this operation (and the document's components)."""
    from openapi_core import Config, OpenAPI

    found = _index()[documented_host, method, path]
    document, item = found.document, found.path_item
    single: dict[str, Any] = {
        "openapi": document["openapi"],
        "info": document["info"],
        "paths": {path: {"servers": [{"url": found.server}], method.lower(): item[method.lower()]}},
        "components": document.get("components", {}),
    }
    if "security" in document:
        single["security"] = document["security"]
    if "parameters" in item:
        single["paths"][path]["parameters"] = item["parameters"]
    config = Config(
        spec_validator_cls=None,
        extra_media_type_deserializers=dict.fromkeys(_PROBLEM_TYPES, _json_bytes),
    )
    return OpenAPI.from_dict(single, config=config)


def _json_bytes(value: bytes | str) -> Any:
    return json.loads(value)


def _raw(body: Any) -> bytes | None:
    if body is None or isinstance(body, bytes):
        return body
    if isinstance(body, str):
        return body.encode()
    return json.dumps(body, ensure_ascii=False).encode()


def _where(error: Any) -> str:
    parts = [str(part) for part in getattr(error, "absolute_path", ())]
    return ".".join(parts) or "(root)"


def _violations(exc: BaseException, what: str) -> list[str]:
    """Readable lines for an openapi-core validation error and its causes."""
    out: list[str] = []
    for error in getattr(exc, "errors", None) or [exc]:  # a request error may bundle several
        cause = error.__cause__
        schema_errors = getattr(cause, "schema_errors", None)
        if schema_errors:
            name = getattr(error, "name", None)
            prefix = f"{what} {name}" if name else what
            out += [f"{prefix} at {_where(err)}: {err.message}" for err in schema_errors]
        else:
            detail = str(cause) if cause is not None else ""
            text = str(error)
            out.append(f"{text}: {detail}" if detail and detail not in text else text)
    return out


def _resolve(host: str, method: str, path: str) -> Operation:
    found = operation(host, method, path)
    if found is None:
        raise LookupError(f"WB documents no {method.upper()} {path} on {host}")
    return found


def check_request(
    host: str,
    method: str,
    path: str,
    query: dict[str, Any] | list[tuple[str, str]] | None,
    body: Any,
    authorization: str | None,
    content_type: str = "application/json",
) -> list[str]:
    """What in this request breaks the operation's documented parameters, body or security ([]: valid)."""
    from openapi_core.testing import MockRequest

    found = _resolve(host, method, path)
    api = _api(PING_HOST if path == PING else host, found.method, path)
    headers = {"Authorization": authorization} if authorization is not None else {}
    raw = _raw(body)
    request = MockRequest(
        found.server,
        found.method.lower(),
        path,
        args=dict(query or {}),
        headers=headers,
        data=raw if raw else None,
        content_type=content_type,
    )
    try:
        api.validate_request(request)
    except Exception as exc:  # openapi-core's ValidationError family
        return _violations(exc, "request body")
    return []


def check_response(
    host: str, method: str, path: str, status: int, body: Any, content_type: str | None
) -> list[str]:
    """What in this answer breaks the operation's documented response for ``status`` ([]: valid)."""
    from openapi_core.testing import MockRequest, MockResponse

    found = _resolve(host, method, path)
    api = _api(PING_HOST if path == PING else host, found.method, path)
    request = MockRequest(found.server, found.method.lower(), path)
    raw = _raw(body) or b""
    kind = (content_type or "application/json").split(";")[0].strip()
    try:
        api.validate_response(request, MockResponse(raw, status_code=status, content_type=kind))
    except Exception as exc:
        return [f"{status}: {line}" for line in _violations(exc, "response body")]
    return []


# --- limits ---

_UNITS_MS = {"мс": 1, "сек": 1_000, "секунд": 1_000, "секунды": 1_000, "мин": 60_000, "ч": 3_600_000}
_ROW_TYPES = {"Персональный": "personal", "Сервисный": "service"}


@dataclass(frozen=True)
class LimitRow:
    period_ms: int
    limit: int
    burst: int

    def as_tuple(self) -> tuple[int, int, int]:
        return self.period_ms, self.limit, self.burst


def _duration_ms(text: str) -> int:
    match = re.fullmatch(r"\s*(\d+)\s*([а-я]+)\.?\s*", text)
    if match is None or match[2] not in _UNITS_MS:
        raise ValueError(f"not a duration: {text!r}")
    return int(match[1]) * _UNITS_MS[match[2]]


def _count(text: str) -> int:
    match = re.fullmatch(r"\s*(\d+)\s*запрос(?:а|ов)?\s*", text)
    if match is None:
        raise ValueError(f"not a request count: {text!r}")
    return int(match[1])


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def parse_limit(description: str) -> dict[str, LimitRow]:
    """The Personal and Service rows of a ``description_limit`` block ({} when there is none).

    A table without a type column has one row for every token type. /ping's
    block is prose ("Максимум 3 запроса за 30 секунд"): that many calls per
    period, all of them at once (burst = limit).
    """
    start = description.find('class="description_limit"')
    if start < 0:
        return {}
    block = description[start : description.find("</div>", start)]
    lines = [line for line in block.splitlines() if line.strip().startswith("|")]
    if not lines:
        prose = re.search(r"Максимум\s+(\d+)\s+запрос\w*\s+за\s+(\d+)\s+(?:<a[^>]*>)?\s*([а-я]+)", block)
        if prose is None:
            raise ValueError(f"a limit block without a table: {block[:120]!r}")
        period = _duration_ms(f"{prose[2]} {prose[3]}")
        row = LimitRow(period, int(prose[1]), int(prose[1]))
        return {"personal": row, "service": row}
    header = _cells(lines[0])
    column = {name: index for index, name in enumerate(header)}
    rows: dict[str, LimitRow] = {}
    for line in lines[2:]:  # after the header and its --- line
        cells = _cells(line)
        row = LimitRow(
            _duration_ms(cells[column["Период"]]),
            _count(cells[column["Лимит"]]),
            _count(cells[column["Всплеск"]]),
        )
        if "Тип" not in column:
            return {"personal": row, "service": row}
        kind = _ROW_TYPES.get(cells[column["Тип"]])
        if kind is not None:
            rows[kind] = row
    return rows


def limit_table(host: str, method: str, path: str) -> dict[str, LimitRow] | None:
    """The limit rows of the operation a call to ``host`` meets (/ping: its one table, per host)."""
    found = operation(host, method, path)
    if found is None:
        return None
    return limit_tables().get((PING_HOST if path == PING else host, found.method, path))


@cache
def limit_tables() -> dict[tuple[str, str, str], dict[str, LimitRow]]:
    """(host, METHOD, path) -> {"personal": LimitRow, "service": LimitRow} for every documented operation
    on our hosts that has a limit block (/ping under common-api; its limit holds per host)."""
    tables = {}
    for op in operations():
        rows = parse_limit(op.spec.get("description") or "")
        if rows:
            tables[op.key] = rows
    return tables
