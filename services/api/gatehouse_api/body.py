"""Reading a JSON request body into a pydantic model, with every failure a clear 4xx."""

from __future__ import annotations

import json
from typing import TypeVar

import falcon
from pydantic import BaseModel, ValidationError

from gatehouse.errors import ValidationFailed

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
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise _invalid_json(str(exc)) from None
    except RecursionError:
        raise _invalid_json("it is nested too deeply") from None
    if not isinstance(data, dict):
        raise ValidationFailed("the body must be a JSON object", field=None)
    try:
        return model.model_validate_json(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        if first["type"] == "json_invalid":  # pydantic's own parser, e.g. its nesting limit
            raise _invalid_json(first["msg"].removeprefix("Invalid JSON: ")) from None
        field = ".".join(str(p) for p in first["loc"]) or None
        problem = "is not allowed" if first["type"] == "extra_forbidden" else first["msg"].lower()
        raise ValidationFailed(f"{field or 'body'}: {problem}", field=field) from None
