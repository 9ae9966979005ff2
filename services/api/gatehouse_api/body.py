"""Reading a JSON request body into a pydantic model, with every failure a clear 4xx."""

from __future__ import annotations

import json
from typing import TypeVar

import falcon
from pydantic import BaseModel, ValidationError

from gatehouse.errors import ValidationFailed

M = TypeVar("M", bound=BaseModel)


def read_json(req: falcon.Request, model: type[M], *, max_bytes: int, allow_empty: bool = False) -> M:
    if req.content_length is not None and req.content_length > max_bytes:
        raise falcon.HTTPContentTooLarge(description=f"the body may be at most {max_bytes} bytes")
    raw = req.bounded_stream.read(max_bytes + 1)
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
        raise falcon.HTTPBadRequest(
            description=f"the body is not valid JSON: {exc}", code="INVALID_JSON"
        ) from None
    if not isinstance(data, dict):
        raise ValidationFailed("the body must be a JSON object", field=None)
    try:
        return model.model_validate_json(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or None
        problem = "is not allowed" if first["type"] == "extra_forbidden" else first["msg"].lower()
        raise ValidationFailed(f"{field or 'body'}: {problem}", field=field) from None
