"""dev/ensure-uv on a machine without uv: it prints a uv that runs, wherever pip put it.

Each case runs the real script with a fresh HOME and a PATH that holds no uv,
against a real Python (the base interpreter, a fresh venv), and installs uv from
the package index (skipped locally when the index cannot be reached). The
Makefile's own `UV :=` line then has to give a command that runs.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import IN_CI
from tests.support.processes import REPO

SCRIPT = REPO / "dev" / "ensure-uv"
BASE_PYTHON = Path(sys.base_prefix) / "bin" / "python3"


@pytest.fixture(scope="module")
def pip_cache(tmp_path_factory) -> Path:
    # The case under test is "python3 with pip, no uv": a Python without pip or venv is not it.
    for module in ("pip", "venv"):
        if subprocess.run(
            [str(BASE_PYTHON), "-m", module, "--help"], capture_output=True, timeout=60
        ).returncode:
            pytest.skip(f"{BASE_PYTHON} has no working {module} module")
    return tmp_path_factory.mktemp("pip-cache")  # one download of uv for the module, not the user's cache


def path_without_uv() -> str:
    dirs = [d for d in os.environ.get("PATH", "/usr/bin:/bin").split(os.pathsep) if d]
    return os.pathsep.join(d for d in dirs if not (Path(d) / "uv").exists())


def python_shim(directory: Path, python: Path) -> Path:
    """A directory whose python3 is ``python`` (and nothing else of its bin dir)."""
    directory.mkdir()
    shim = directory / "python3"
    shim.write_text(f'#!/bin/sh\nexec "{python}" "$@"\n')
    shim.chmod(0o755)
    return directory


def clean_env(home: Path, path: str, pip_cache: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k.startswith("PIP_") or k in ("SSL_CERT_FILE", "LANG")}
    env.update(HOME=str(home), PATH=path, PIP_CACHE_DIR=str(pip_cache), PIP_DISABLE_PIP_VERSION_CHECK="1")
    env.update(extra)
    return env


def ensure_uv(env: dict[str, str], python: Path) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([str(SCRIPT)], env=env, cwd=REPO, capture_output=True, text=True, timeout=300)
    if result.returncode != 0 and not IN_CI and not index_reachable(python, env):
        pytest.skip(f"pip cannot reach the package index, so uv cannot be installed:\n{result.stderr}")
    assert result.returncode == 0, result.stderr
    return result


def index_reachable(python: Path, env: dict[str, str]) -> bool:
    probe = subprocess.run(
        [str(python), "-m", "pip", "index", "versions", "uv"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return probe.returncode == 0


def assert_runs(uv: str, env: dict[str, str]) -> None:
    assert Path(uv).is_absolute() and os.access(uv, os.X_OK), uv
    version = subprocess.run([uv, "--version"], env=env, capture_output=True, text=True, timeout=60)
    assert version.returncode == 0 and version.stdout.startswith("uv "), version


def assert_makefile_runs_it(tmp_path: Path, env: dict[str, str], uv: str) -> None:
    """The Makefile's own discovery line, in a makefile whose one target runs ``$(UV) --version``."""
    if shutil.which("make", path=env["PATH"]) is None:
        pytest.skip("no make on PATH")
    line = next(ln for ln in (REPO / "Makefile").read_text().splitlines() if re.match(r"UV\s*:?=", ln))
    makefile = tmp_path / "Makefile.uv"
    makefile.write_text(f"{line}\n\nversion:\n\t@echo UV=$(UV)\n\t@$(UV) --version\n")
    result = subprocess.run(
        ["make", "-s", "-f", str(makefile), "version"],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"UV={uv}\n" in result.stdout and "\nuv " in result.stdout, result.stdout


def test_a_fresh_home_without_uv_gets_a_uv_that_runs(tmp_path, pip_cache):
    # Given a fresh HOME, a plain (non-venv) python3 and no uv on PATH
    home = tmp_path / "home"
    home.mkdir()
    path = f"{python_shim(tmp_path / 'shim', BASE_PYTHON)}{os.pathsep}{path_without_uv()}"
    env = clean_env(home, path, pip_cache)

    # When ensure-uv runs, it prints a uv that runs (where pip put it, for this Python)
    uv = ensure_uv(env, BASE_PYTHON).stdout.strip()
    assert_runs(uv, env)
    # … and the Makefile's discovery gives the same, now without installing again
    assert_makefile_runs_it(tmp_path, env, uv)


def test_inside_a_fresh_venv_it_installs_into_the_venv(tmp_path, pip_cache):
    # Given an active fresh venv (where pip refuses --user) and no uv on PATH
    venv = tmp_path / "venv"
    subprocess.run([str(BASE_PYTHON), "-m", "venv", str(venv)], check=True, timeout=120)
    home = tmp_path / "home"
    home.mkdir()
    env = clean_env(home, f"{venv / 'bin'}{os.pathsep}{path_without_uv()}", pip_cache, VIRTUAL_ENV=str(venv))

    # When ensure-uv runs, uv lands in the venv, and that is what it prints
    result = ensure_uv(env, venv / "bin" / "python3")
    uv = result.stdout.strip()
    assert uv == str(venv / "bin" / "uv"), result.stderr
    assert not (home / ".local").exists()  # nothing went to the user site
    assert_runs(uv, env)
    assert_makefile_runs_it(tmp_path, env, uv)


def test_a_uv_already_importable_is_found_where_it_is_without_installing(tmp_path, pip_cache):
    # Given uv installed for python3 outside PATH and outside ~/.local/bin (pip install --target)
    home = tmp_path / "home"
    home.mkdir()
    target = tmp_path / "site"
    path = f"{python_shim(tmp_path / 'shim', BASE_PYTHON)}{os.pathsep}{path_without_uv()}"
    env = clean_env(home, path, pip_cache, PYTHONPATH=str(target))
    install = subprocess.run(
        [str(BASE_PYTHON), "-m", "pip", "install", "--quiet", "--target", str(target), "uv"],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    if install.returncode != 0:
        if not IN_CI and not index_reachable(BASE_PYTHON, env):
            pytest.skip(f"pip cannot reach the package index:\n{install.stderr}")
        raise AssertionError(install.stderr)

    # When ensure-uv runs, it prints that uv (pip would only say "already satisfied")
    result = ensure_uv(env, BASE_PYTHON)
    assert result.stdout.strip() == str(target / "bin" / "uv"), result.stderr
    assert "pip install" not in result.stderr
    assert_runs(result.stdout.strip(), env)
