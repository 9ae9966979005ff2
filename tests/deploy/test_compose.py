"""infra/compose.yaml: valid per the compose specification, and the single-host stack it promises."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.deploy.manifests import image_reference
from tests.support.processes import BIN, REPO

COMPOSE = REPO / "infra" / "compose.yaml"
GATEHOUSE = ("api", "worker", "scheduler")


def check_compose_spec(path: Path) -> subprocess.CompletedProcess:
    # The compose-spec JSON schema vendored in check-jsonschema, pinned by uv.lock.
    return subprocess.run(
        [str(BIN / "check-jsonschema"), "--builtin-schema", "vendor.compose-spec", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


def test_compose_file_validates_against_the_compose_specification():
    result = check_compose_spec(COMPOSE)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_compose_schema_rejects_an_unknown_service_key(tmp_path):
    # Given the compose file with a misspelt key in a service
    broken = tmp_path / "compose.yaml"
    broken.write_text(
        COMPOSE.read_text().replace("    stop_grace_period: 60s", "    stop_grace_perod: 60s", 1)
    )

    # Then the specification's schema rejects it
    assert check_compose_spec(broken).returncode != 0


def test_every_service_of_the_stack_is_there(compose):
    assert {"postgres", "redis", "migrate", "api", "worker", "scheduler", "wb-sandbox"} <= compose[
        "services"
    ].keys()


def test_roles_and_commands(compose):
    services = compose["services"]

    assert services["api"]["environment"]["BACKEND_ROLE"] == "api"
    # The API listens beyond the container's loopback (its default); the published port decides who reaches it
    assert services["api"]["environment"]["API_HOST"] == "0.0.0.0"
    assert services["worker"]["environment"]["BACKEND_ROLE"] == "worker"
    assert services["worker"]["command"][0] == "gatehouse-worker"
    assert services["scheduler"]["command"] == ["gatehouse-scheduler"]
    assert services["migrate"]["command"] == ["gatehouse-migrate"]
    assert services["migrate"]["restart"] == "no"
    # In a container the sandbox must listen beyond loopback
    assert services["wb-sandbox"]["command"] == ["gatehouse-wb-sandbox", "--bind", "0.0.0.0:8081"]


def test_start_order_waits_for_healthy_stores_and_finished_migrations(compose):
    services = compose["services"]

    assert "healthcheck" in services["postgres"]
    assert "healthcheck" in services["redis"]
    assert services["migrate"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    for name in GATEHOUSE:
        depends = services[name]["depends_on"]
        assert depends["postgres"]["condition"] == "service_healthy", name
        assert depends["redis"]["condition"] == "service_healthy", name
        assert depends["migrate"]["condition"] == "service_completed_successfully", name


def test_workers_can_be_scaled_with_scale_worker_n(compose):
    worker = compose["services"]["worker"]

    # A fixed container name or host port would make the second replica fail
    assert "container_name" not in worker
    assert "ports" not in worker
    # and each replica reports its own consumers' health
    assert "WORKER_HEALTH_PORT" in worker["environment"]
    assert "/healthz" in " ".join(worker["healthcheck"]["test"])


def test_data_lives_in_named_volumes(compose):
    declared = set(compose["volumes"])
    for name in ("postgres", "redis"):
        mounts = compose["services"][name]["volumes"]
        assert {m.split(":", 1)[0] for m in mounts} <= declared, name
    assert declared


def test_images_are_distinct_and_pinned(compose):
    services = compose["services"]
    images = {name: image_reference(s["image"]) for name, s in services.items()}

    assert services["api"]["build"]["dockerfile"] == "services/api/Dockerfile"
    assert services["worker"]["build"]["dockerfile"] == "services/worker/Dockerfile"
    assert images["api"][0] != images["worker"][0]
    for name in ("migrate", "scheduler"):
        assert images[name][0] == images["worker"][0], name
    # The WB sandbox is in neither Gatehouse image: it has its own, development-only one
    assert services["wb-sandbox"]["build"]["dockerfile"] == "dev/wb_sandbox/Dockerfile"
    assert images["wb-sandbox"][0] not in {images["api"][0], images["worker"][0]}
    for name, (_, tag, digest) in images.items():
        assert digest or (tag and tag != "latest"), name


def test_gatehouse_containers_are_hardened_and_stop_gracefully(compose):
    for name in (*GATEHOUSE, "migrate", "wb-sandbox"):
        service = compose["services"][name]
        assert service["read_only"] is True, name
        assert any(t.startswith("/tmp") for t in service["tmpfs"]), name
        assert service["cap_drop"] == ["ALL"], name
    # Longer than gunicorn's graceful timeout (SHUTDOWN_TIMEOUT_MS/1000 + 10 s) at the default timeout
    shutdown_s = int(re.search(r"SHUTDOWN_TIMEOUT_MS:-(\d+)", COMPOSE.read_text())[1]) / 1000
    for name in ("api", "worker"):
        grace = compose["services"][name]["stop_grace_period"]
        assert int(grace.removesuffix("s")) > shutdown_s + 10, name


def test_secrets_are_never_written_into_the_file(compose):
    # Every credential is interpolated from the environment or infra/.env, which git ignores
    assert subprocess.run(["git", "check-ignore", "-q", "infra/.env"], cwd=REPO).returncode == 0
    env = compose["services"]["api"]["environment"]
    for key in ("ADMIN_TOKEN", "CONSOLE_SECRET", "TOKEN_ENCRYPTION_KEY"):
        assert env[key].startswith("${"), key
    assert "${POSTGRES_PASSWORD" in env["DATABASE_URL"]
    assert "${REDIS_PASSWORD" in env["REDIS_URL"]


def test_each_service_gets_only_the_secrets_it_reads(compose):
    services = compose["services"]
    secrets = {
        "DATABASE_URL",
        "REDIS_URL",
        "ADMIN_TOKEN",
        "CONSOLE_SECRET",
        "TOKEN_ENCRYPTION_KEY",
        "SMTP_URL",
    }

    def given(name: str) -> set[str]:
        return secrets & services[name]["environment"].keys()

    assert given("api") == secrets - {"SMTP_URL"}
    assert given("worker") == {"DATABASE_URL", "REDIS_URL", "TOKEN_ENCRYPTION_KEY", "SMTP_URL"}
    assert given("scheduler") == {"DATABASE_URL", "REDIS_URL"}
    assert given("migrate") == {"DATABASE_URL"}
    assert not given("wb-sandbox")


def test_wb_is_the_real_one_unless_the_dev_profile_brings_the_sandbox(compose):
    services = compose["services"]

    # The sandbox (whose /__sandbox/log lists the tokens it was sent) starts only with --profile dev
    assert services["wb-sandbox"]["profiles"] == ["dev"]
    for name in GATEHOUSE:
        assert "profiles" not in services[name], name
        # Unset or empty: gatehouse.settings' real WB hosts
        assert services[name]["environment"]["WB_API_BASE_URL"] == "${WB_API_BASE_URL:-}", name


def test_the_api_serves_metrics_on_its_unpublished_metrics_port(compose):
    api = compose["services"]["api"]
    published = [int(p.rsplit(":", 1)[1]) for p in api["ports"]]

    assert int(api["environment"]["METRICS_PORT"]) not in published
