from __future__ import annotations

import pytest

from gatehouse.errors import ConfigurationError
from gatehouse.settings import load_settings


@pytest.mark.parametrize("given", [None, "", "all", "ALL", " api ", "worker"])
def test_role_accepts_the_three_roles_and_defaults_to_all(monkeypatch, given):
    if given is None:
        monkeypatch.delenv("BACKEND_ROLE", raising=False)
    else:
        monkeypatch.setenv("BACKEND_ROLE", given)
    assert load_settings().backend_role == ((given or "all").strip().lower())


def test_unknown_role_is_a_configuration_error_naming_the_allowed_values(monkeypatch):
    monkeypatch.setenv("BACKEND_ROLE", "scheduler")
    with pytest.raises(
        ConfigurationError, match=r"BACKEND_ROLE: must be one of all, api, worker \(got 'scheduler'\)"
    ):
        load_settings()


@pytest.mark.parametrize(
    "url",
    ["postgresql://u@h/db", "postgres://u@h/db", "postgresql+psycopg://u@h/db"],
)
def test_database_url_always_uses_psycopg3(url):
    assert load_settings(database_url=url).sqlalchemy_url == "postgresql+psycopg://u@h/db"


def test_missing_store_url_says_how_to_get_one(monkeypatch):
    monkeypatch.delenv("DATABASE_URL", raising=False)
    with pytest.raises(ConfigurationError, match=r"DATABASE_URL is not set.*make run"):
        load_settings().require("database_url")


def test_job_modules_is_a_comma_separated_list(monkeypatch):
    monkeypatch.setenv("JOB_MODULES", "a.b, c")
    assert load_settings().job_modules == ["a.b", "c"]


def test_log_level_is_a_level_name_in_any_case_and_nothing_else(monkeypatch):
    monkeypatch.setenv("LOG_LEVEL", " warning ")
    assert load_settings().log_level == "WARNING"
    monkeypatch.setenv("LOG_LEVEL", "LOUD")
    with pytest.raises(
        ConfigurationError, match=r"LOG_LEVEL: .*'DEBUG', 'INFO', 'WARNING', 'ERROR' or 'CRITICAL'"
    ):
        load_settings()


def test_log_format_is_text_unless_json_and_nothing_else(monkeypatch):
    monkeypatch.delenv("LOG_FORMAT", raising=False)
    assert load_settings().log_format == "text"
    monkeypatch.setenv("LOG_FORMAT", " JSON ")
    assert load_settings().log_format == "json"
    monkeypatch.setenv("LOG_FORMAT", "logfmt")
    with pytest.raises(ConfigurationError, match=r"LOG_FORMAT: .*'text' or 'json'"):
        load_settings()


@pytest.mark.parametrize("namespace", ["", "gh{a}", "gh}"])
def test_the_broker_namespace_prefixes_every_key_so_it_is_non_empty_and_brace_free(namespace):
    with pytest.raises(ConfigurationError, match=r"BROKER_NAMESPACE: must be non-empty and without braces"):
        load_settings(broker_namespace=namespace)


def test_the_api_listens_on_loopback_unless_told_otherwise(monkeypatch):
    monkeypatch.delenv("API_HOST", raising=False)
    monkeypatch.delenv("API_PORT", raising=False)
    assert load_settings().api_bind == "127.0.0.1:8000"
    monkeypatch.setenv("API_HOST", "0.0.0.0")
    monkeypatch.setenv("API_PORT", "9000")
    assert load_settings().api_bind == "0.0.0.0:9000"
    monkeypatch.setenv("API_HOST", "::")
    assert load_settings().api_bind == "[::]:9000"


def test_the_metrics_port_cannot_be_the_public_one():
    assert load_settings(api_port=8000, metrics_port=9090).metrics_port == 9090
    with pytest.raises(ConfigurationError, match=r"METRICS_PORT: must differ from API_PORT \(8000\)"):
        load_settings(api_port=8000, metrics_port=8000)


@pytest.mark.parametrize(
    ("old", "new"), [("API_BIND", "API_HOST and API_PORT"), ("WB_SANDBOX_BIND", "WB_SANDBOX_PORT")]
)
def test_a_replaced_setting_stops_the_process_naming_its_successor(monkeypatch, old, new):
    monkeypatch.setenv(old, "0.0.0.0:8000")
    with pytest.raises(ConfigurationError, match=rf"{old} was replaced by {new}"):
        load_settings()


def test_public_url_defaults_to_the_local_api_and_loses_a_trailing_slash(monkeypatch):
    monkeypatch.delenv("PUBLIC_URL", raising=False)
    assert load_settings().public_url == "http://127.0.0.1:8000"
    monkeypatch.setenv("PUBLIC_URL", " https://ops.example.com/gatehouse/ ")
    assert load_settings().public_url == "https://ops.example.com/gatehouse"


@pytest.mark.parametrize("bad", ["ops.example.com", "/console", "ftp://ops.example.com", "https://h/?a=1"])
def test_public_url_must_be_an_absolute_http_url(monkeypatch, bad):
    monkeypatch.setenv("PUBLIC_URL", bad)
    with pytest.raises(ConfigurationError, match=r"PUBLIC_URL: must be an absolute http:// or https:// URL"):
        load_settings()
