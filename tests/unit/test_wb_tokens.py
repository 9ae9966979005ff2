"""A WB token's expiry (its JWT's exp, read without a signature check), its categories as the API
shows them, what a seller reads of a missing category or a token about to expire, and where each
WB host's calls go."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta

import pytest

from gatehouse import progress as P
from gatehouse.errors import ValidationFailed
from gatehouse.settings import Settings
from gatehouse.wb import client as wb
from gatehouse.wb import tokens
from gatehouse.wb.hosts import CATEGORIES, HOST_LABELS

NOW = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)


def jwt(claims: dict) -> str:
    """A token shaped like WB's: header.claims.signature, base64url without padding."""
    part = lambda data: base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()  # noqa: E731
    return f"{part({'alg': 'ES256', 'typ': 'JWT'})}.{part(claims)}.c2lnbmF0dXJl"


def test_a_jwts_exp_is_its_expiry_and_an_opaque_token_has_none():
    exp = int((NOW + timedelta(days=180)).timestamp())
    assert tokens.expires_at(jwt({"sid": "s", "exp": exp})) == datetime.fromtimestamp(exp, UTC)
    assert tokens.expires_at("Bearer " + jwt({"sid": "s", "exp": exp})) == datetime.fromtimestamp(exp, UTC)
    assert tokens.expires_at("seller-1") is None  # the sandbox's opaque token
    assert tokens.expires_at(jwt({"sid": "s"})) is None  # no exp claim
    assert tokens.expires_at(jwt({"sid": "s", "exp": "tomorrow"})) is None
    assert tokens.expires_at("a.%%%.c") is None  # three parts, not base64: opaque


def test_an_expired_token_is_refused_on_wb_token_in_russian_and_a_live_one_gives_its_expiry():
    live = jwt({"sid": "s", "exp": int((NOW + timedelta(seconds=1)).timestamp())})
    assert tokens.require_unexpired(live, now=NOW) == NOW + timedelta(seconds=1)
    assert tokens.require_unexpired("seller-1", now=NOW) is None
    with pytest.raises(ValidationFailed) as refused:
        tokens.require_unexpired(jwt({"sid": "s", "exp": int(NOW.timestamp())}), now=NOW)
    assert refused.value.field == "wbToken"
    assert "Срок действия токена Wildberries истёк 07.12.2026" in refused.value.detail


def test_every_category_is_granted_denied_or_unknown():
    assert tokens.access_view(None) == dict.fromkeys(CATEGORIES, "unknown")
    shown = tokens.access_view({"finance": "denied", "statistics": "granted"})
    assert shown == {**dict.fromkeys(CATEGORIES, "unknown"), "finance": "denied", "statistics": "granted"}


def test_a_denied_category_a_job_needs_is_a_409_naming_it_and_another_is_not():
    tokens.require_scopes("acc", {"finance": "denied"}, ("statistics",))
    tokens.require_scopes("acc", {"finance": "unknown"}, ("finance",))  # not known yet: let it try
    with pytest.raises(tokens.TokenScopeMissing) as refused:
        tokens.require_scopes("acc", {"finance": "denied"}, ("finance",))
    assert refused.value.code == "TOKEN_SCOPE_MISSING" and refused.value.details == {"category": "finance"}
    assert refused.value.detail.startswith("Токен не даёт доступа к категории «Финансы»")


def test_a_failed_job_whose_token_lacks_a_category_says_which_and_what_to_do():
    shown = P.render(
        P.stored(P.FAILED, reason=P.WB_TOKEN_SCOPE, category="finance"),
        job_type="import-user-report",
        attempt=1,
        max_attempts=5,
    )
    assert shown["message"] == (
        "Токен не даёт доступа к категории «Финансы» — выпустите токен с этой категорией"
    )


@pytest.mark.parametrize(
    ("left", "said"),
    [
        (timedelta(days=6, hours=1), "через 6 дней"),
        (timedelta(days=2), "через 2 дня"),
        (timedelta(hours=5), "сегодня"),
    ],
)
def test_a_token_about_to_expire_is_warned_of_at_the_end_of_a_status_message(left, said):
    warning = P.expiry_warning(NOW + left, NOW)
    assert warning.startswith(f"Токен Wildberries истекает {said}") and warning.endswith(
        "выпустите новый токен"
    )
    shown = P.render(
        P.stored(P.COMPLETED), job_type="import-user-feeds", attempt=1, max_attempts=5, token_warning=warning
    )
    assert shown["message"] == f"Готово. {warning}" and shown["tokenWarning"] == warning


def test_each_host_has_its_url_with_a_prefix_kept_and_the_sandbox_base_names_the_host(monkeypatch):
    monkeypatch.setenv("WB_FINANCE_URL", "https://proxy.example/wb/finance/")
    monkeypatch.delenv("WB_API_BASE_URL", raising=False)
    settings = Settings()
    assert settings.wb_host("finance") + wb.REPORT.path == (
        "https://proxy.example/wb/finance/api/finance/v1/sales-reports/detailed"
    )
    assert settings.wb_host("common") == "https://common-api.wildberries.ru"
    sandbox = settings.model_copy(update={"wb_api_base_url": "http://127.0.0.1:8081/"})
    assert {s: sandbox.wb_host(s) for s in HOST_LABELS} == {
        s: f"http://127.0.0.1:8081/{label}" for s, label in HOST_LABELS.items()
    }


def test_every_category_is_pinged_on_its_own_host_in_its_own_bucket():
    pings = [wb.ping_of(c) for c in CATEGORIES]
    assert [(p.category, p.path) for p in pings] == [(c, "/ping") for c in CATEGORIES]
    assert len({p.bucket for p in pings}) == len(CATEGORIES)
    assert wb.SELLER_INFO.category is None  # any token may read its seller
