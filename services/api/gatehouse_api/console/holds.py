"""An operator's holds from the console: pause or resume a queue (the overview's queues) or an
account (its page), each after a confirm step; the same handlers as the JSON twins."""

from __future__ import annotations

import uuid

import falcon

from gatehouse.handlers import HoldHandlers
from gatehouse.pauses import require_queue
from gatehouse_api.console.web import PREFIX, Confirmed, Console


class _Hold(Confirmed):
    def __init__(self, console: Console, handlers: HoldHandlers) -> None:
        super().__init__(console)
        self.handlers = handlers


class PauseQueue(_Hold):
    """The form twin of POST /v1/admin/queues/{queue}/pause."""

    label = "Pause the queue"

    def describe(self, req: falcon.Request, queue: str) -> tuple[str, str, str]:
        require_queue(queue)
        return (
            f"Pause queue {queue}?",
            "Every worker process stops taking its messages within a second: they stay queued, no "
            "attempt is spent, and the jobs running now finish. Resume it to carry on.",
            f"POST /v1/admin/queues/{queue}/pause",
        )

    def act(self, req: falcon.Request, actor: str, queue: str) -> None:
        self.handlers.pause_queue(queue, actor=actor)

    def done(self, queue: str) -> str:
        return f"{PREFIX}#queues-title"


class ResumeQueue(PauseQueue):
    """The form twin of POST /v1/admin/queues/{queue}/resume."""

    label = "Resume the queue"

    def describe(self, req: falcon.Request, queue: str) -> tuple[str, str, str]:
        require_queue(queue)
        return (
            f"Resume queue {queue}?",
            "Every worker process takes its messages again within a second, oldest first.",
            f"POST /v1/admin/queues/{queue}/resume",
        )

    def act(self, req: falcon.Request, actor: str, queue: str) -> None:
        self.handlers.resume_queue(queue, actor=actor)


class PauseAccount(_Hold):
    """The form twin of POST /v1/admin/accounts/{accountId}/pause."""

    label = "Pause the account"

    def describe(self, req: falcon.Request, account_id: uuid.UUID) -> tuple[str, str, str]:
        return (
            "Pause this account's WB jobs?",
            "Its user jobs wait (phase paused, no attempt spent) and its scheduled ones are skipped "
            "(account-paused) until it is resumed; a job running now finishes.",
            f"POST /v1/admin/accounts/{account_id}/pause",
        )

    def act(self, req: falcon.Request, actor: str, account_id: uuid.UUID) -> None:
        self.handlers.pause_account(account_id, actor=actor)

    def done(self, account_id: uuid.UUID) -> str:
        return f"{PREFIX}/accounts/{account_id}"


class ResumeAccount(PauseAccount):
    """The form twin of POST /v1/admin/accounts/{accountId}/resume."""

    label = "Resume the account"

    def describe(self, req: falcon.Request, account_id: uuid.UUID) -> tuple[str, str, str]:
        return (
            "Resume this account's WB jobs?",
            "Its waiting jobs run at their next look at the account (within GATE_POLL_DELAY_MS); "
            "its next scheduled runs are no longer skipped.",
            f"POST /v1/admin/accounts/{account_id}/resume",
        )

    def act(self, req: falcon.Request, actor: str, account_id: uuid.UUID) -> None:
        self.handlers.resume_account(account_id, actor=actor)
