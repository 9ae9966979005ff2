"""Build gatehouse-api and gatehouse-worker from the real Dockerfiles on a machine with no image registry.

`make images`: installs podman and mmdebstrap if missing (apt-get, as root), builds stand-in base
images locally, tags them with the names the Dockerfiles' FROM lines use, builds both images with
`podman build --isolation chroot` (no cgroups needed) and prints their sizes.

The stand-ins (real builds keep the official images, nothing here changes the Dockerfiles):
- python:3.11-slim-trixie: Debian bookworm (the newest suite with Python 3.11) from mmdebstrap,
  with /usr/local/bin/python3.11 (where the official image has it) linking to Debian's
  /usr/bin/python3.11. The host's CA bundle is copied in and SSL_CERT_FILE set, so uv inside the
  build trusts the same TLS roots as this machine (an intercepting egress proxy, here).
- ghcr.io/astral-sh/uv:<version>: /uv and /uvx taken from the `uv` wheel of that version (PyPI).

Everything lives under var/images (gitignored): the base tarballs, podman's storage, the build
cache mounts (TMPDIR) and the build logs.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
VAR = REPO / "var" / "images"
IMAGES = {"gatehouse-api": "services/api/Dockerfile", "gatehouse-worker": "services/worker/Dockerfile"}
# Debian suite for the stand-in Python base: bookworm ships python3.11 (trixie has 3.13 only).
SUITE = "bookworm"
HOST_CA = Path("/etc/ssl/certs/ca-certificates.crt")


def log(message: str) -> None:
    print(f"images: {message}", flush=True)


def run(*command: str, check: bool = True, **kwargs) -> subprocess.CompletedProcess:
    log("$ " + " ".join(command))
    return subprocess.run(command, check=check, **kwargs)


def podman(*args: str, **kwargs) -> subprocess.CompletedProcess:
    # Storage and run state under var/images; TMPDIR is where buildah keeps RUN --mount=type=cache.
    env = {**os.environ, "TMPDIR": str(VAR / "tmp")}
    return run(
        "podman", "--root", str(VAR / "storage"), "--runroot", str(VAR / "run"), *args, env=env, **kwargs
    )


def ensure_tools() -> None:
    missing = [tool for tool in ("podman", "mmdebstrap") if shutil.which(tool) is None]
    if not missing:
        return
    if os.geteuid() != 0:
        sys.exit(f"images: {', '.join(missing)} missing and not root: apt-get install -y podman mmdebstrap")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    run("apt-get", "update", "-q", env=env)
    run("apt-get", "install", "-y", "-q", "podman", "mmdebstrap", env=env)


def from_images() -> set[str]:
    """Every FROM image of both Dockerfiles (not the stage names)."""
    found = set()
    for dockerfile in IMAGES.values():
        for line in (REPO / dockerfile).read_text().splitlines():
            match = re.match(r"\s*FROM\s+(?:--\S+\s+)?(\S+)", line, re.IGNORECASE)
            if match:
                found.add(match.group(1))
    stages = {
        m.group(1)
        for dockerfile in IMAGES.values()
        for m in re.finditer(r"^\s*FROM\s+\S+\s+AS\s+(\S+)", (REPO / dockerfile).read_text(), re.I | re.M)
    }
    return found - stages


def qualified(image: str) -> str:
    """The fully qualified name podman resolves a short name to (docker.io/library/… for Docker Hub)."""
    first = image.split("/", 1)[0]
    if "/" in image and ("." in first or ":" in first or first == "localhost"):
        return image
    return f"docker.io/{image}" if "/" in image else f"docker.io/library/{image}"


def have_image(name: str) -> bool:
    return podman("image", "exists", name, check=False).returncode == 0


def python_base(image: str) -> None:
    version = re.match(r"python:(\d+\.\d+)", image.split("/")[-1])
    if version is None:
        sys.exit(f"images: no stand-in recipe for base image {image}")
    python = f"python{version.group(1)}"
    tarball = VAR / f"base-{python}-{SUITE}.tar"
    if not tarball.exists():
        hooks = [
            'mkdir -p "$1/usr/local/bin"',
            *(
                f'ln -sf /usr/bin/{python} "$1/usr/local/bin/{name}"'
                for name in (python, "python3", "python")
            ),
        ]
        if HOST_CA.exists():
            hooks.append(f'cp {HOST_CA} "$1{HOST_CA}"')
        partial = tarball.with_suffix(".partial.tar")
        run(
            "mmdebstrap",
            "--variant=apt",
            f"--include={python},passwd,ca-certificates",
            *(f"--customize-hook={hook}" for hook in hooks),
            SUITE,
            str(partial),
        )
        partial.rename(tarball)
    changes = [
        "ENV PATH=/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin",
        "ENV LANG=C.UTF-8",
        f"ENV SSL_CERT_FILE={HOST_CA}",
        'CMD ["python3"]',
    ]
    podman("import", *(f"--change={change}" for change in changes), str(tarball), qualified(image))


def uv_base(image: str) -> None:
    version = image.rsplit(":", 1)[1]
    wheels = VAR / "wheels"
    wheel = next(wheels.glob(f"uv-{version}-*manylinux*x86_64*.whl"), None) if wheels.exists() else None
    if wheel is None:
        pip = shutil.which("pip3") or shutil.which("pip")
        command = [pip] if pip else ["uvx", "pip"]
        run(*command, "download", "--no-deps", "--only-binary=:all:", "-d", str(wheels), f"uv=={version}")
        wheel = next(wheels.glob(f"uv-{version}-*.whl"))
    root = VAR / f"uv-{version}"
    root.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel) as archive:
        for name in archive.namelist():
            if ".data/scripts/" in name:
                target = root / name.rsplit("/", 1)[1]
                target.write_bytes(archive.read(name))
                target.chmod(0o755)
    tarball = VAR / f"uv-{version}.tar"
    run("tar", "-C", str(root), "-cf", str(tarball), "uv", "uvx")
    podman("import", str(tarball), qualified(image))


def stand_in_bases() -> None:
    for image in sorted(from_images()):
        if have_image(qualified(image)):
            log(f"stand-in {qualified(image)} already built")
        elif image.startswith("ghcr.io/astral-sh/uv:"):
            uv_base(image)
        else:
            python_base(image)


def build() -> None:
    revision = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, check=False
    ).stdout.strip()
    for name, dockerfile in IMAGES.items():
        podman(
            "build",
            "--isolation=chroot",
            "--pull=never",
            # Docker's image format: OCI has no HEALTHCHECK (podman drops it with a warning).
            "--format=docker",
            "--layers",
            f"--build-arg=REVISION={revision or 'unknown'}",
            "-f",
            str(REPO / dockerfile),
            "-t",
            f"{name}:dev",
            str(REPO),
        )


def main() -> None:
    (VAR / "tmp").mkdir(parents=True, exist_ok=True)
    ensure_tools()
    stand_in_bases()
    build()
    listing = podman(
        "images", "--format", "{{.Repository}}:{{.Tag}} {{.Size}}", capture_output=True, text=True
    )
    for line in listing.stdout.splitlines():
        if any(line.startswith(f"localhost/{name}:dev ") for name in IMAGES):
            print(line, flush=True)


if __name__ == "__main__":
    main()
