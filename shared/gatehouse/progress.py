"""The ``progress`` of a job: what it is doing or waiting for, in ready-to-show Russian.

The worker stores ``{"phase", "resumeAt", "reason"}`` on the row at every
transition; the status poll renders ``message`` when it is read, so
"через ~2 мин" is true at that moment, and adds ``attempt``/``maxAttempts``
from the row. All wording lives in this module.
"""

from __future__ import annotations

import math
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

RUNNING = "running"
WAITING_ACCOUNT = "waiting-account"
RATE_LIMITED = "rate-limited"
WAITING_ENDPOINT = "waiting-endpoint"  # a webhook attempt waits for a free slot of its endpoint
RETRYING = "retrying"
PAUSED = "paused"  # an operator paused the job's account (POST /v1/admin/accounts/{id}/pause)
COMPLETED = "completed"
FAILED = "failed"
PHASES = (RUNNING, WAITING_ACCOUNT, RATE_LIMITED, WAITING_ENDPOINT, PAUSED, RETRYING, COMPLETED, FAILED)

# Reasons recorded by the worker (progress.reason / error.code).
WB_429 = "wb-429"
CANCELLED = "cancelled"  # an operator stopped the job (POST /v1/jobs/{id}/cancel)


def stored(
    phase: str, *, resume_at_ms: int | None = None, reason: str | None = None, **extra: Any
) -> dict[str, Any]:
    """The shape kept on the row; ``extra`` holds worker bookkeeping (e.g. waitingSince)."""
    resume_at = None
    if resume_at_ms is not None:
        resume_at = datetime.fromtimestamp(resume_at_ms / 1000, UTC).isoformat(timespec="milliseconds")
    return {"phase": phase, "resumeAt": resume_at, "reason": reason, **extra}


# -- Russian ---------------------------------------------------------------------


def plural(n: int, one: str, few: str, many: str) -> str:
    """The Russian noun form for ``n``: 1 попытка, 2 попытки, 5 попыток, 21 попытка, 11 попыток."""
    n = abs(n)
    if n % 10 == 1 and n % 100 != 11:
        return one
    if 2 <= n % 10 <= 4 and not 12 <= n % 100 <= 14:
        return few
    return many


def in_about(ms: float) -> str:
    """«через ~15 с», «через ~2 мин», «через ~1 ч 30 мин»: the wait, rounded to what matters.

    Under a minute: whole seconds, rounded up (never promise earlier than true).
    Under an hour: minutes, rounded to nearest. Longer: hours and the minutes
    rounded to 10. Abbreviations («с», «мин», «ч») do not decline.
    """
    seconds = ms / 1000
    if seconds < 1:
        return "через несколько секунд"
    if seconds < 59.5:
        return f"через ~{math.ceil(seconds)} с"
    minutes = round(seconds / 60)
    if minutes < 60:
        return f"через ~{minutes} мин"
    hours, rest = divmod(round(seconds / 600) * 10, 60)
    return f"через ~{hours} ч" + (f" {rest} мин" if rest else "")


RUNNING_TEXT = {
    "import-user-feeds": "Загружаем заказы и продажи из Wildberries",
    "import-user-report": "Загружаем отчёт о реализации из Wildberries",
    "autobidder-sync-user": "Синхронизируем кампании и ставки из Wildberries",
    "inventory-sync-user": "Загружаем остатки на складах из Wildberries",
}

# Why an attempt failed, for «… — повторим (попытка 3 из 5) через ~2 мин».
FAILURE_TEXT = {
    WB_429: "Wildberries ответил «слишком много запросов» (429)",
    "wb-unavailable": "Wildberries временно недоступен",
    "wb-timeout": "Wildberries не ответил вовремя",
    "wb-forbidden": "Wildberries запретил доступ к методу (403)",
    "wb-bad-request": "Wildberries отклонил запрос (400)",
    CANCELLED: "задача отменена оператором",
    # The limits (docs/operations/limits.md): a run past its time limit, a statement PostgreSQL stopped.
    "time-limit": "задача не уложилась в отведённое время",
    "lock-timeout": "данные заняты другой операцией",
    "write-conflict": "данные одновременно изменила другая операция",
    "statement-timeout": "база данных не ответила вовремя",
}
GENERIC_FAILURE = "задача завершилась с ошибкой"
# A failure the seller must act on: the whole message says what to do.
FAILED_TEXT = {
    "wb-unauthorized": "Wildberries отклонил токен — обновите токен в настройках кабинета",
}
# The token lacks the category a job needs (scope_message names it).
WB_TOKEN_SCOPE = "wb-token-scope"
# WB's token categories as its token form names them (gatehouse.wb.hosts.CATEGORIES).
CATEGORY_NAMES = {
    "statistics": "Статистика",
    "finance": "Финансы",
    "promotion": "Продвижение",
    "analytics": "Аналитика",
    "content": "Контент",
}


def scope_message(category: str) -> str:
    """What a seller reads when the token lacks ``category`` (the status poll, the 409)."""
    name = CATEGORY_NAMES.get(category, category)
    return f"Токен не даёт доступа к категории «{name}» — выпустите токен с этой категорией"


def expiry_warning(expires_at: datetime, now: datetime) -> str:
    """Appended to a status message while the account's token expires soon."""
    days = max(0, (expires_at - now).days)
    when = "сегодня" if days == 0 else f"через {days} {plural(days, 'день', 'дня', 'дней')}"
    return f"Токен Wildberries истекает {when} ({expires_at:%d.%m.%Y}) — выпустите новый токен"


# What a job waits for at its account's gate: the holder's work, in the genitive («Ждём завершения …»).
WAITED_TEXT = {
    "import-user-feeds": "импорта заказов и продаж",
    "import-user-report": "импорта отчёта",
    "autobidder-sync-user": "синхронизации кампаний и ставок",
    "inventory-sync-user": "синхронизации остатков",
    "digitization:sync-account": "плановой загрузки заказов и продаж",
    "digitization:sync-account-backfill": "плановой догрузки заказов и продаж",
    "rnp:ads-sync-account": "плановой синхронизации рекламы",
    "rnp:finance-sync-account": "плановой загрузки финансового отчёта",
}
WAITED_OTHER = "другой задачи"


@dataclass(frozen=True)
class Waiting:
    """Where a job waiting for its account's gate stands: the holder (None: not known now) and its
    position in the line (1 = next; None: not in it now)."""

    holder_id: uuid.UUID | None = None
    holder_type: str | None = None
    holder_tier: str | None = None
    holder_phase: str | None = None
    position: int | None = None


def _place(position: int | None) -> str:
    """«вы следующий, », «перед вами 2, »: how many wait ahead in the line (the holder aside)."""
    if position is None:
        return ""
    return "вы следующий, " if position == 1 else f"перед вами {position - 1}, "


def _failure(reason: str | None) -> str:
    return FAILURE_TEXT.get(reason or "", GENERIC_FAILURE)


def message(
    phase: str,
    *,
    job_type: str,
    attempt: int,
    max_attempts: int,
    resume_in_ms: float | None,
    reason: str | None,
    result: dict[str, Any] | None = None,
    waiting: Waiting | None = None,
    category: str | None = None,
) -> str:
    wait = in_about(resume_in_ms) if resume_in_ms is not None else "через несколько секунд"
    if phase == RUNNING:
        return RUNNING_TEXT.get(job_type, "Задача выполняется")
    if phase == WAITING_ACCOUNT:
        waiting = waiting or Waiting()
        what = WAITED_TEXT.get(waiting.holder_type or "", WAITED_OTHER)
        return f"Ждём завершения {what} по этому кабинету — {_place(waiting.position)}проверим {wait}"
    if phase == RATE_LIMITED:
        return f"Пауза по лимиту запросов Wildberries — продолжим {wait}"
    if phase == WAITING_ENDPOINT:
        return f"Ждём свободного слота получателя вебхука — проверим {wait}"
    if phase == PAUSED:
        return f"Кабинет приостановлен оператором — проверим {wait}"
    if phase == RETRYING:
        return f"{_failure(reason)[0].upper()}{_failure(reason)[1:]} — повторим (попытка {attempt} из {max_attempts}) {wait}"
    if phase == COMPLETED:
        if result and result.get("skipped") and result.get("reason") == "account-paused":
            return "Пропущено: кабинет приостановлен оператором — возьмём в следующий раз"
        if result and result.get("skipped"):
            return "Пропущено: по кабинету выполнялась другая задача — возьмём в следующий раз"
        return "Готово"
    if phase == FAILED and reason == WB_TOKEN_SCOPE:
        return scope_message(category or "")
    if phase == FAILED and reason in FAILED_TEXT:
        return FAILED_TEXT[reason]
    if phase == FAILED:
        # «после 1 попытки / 2 попыток / 21 попытки» (genitive after «после»); a cancelled job's
        # ``attempt`` is the one it was waiting to run, so its tries are not counted.
        tried = attempt > 1 and reason != CANCELLED
        tries = f" после {attempt} {plural(attempt, 'попытки', 'попыток', 'попыток')}" if tried else ""
        return f"Не получилось{tries}: {_failure(reason)}"
    return "Задача выполняется"


def render(
    stored_progress: dict[str, Any] | None,
    *,
    job_type: str,
    attempt: int,
    max_attempts: int,
    result: dict[str, Any] | None = None,
    now: datetime | None = None,
    waiting: Waiting | None = None,
    token_warning: str | None = None,
) -> dict[str, Any] | None:
    """The status poll's ``progress``: phase, message, resumeAt, attempt, maxAttempts; and, given
    ``waiting`` (a job waiting for its account's gate), waitingFor (the holder) and position; given
    ``token_warning`` (its account's token expires soon: ``expiry_warning``), that too, also said
    at the end of the message."""
    if stored_progress is None:
        return None
    now = now or datetime.now(UTC)
    resume_at = stored_progress.get("resumeAt")
    resume_in_ms = None
    if resume_at:
        resume_in_ms = (datetime.fromisoformat(resume_at) - now).total_seconds() * 1000
    phase = stored_progress["phase"]
    rendered = {
        "phase": phase,
        "message": message(
            phase,
            job_type=job_type,
            attempt=attempt,
            max_attempts=max_attempts,
            resume_in_ms=resume_in_ms,
            reason=stored_progress.get("reason"),
            result=result,
            waiting=waiting,
            category=stored_progress.get("category"),
        ),
        "resumeAt": resume_at,
        "attempt": attempt,
        "maxAttempts": max_attempts,
    }
    if token_warning:
        rendered["message"] = f"{rendered['message'].rstrip('.')}. {token_warning}"
        rendered["tokenWarning"] = token_warning
    if waiting is not None and phase == WAITING_ACCOUNT:
        rendered["waitingFor"] = (
            None
            if waiting.holder_id is None
            else {
                "jobId": str(waiting.holder_id),
                "type": waiting.holder_type,
                "tier": waiting.holder_tier,
                "phase": waiting.holder_phase,
            }
        )
        rendered["position"] = waiting.position
    return rendered
