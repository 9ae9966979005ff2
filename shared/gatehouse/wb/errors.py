"""What can go wrong talking to Wildberries, and whether trying again can help.

Each error's ``code`` is the reason the worker records on the job
(gatehouse.progress renders it in Russian). Permanent errors fail the job at
once; the others are retried on the job's ladder.
"""

from __future__ import annotations

import time

from gatehouse.errors import GatehouseError, JobPaused, PermanentJobError


class WbError(GatehouseError):
    """A WB call failed in a way a later attempt may not repeat (5xx, timeout, 429)."""

    code = "wb-error"


class WbRateLimited(JobPaused, WbError):
    """429: WB allows the next request after ``retry_after_s``.

    A pause, not a failure: the job stops, keeps its checkpoint and runs again
    when WB allows, without using an attempt (unless WB asks for longer than
    WB_MAX_PAUSE_MS: then the lifecycle counts it as a failed attempt).
    """

    code = "wb-429"

    def __init__(
        self, detail: str, *, retry_after_s: float, limit: int | None = None, reset_s: float | None = None
    ):
        super().__init__(
            detail,
            resume_at_ms=int(time.time() * 1000 + retry_after_s * 1000),
            phase="rate-limited",
            reason="wb-429",
        )
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


class WbScopeDenied(WbPermanentError):
    """401 ``token scope not allowed``: the token is fine but lacks ``category`` (the host's).

    Only the jobs that need that category fail; the account's token stays valid.
    """

    code = "wb-token-scope"

    def __init__(self, detail: str, *, category: str) -> None:
        super().__init__(detail)
        self.category = category
        self.details = {"category": category}  # in the job's error (gatehouse.errors.error_info)


class WbForbidden(WbPermanentError):
    code = "wb-forbidden"


class WbBadRequest(WbPermanentError):
    code = "wb-bad-request"
