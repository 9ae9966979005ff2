"""gatehouse-api refuses to start without a required setting, saying what it is and how to make one."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from cryptography.fernet import Fernet


def refusal(processes, variable: str, value: str = "") -> str:
    proc = processes.start("api", "gatehouse-api", env={variable: value})
    assert proc.wait(timeout=30) != 0
    return proc.log()


def test_missing_token_encryption_key_says_what_it_is_and_prints_a_working_command(processes):
    log = refusal(processes, "TOKEN_ENCRYPTION_KEY")

    assert "TOKEN_ENCRYPTION_KEY is not set" in log
    assert "Fernet key" in log and "WB tokens" in log
    # Not the store text: there is no server to point it at.
    assert "Point it at your server" not in log
    assert "embedded PostgreSQL" not in log
    # The command it gives prints a key Fernet accepts.
    [code] = re.findall(r'python -c "([^"]+)"', log)
    key = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    Fernet(key.strip())


def test_a_short_admin_token_is_refused_with_a_command_that_makes_a_long_one(processes):
    log = refusal(processes, "ADMIN_TOKEN", "a" * 31)

    assert "ADMIN_TOKEN: must be at least 32 characters (got 31)" in log
    [code] = re.findall(r'python -c "([^"]+)"', log)
    token = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert len(token.strip()) >= 32


@pytest.mark.parametrize(("variable", "store"), [("DATABASE_URL", "PostgreSQL"), ("REDIS_URL", "Redis")])
def test_missing_store_url_keeps_the_store_text(processes, variable, store):
    log = refusal(processes, variable)

    assert f"{variable} is not set" in log
    assert store in log
    assert "Point it at your server" in log and "make run" in log
    assert "Fernet" not in log


def test_missing_console_secret_says_what_it_is_and_how_to_make_one(processes):
    log = refusal(processes, "CONSOLE_SECRET")

    assert "CONSOLE_SECRET is not set" in log and "console's sessions" in log
    [code] = re.findall(r'python -c "([^"]+)"', log)
    made = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert len(made.strip()) >= 32
