"""Every request has an id: the client's ``X-Request-Id`` if it is a sane one, else a new one.

The id is bound to the request's log lines (``request_id``, gatehouse.logs) and
answered in ``X-Request-Id`` on every response, errors, 404s and console pages
too; gunicorn's access line carries it (gatehouse_api.gunicorn_conf). A
client's id is kept as sent when it is 1 to 128 visible ASCII characters, so a
proxy's or a caller's id joins the lines up; anything else is replaced.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

import falcon

from gatehouse import logs

HEADER = "X-Request-Id"
SANE = re.compile(r"[\x21-\x7e]{1,128}")


def request_id(sent: str | None) -> str:
    return sent if sent is not None and SANE.fullmatch(sent) else uuid.uuid4().hex


class RequestIds:
    """Falcon middleware, the first of the app's: its lines carry the id from the start."""

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        req.context.request_id = request_id(req.get_header(HEADER))
        req.context.log_ids = logs.bind(request_id=req.context.request_id)

    def process_response(
        self, req: falcon.Request, resp: falcon.Response, resource: Any, req_succeeded: bool
    ) -> None:
        resp.set_header(HEADER, req.context.request_id)
        logs.reset(req.context.log_ids)
