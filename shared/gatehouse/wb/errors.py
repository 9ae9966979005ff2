"""What can go wrong talking to Wildberries, and whether trying again can help.

Each error's ``code`` is the reason the worker records on the job
(gatehouse.progress renders it in Russian). Permanent errors fail the job at
once; the others are retried on the job's ladder.
"""

from __future__ import annotations

from gatehouse.errors import GatehouseError, PermanentJobError


class WbError(GatehouseError):
    """A WB call failed in a way a later attempt may not repeat (5xx, timeout, 429)."""

    code = "wb-error"


class WbRateLimited(WbError):
    """429: WB allows the next request after ``retry_after_s``."""

    code = "wb-429"

    def __init__(
        self, detail: str, *, retry_after_s: float, limit: int | None = None, reset_s: float | None = None
    ):
        super().__init__(detail)
        self.retry_after_s = retry_after_s
        self.limit = limit
        self.reset_s = reset_s


class WbUnavailable(WbError):
    code = "wb-unavailable"


class WbTimeout(WbError):
    code = "wb-timeout"


class WbPermanentError(PermanentJobError):
    """400/401/403: the request or the token is wrong; retrying cannot help."""


class WbUnauthorized(WbPermanentError):
    code = "wb-unauthorized"


class WbForbidden(WbPermanentError):
    code = "wb-forbidden"


class WbBadRequest(WbPermanentError):
    code = "wb-bad-request"
