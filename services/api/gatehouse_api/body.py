"""Reading a JSON request body into a pydantic model, with every failure a clear 4xx."""

from __future__ import annotations

import json
from typing import TypeVar

import falcon
from pydantic import BaseModel, ValidationError

from gatehouse.errors import ValidationFailed
from gatehouse_api.schemas import PATTERN_RULES

M = TypeVar("M", bound=BaseModel)


def _invalid_json(reason: str) -> falcon.HTTPBadRequest:
    return falcon.HTTPBadRequest(description=f"the body is not valid JSON: {reason}", code="INVALID_JSON")


def _body_stream(req: falcon.Request):
    """The request body: Content-Length bytes, or a chunked body up to its last chunk.

    Falcon's bounded stream reads nothing without a Content-Length; gunicorn
    decodes a chunked body and ends it at the last chunk, so the raw stream is
    safe to read there.
    """
    if req.content_length is None and "chunked" in (req.get_header("Transfer-Encoding") or "").lower():
        return req.stream
    return req.bounded_stream


def _parse(raw: bytes) -> tuple[object, bool]:
    """The parsed body, and whether some object of it holds a key twice."""
    twice = False

    def pairs(items: list[tuple[str, object]]) -> dict:
        nonlocal twice
        obj = dict(items)
        if len(obj) < len(items):
            twice = True
            return _Pairs(items, obj)
        return obj

    return json.loads(raw, object_pairs_hook=pairs), twice


class _Pairs(dict):
    """A parsed JSON object that was given some key more than once (``twice``, in order)."""

    def __init__(self, items: list[tuple[str, object]], obj: dict) -> None:
        super().__init__(obj)
        seen: set[str] = set()
        self.twice: list[str] = []
        for key, _ in items:
            if key in seen and key not in self.twice:
                self.twice.append(key)
            seen.add(key)


def _duplicate_keys(data: object) -> list[tuple[str | None, str]]:
    """Every key that an object of the body holds twice, at its path (``price.currency``).

    JSON lets a parser keep the last of them silently; a client that sent two
    values meant something, and we cannot know which: each is an error.
    """
    found: list[tuple[str | None, str]] = []
    stack: list[tuple[str, object]] = [("", data)]
    while stack:  # no recursion: the parse allowed deeper nesting than Python's recursion does
        path, value = stack.pop()
        if isinstance(value, _Pairs):
            for key in value.twice:
                field = f"{path}{key}"
                found.append((field, f"{field}: the key is sent more than once in its object; send it once"))
        if isinstance(value, dict):
            stack.extend((f"{path}{key}.", v) for key, v in reversed(value.items()))
        elif isinstance(value, list):
            stack.extend((f"{path}{i}.", v) for i, v in reversed(list(enumerate(value))))
    return found


def _field(loc: tuple) -> str | None:
    # A dict key's own error is at [..., key, "[key]"]: the field is the key's place.
    return ".".join(str(p) for p in loc if p != "[key]") or None


def _message(error: dict) -> str:
    """pydantic's message as written (never re-cased: it may quote the input), a pattern in words."""
    if error["type"] == "extra_forbidden":
        return "is not allowed"
    if error["type"] == "string_pattern_mismatch":
        words = PATTERN_RULES.get((error.get("ctx") or {}).get("pattern"))
        if words:
            return words
    return error["msg"]


def _invalid_fields(exc: ValidationError) -> list[tuple[str | None, str]]:
    """One error per invalid field, in the order pydantic found them."""
    seen: dict[str | None, str] = {}
    for error in exc.errors(include_url=False):
        field = _field(error["loc"])
        if field not in seen:
            seen[field] = f"{field or 'body'}: {_message(error)}"
    return list(seen.items())


def read_json(req: falcon.Request, model: type[M], *, max_bytes: int, allow_empty: bool = False) -> M:
    if req.content_length is not None and req.content_length > max_bytes:
        raise falcon.HTTPContentTooLarge(description=f"the body may be at most {max_bytes} bytes")
    raw = _body_stream(req).read(max_bytes + 1)
    if len(raw) > max_bytes:
        raise falcon.HTTPContentTooLarge(description=f"the body may be at most {max_bytes} bytes")
    if not raw.strip():
        if allow_empty:
            return model()
        raise ValidationFailed("a JSON object body is required", field=None)
    media_type = (req.content_type or "").split(";")[0].strip().lower()
    if media_type != "application/json" and not media_type.endswith("+json"):
        raise falcon.HTTPUnsupportedMediaType(description="send the body as application/json")
    try:
        data, twice = _parse(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise _invalid_json(str(exc)) from None
    except RecursionError:
        raise _invalid_json("it is nested too deeply") from None
    if not isinstance(data, dict):
        raise ValidationFailed("the body must be a JSON object", field=None)
    if twice:
        raise ValidationFailed.of(_duplicate_keys(data))
    try:
        return model.model_validate_json(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        if first["type"] == "json_invalid":  # pydantic's own parser, e.g. its nesting limit
            raise _invalid_json(first["msg"].removeprefix("Invalid JSON: ")) from None
        raise ValidationFailed.of(_invalid_fields(exc)) from None
