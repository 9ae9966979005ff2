"""The one duration parser (gatehouse.durations) and the settings that read through it."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gatehouse.durations import UNIT_MS, parse_ms
from gatehouse.errors import ConfigurationError
from gatehouse.settings import RETENTION_FIELDS, Settings, load_settings

units = st.sampled_from(sorted(UNIT_MS))


@given(st.integers(min_value=0, max_value=10**9), units, st.sampled_from(["", " "]), st.booleans())
def test_n_with_a_unit_is_n_times_the_unit(n, unit, space, upper):
    text = f"{n}{space}{unit}"
    assert parse_ms(text.upper() if upper else text) == n * UNIT_MS[unit]
    assert parse_ms(f" {text} ", bare_ms=False) == n * UNIT_MS[unit]


@given(st.integers(min_value=0, max_value=10**12))
def test_a_bare_number_is_milliseconds(n):
    assert parse_ms(str(n)) == parse_ms(n) == parse_ms(f"{n}ms") == n


@given(st.text(max_size=12))
def test_anything_else_is_refused_with_a_value_error(text):
    try:
        parsed = parse_ms(text)
    except ValueError as exc:
        assert "duration" in str(exc) or "negative" in str(exc)
    else:
        assert isinstance(parsed, int) and parsed >= 0


@pytest.mark.parametrize("bad", ["7x", "-5s", "1.5h", "h", "", "7 d d", True, 2.5, None, "1e3"])
def test_malformed_durations_are_refused(bad):
    with pytest.raises(ValueError):
        parse_ms(bad)


def test_without_bare_ms_a_bare_number_needs_its_unit_except_zero():
    assert parse_ms("0", bare_ms=False) == 0
    with pytest.raises(ValueError, match=r"needs a unit.*7d"):
        parse_ms("7", bare_ms=False)


def test_every_ms_setting_and_every_retention_setting_takes_the_short_form(monkeypatch):
    durations = [name for name in Settings.model_fields if name.endswith("_ms") or name in RETENTION_FIELDS]
    assert set(durations) >= RETENTION_FIELDS and len(durations) > 20
    for name in durations:
        monkeypatch.setenv(name.upper(), "3m")
    settings = load_settings()
    for name in durations:
        expected = [180_000] if name == "webhook_retry_schedule_ms" else 180_000
        assert getattr(settings, name) == expected, name


def test_real_settings_read_both_forms_from_the_environment(monkeypatch):
    monkeypatch.setenv("JOB_LEASE_MS", "90s")
    monkeypatch.setenv("GATE_POLL_DELAY_MS", "15000")
    monkeypatch.setenv("WEBHOOK_RETRY_SCHEDULE_MS", "0, 5s, 5m, 30m")
    monkeypatch.setenv("JOB_RETENTION_COMPLETED", "12h")
    monkeypatch.setenv("AUDIT_RETENTION", "0")
    settings = load_settings(notification_retention="30d")
    assert settings.job_lease_ms == 90_000
    assert settings.gate_poll_delay_ms == 15_000
    assert settings.webhook_retry_schedule_ms == [0, 5_000, 300_000, 1_800_000]
    assert settings.job_retention_completed == 43_200_000
    assert settings.audit_retention == 0
    assert settings.notification_retention == 30 * 86_400_000


def test_the_retention_defaults_are_the_issues():
    s = Settings()
    day = 86_400_000
    assert (s.job_retention_completed, s.job_retention_failed) == (7 * day, 30 * day)
    assert (s.webhook_retention_delivered, s.webhook_retention_dead) == (7 * day, 30 * day)
    assert (s.notification_retention, s.audit_retention) == (90 * day, 365 * day)


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("JOB_RETENTION_FAILED", "30", r"JOB_RETENTION_FAILED: needs a unit: s, m, h or d, e\.g\. 30d"),
        ("GATE_LEASE_MS", "soon", r"GATE_LEASE_MS: must be a duration like 90s"),
        ("WEBHOOK_RETRY_SCHEDULE_MS", "0,5q", r"WEBHOOK_RETRY_SCHEDULE_MS: must be a duration"),
    ],
)
def test_a_bad_duration_is_a_configuration_error_naming_its_variable(monkeypatch, name, value, message):
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigurationError, match=message):
        load_settings()
