"""The one error tree of Gatehouse.

Domain code raises these; the API maps them to problem+json in one place
(gatehouse_api.errors) and the worker decides retry or failure from them.
Each error has a stable machine-readable ``code``.
"""

from __future__ import annotations

from typing import Any


class GatehouseError(Exception):
    code = "INTERNAL_ERROR"

    def __init__(self, detail: str, *, code: str | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        if code:
            self.code = code


class ConfigurationError(GatehouseError):
    """The process cannot start with this configuration."""

    code = "CONFIGURATION_ERROR"


class ValidationFailed(GatehouseError):
    """Input that breaks a rule; ``field`` names the offending field.

    ``errors`` lists every invalid field found, as ``(field, message)``; the first
    is the one ``field`` and ``detail`` name (alone, when only one was found).
    """

    code = "VALIDATION_ERROR"

    def __init__(
        self,
        detail: str,
        *,
        field: str | None = None,
        code: str | None = None,
        errors: list[tuple[str | None, str]] | None = None,
    ) -> None:
        super().__init__(detail, code=code)
        self.field = field
        self.errors = errors or [(field, detail)]

    @classmethod
    def of(cls, errors: list[tuple[str | None, str]]) -> ValidationFailed:
        """Several invalid fields at once (at least one): the first leads."""
        field, detail = errors[0]
        return cls(detail, field=field, errors=errors)


class NotFound(GatehouseError):
    code = "NOT_FOUND"


class Unauthorized(GatehouseError):
    code = "UNAUTHORIZED"


class Forbidden(GatehouseError):
    code = "FORBIDDEN"


class TooManyAttempts(GatehouseError):
    """Too many failed authentications from this client address: refused for ``retry_after_s``."""

    code = "TOO_MANY_ATTEMPTS"

    def __init__(self, detail: str, *, retry_after_s: int, code: str | None = None) -> None:
        super().__init__(detail, code=code)
        self.retry_after_s = retry_after_s


class Conflict(GatehouseError):
    """The change collides with what is stored (a duplicate email or sku); ``field`` names what collides."""

    code = "CONFLICT"

    def __init__(self, detail: str, *, field: str | None = None, code: str | None = None) -> None:
        super().__init__(detail, code=code)
        self.field = field


class StoreUnavailable(GatehouseError):
    """A store did not answer (down, refusing, frozen); the same request may succeed shortly.

    ``store`` names it: ``postgresql`` or ``redis``.
    """

    code = "STORE_UNAVAILABLE"

    def __init__(self, detail: str, *, store: str, code: str | None = None) -> None:
        super().__init__(detail, code=code)
        self.store = store


class PermanentJobError(GatehouseError):
    """A job failure that no retry can fix (bad token, bad request): fail at once."""

    code = "PERMANENT_ERROR"


class JobCancelled(PermanentJobError):
    """An operator cancelled the running job (POST /v1/jobs/{id}/cancel): it stops, failed."""

    code = "cancelled"  # gatehouse.progress.CANCELLED

    def __init__(
        self, detail: str = "cancelled by an operator while it ran", *, code: str | None = None
    ) -> None:
        super().__init__(detail, code=code)


class RetryLater(GatehouseError):
    """A failed attempt whose next one must wait at least ``after_ms`` (a webhook's Retry-After)."""

    code = "RETRY_LATER"

    def __init__(self, detail: str, *, after_ms: int, code: str | None = None) -> None:
        super().__init__(detail, code=code)
        self.after_ms = after_ms


class JobPaused(GatehouseError):
    """The job stops here and runs again at ``resume_at_ms``; no attempt is consumed.

    Raised for a WB rate-limit pause (phase ``rate-limited``) and when a job
    lost its lease or gate (phase ``waiting-account``). The job resumes from
    the checkpoint it saved on its row.
    """

    code = "PAUSED"

    def __init__(self, detail: str, *, resume_at_ms: int, phase: str, reason: str) -> None:
        super().__init__(detail)
        self.resume_at_ms = resume_at_ms
        self.phase = phase
        self.reason = reason


class RunTimeLimitExceeded(GatehouseError):
    """A run went past its job type's run time limit: a failed attempt, its retry policy applies.

    Raised at the run's next cooperative point (``JobContext.ensure_held``) or, as a
    backstop, interrupted into its thread (gatehouse_worker.time_limits), hence the
    default detail: an exception raised from outside is built without arguments.
    """

    code = "time-limit"

    def __init__(self, detail: str = "the run went past its time limit", *, code: str | None = None) -> None:
        super().__init__(detail, code=code)


def error_info(exc: BaseException) -> dict[str, Any]:
    """What a failed step records (a job's ``error``, a bulk operation's): its stable code and message.

    A statement PostgreSQL stopped says why (``lock-timeout``, …: gatehouse.db.cut_short, ahead of
    SQLAlchemy's own ``code``, which is only the key of its help page); an error with a ``code``
    (ours) gives it; any other is named by its type.
    """
    from gatehouse.db import cut_short  # here, not above: gatehouse.db imports this module

    code = cut_short(exc) or getattr(exc, "code", None) or type(exc).__name__
    # ``details``: what the error adds for whoever reads it (a WB token's missing category).
    return {"code": code, "message": str(exc) or type(exc).__name__, **getattr(exc, "details", {})}
