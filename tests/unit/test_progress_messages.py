"""Russian status messages: one per phase, plural forms, rounding."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from gatehouse import progress as P

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def rendered(
    phase,
    *,
    in_ms=None,
    reason=None,
    attempt=1,
    max_attempts=5,
    job_type="import-user-feeds",
    result=None,
    waiting=None,
):
    resume = int((NOW + timedelta(milliseconds=in_ms)).timestamp() * 1000) if in_ms is not None else None
    return P.render(
        P.stored(phase, resume_at_ms=resume, reason=reason),
        job_type=job_type,
        attempt=attempt,
        max_attempts=max_attempts,
        result=result,
        now=NOW,
        waiting=waiting,
    )


def test_the_429_retry_message_is_exactly_the_adr_text():
    progress = rendered(P.RETRYING, in_ms=120_000, reason=P.WB_429, attempt=3, max_attempts=5)
    assert (
        progress["message"]
        == "Wildberries ответил «слишком много запросов» (429) — повторим (попытка 3 из 5) через ~2 мин"
    )
    assert progress["attempt"] == 3 and progress["maxAttempts"] == 5
    assert progress["resumeAt"] == (NOW + timedelta(minutes=2)).isoformat(timespec="milliseconds")


@pytest.mark.parametrize(
    ("phase", "kwargs", "expected"),
    [
        (P.RUNNING, {}, "Загружаем заказы и продажи из Wildberries"),
        (P.RUNNING, {"job_type": "import-user-report"}, "Загружаем отчёт о реализации из Wildberries"),
        (P.RUNNING, {"job_type": "autobidder-sync-user"}, "Синхронизируем кампании и ставки из Wildberries"),
        (P.WAITING_ACCOUNT, {"in_ms": 15_000}, "Ждём завершения другой задачи по этому кабинету — проверим через ~15 с"),
        (P.RATE_LIMITED, {"in_ms": 125_000}, "Пауза по лимиту запросов Wildberries — продолжим через ~2 мин"),
        (P.RETRYING, {"in_ms": 60_000, "reason": "wb-unavailable", "attempt": 2},
         "Wildberries временно недоступен — повторим (попытка 2 из 5) через ~1 мин"),
        (P.RETRYING, {"in_ms": 1_000, "reason": "RuntimeError", "attempt": 2},
         "Задача завершилась с ошибкой — повторим (попытка 2 из 5) через ~1 с"),
        (P.COMPLETED, {}, "Готово"),
        (P.COMPLETED, {"result": {"skipped": True, "reason": "account-busy"}},
         "Пропущено: по кабинету выполнялась другая задача — возьмём в следующий раз"),
        (P.FAILED, {"reason": "wb-unauthorized"}, "Wildberries отклонил токен — обновите токен в настройках кабинета"),
        (P.PAUSED, {"in_ms": 15_000}, "Кабинет приостановлен оператором — проверим через ~15 с"),
        (P.COMPLETED, {"result": {"skipped": True, "reason": "account-paused"}},
         "Пропущено: кабинет приостановлен оператором — возьмём в следующий раз"),
        (P.FAILED, {"reason": P.WB_429, "attempt": 5},
         "Не получилось после 5 попыток: Wildberries ответил «слишком много запросов» (429)"),
    ],
)  # fmt: skip
def test_each_phase_has_its_message(phase, kwargs, expected):
    assert rendered(phase, **kwargs)["message"] == expected


HOLDER = uuid.UUID(int=7)


@pytest.mark.parametrize(
    ("waiting", "expected"),
    [
        (P.Waiting(HOLDER, "import-user-report", "user", P.RUNNING, position=1),
         "Ждём завершения импорта отчёта по этому кабинету — вы следующий, проверим через ~15 с"),
        (P.Waiting(HOLDER, "rnp:ads-sync-account", "scheduled", P.RATE_LIMITED, position=3),
         "Ждём завершения плановой синхронизации рекламы по этому кабинету — перед вами 2, проверим через ~15 с"),
        (P.Waiting(position=2),
         "Ждём завершения другой задачи по этому кабинету — перед вами 1, проверим через ~15 с"),
    ],
)  # fmt: skip
def test_a_job_waiting_for_its_account_names_the_holder_and_its_place(waiting, expected):
    progress = rendered(P.WAITING_ACCOUNT, in_ms=15_000, waiting=waiting)

    assert progress["message"] == expected
    assert progress["position"] == waiting.position
    holder = {
        "jobId": str(HOLDER),
        "type": waiting.holder_type,
        "tier": waiting.holder_tier,
        "phase": waiting.holder_phase,
    }
    assert progress["waitingFor"] == (holder if waiting.holder_id else None)


def test_only_a_waiting_job_gets_a_holder_and_a_place():
    assert "waitingFor" not in rendered(P.RUNNING, waiting=P.Waiting(HOLDER, "x", "user", P.RUNNING, 1))
    assert "waitingFor" not in rendered(P.WAITING_ACCOUNT, in_ms=1_000)


@pytest.mark.parametrize(
    ("ms", "expected"),
    [
        (400, "через несколько секунд"),
        (1_000, "через ~1 с"),
        (14_200, "через ~15 с"),  # seconds round up: never promise earlier than true
        (59_400, "через ~60 с"),
        (59_600, "через ~1 мин"),
        (89_000, "через ~1 мин"),
        (91_000, "через ~2 мин"),
        (59 * 60_000, "через ~59 мин"),
        (3_600_000, "через ~1 ч"),
        (5_400_000, "через ~1 ч 30 мин"),
        (6 * 3_600_000 + 4 * 60_000, "через ~6 ч"),
    ],
)
def test_waits_are_rounded_to_what_matters(ms, expected):
    assert P.in_about(ms) == expected


@pytest.mark.parametrize(
    ("n", "form"),
    [(1, "попытка"), (2, "попытки"), (4, "попытки"), (5, "попыток"), (11, "попыток"), (12, "попыток"),
     (14, "попыток"), (21, "попытка"), (22, "попытки"), (25, "попыток"), (101, "попытка"), (111, "попыток")],
)  # fmt: skip
def test_plural_forms(n, form):
    assert P.plural(n, "попытка", "попытки", "попыток") == form


def test_no_progress_until_the_job_first_starts():
    assert P.render(None, job_type="x", attempt=1, max_attempts=1) is None
