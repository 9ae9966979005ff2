"""Build our images from the real Dockerfiles on a machine with no image registry, and run them.

`python dev/images.py` (the first half of `make images`): installs podman and mmdebstrap if
missing (apt-get, as root), builds stand-in base images locally, tags them with the names the
Dockerfiles' FROM lines use, builds gatehouse-api, gatehouse-worker and the development-only
gatehouse-wb-sandbox with `podman build --isolation chroot` (no cgroups needed) and prints their
sizes. The second half, tests/deploy/test_images.py, runs them with `Image.command` below.

The Dockerfiles name their bases by digest (ARG PYTHON_IMAGE, UV_IMAGE), which no image made here
can have: the build overrides those arguments with the tags alone, which name the stand-ins.
The stand-ins (real builds keep the official images, nothing here changes the Dockerfiles):
- python:3.11-slim-trixie: Debian bookworm (the newest suite with Python 3.11) from mmdebstrap,
  with /usr/local/bin/python3.11 (where the official image has it) linking to Debian's
  /usr/bin/python3.11. The host's CA bundle is copied in and /etc/uv/uv.toml turns on uv's
  system-certs, so uv inside the build trusts the same TLS roots as this machine (an intercepting
  egress proxy, here) without an ENV that would end up in our images.
- ghcr.io/astral-sh/uv:<version>: /uv and /uvx taken from the `uv` wheel of that version (PyPI).

Running an image needs no container engine (`podman run` does not work in these VMs: crun
refuses its rlimits and the hybrid cgroups): its filesystem is exported once per image id, then
each command runs in a private mount namespace (`unshare --mount`) where that tree is bind-mounted
read-only with a tmpfs /tmp, /proc and the host's /dev, and `chroot --userspec` starts it as the
image's USER in its WORKDIR with exactly its ENV plus what the caller adds. The network is the
host's, so 127.0.0.1 reaches this machine's PostgreSQL and Redis.

Everything lives under var/images (gitignored): the base tarballs, podman's storage, the build
cache mounts (TMPDIR) and the exported filesystems.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
VAR = REPO / "var" / "images"
IMAGES = {
    "gatehouse-api": "services/api/Dockerfile",
    "gatehouse-worker": "services/worker/Dockerfile",
    "gatehouse-wb-sandbox": "dev/wb_sandbox/Dockerfile",  # development only (compose, the dev overlay)
}
TAG = "dev"
# Debian suite for the stand-in Python base: bookworm ships python3.11 (trixie has 3.13 only).
SUITE = "bookworm"
HOST_CA = Path("/etc/ssl/certs/ca-certificates.crt")
# Bump when a stand-in recipe below changes: bases with another recipe label are made again.
RECIPE = "2"
RECIPE_LABEL = "dev.gatehouse.stand-in-recipe"


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


TOOLS = ("podman", "mmdebstrap", "unshare", "chroot")


def missing_tools() -> list[str]:
    return [tool for tool in TOOLS if shutil.which(tool) is None]


def ensure_tools() -> None:
    missing = missing_tools()
    if not missing:
        return
    if os.geteuid() != 0:
        sys.exit(f"images: {', '.join(missing)} missing and not root: apt-get install -y podman mmdebstrap")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    run("apt-get", "update", "-q", env=env)
    run("apt-get", "install", "-y", "-q", "podman", "mmdebstrap", env=env)


def base_images() -> dict[str, str]:
    """The Dockerfiles' base images: each global ``ARG …_IMAGE`` and its pinned reference (tag@digest)."""
    found: dict[str, str] = {}
    for dockerfile in IMAGES.values():
        text = (REPO / dockerfile).read_text()
        for name, reference in re.findall(r"^ARG\s+(\w+_IMAGE)=(\S+)", text, re.MULTILINE):
            if found.setdefault(name, reference) != reference:
                sys.exit(f"images: {dockerfile} pins {name}={reference}, another Dockerfile {found[name]}")
    return found


def stand_in(reference: str) -> str:
    """The stand-in's name for a pinned base: its tag alone (an image made here cannot have the registry's digest)."""
    return reference.split("@", 1)[0]


def qualified(image: str) -> str:
    """The fully qualified name podman resolves a short name to (docker.io/library/… for Docker Hub)."""
    first = image.split("/", 1)[0]
    if "/" in image and ("." in first or ":" in first or first == "localhost"):
        return image
    return f"docker.io/{image}" if "/" in image else f"docker.io/library/{image}"


def current_stand_in(name: str) -> bool:
    label = podman(
        "image", "inspect", "--format", f'{{{{index .Labels "{RECIPE_LABEL}"}}}}', name,
        check=False, capture_output=True, text=True,
    )  # fmt: skip
    return label.returncode == 0 and label.stdout.strip() == RECIPE


def python_base(image: str) -> None:
    version = re.match(r"python:(\d+\.\d+)", image.split("/")[-1])
    if version is None:
        sys.exit(f"images: no stand-in recipe for base image {image}")
    python = f"python{version.group(1)}"
    tarball = VAR / f"base-{python}-{SUITE}-r{RECIPE}.tar"
    if not tarball.exists():
        hooks = [
            'mkdir -p "$1/usr/local/bin"',
            *(
                f'ln -sf /usr/bin/{python} "$1/usr/local/bin/{name}"'
                for name in (python, "python3", "python")
            ),
        ]
        if HOST_CA.exists():
            hooks += [
                f'cp {HOST_CA} "$1{HOST_CA}"',
                'mkdir -p "$1/etc/uv"',
                'echo "system-certs = true" > "$1/etc/uv/uv.toml"',
            ]
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
        'CMD ["python3"]',
        f"LABEL {RECIPE_LABEL}={RECIPE}",
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
    podman("import", f"--change=LABEL {RECIPE_LABEL}={RECIPE}", str(tarball), qualified(image))


def stand_in_bases() -> None:
    for image in sorted({stand_in(reference) for reference in base_images().values()}):
        if current_stand_in(qualified(image)):
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
            # FROM the stand-ins: the pinned references' tags, without their digests
            *(f"--build-arg={name}={stand_in(reference)}" for name, reference in base_images().items()),
            "-f",
            str(REPO / dockerfile),
            "-t",
            f"{name}:{TAG}",
            str(REPO),
        )


@dataclass(frozen=True)
class Image:
    """A built image as `podman image inspect` describes it, and a way to run its commands."""

    name: str
    id: str
    size: int
    env: list[str]
    user: str
    workdir: str
    cmd: list[str]
    healthcheck: list[str]

    @classmethod
    def inspect(cls, name: str) -> Image:
        out = podman("image", "inspect", f"{name}:{TAG}", capture_output=True, text=True).stdout
        image = json.loads(out)[0]
        config = image["Config"]
        return cls(
            name=name,
            id=image["Id"],
            size=image["Size"],
            env=config.get("Env") or [],
            user=config.get("User") or "0:0",
            workdir=config.get("WorkingDir") or "/",
            cmd=(config.get("Entrypoint") or []) + (config.get("Cmd") or []),
            healthcheck=(image.get("Healthcheck") or {}).get("Test") or [],  # Docker format only
        )

    def rootfs(self) -> Path:
        """The image's filesystem, exported once per image id (a rebuild exports again)."""
        root = VAR / "rootfs" / self.id[:16]
        if not root.exists():
            partial = root.with_name(root.name + ".partial")
            shutil.rmtree(partial, ignore_errors=True)
            partial.mkdir(parents=True)
            container = f"export-{self.id[:16]}"
            podman("rm", "--force", "--ignore", container, capture_output=True)
            podman("create", "--name", container, f"{self.name}:{TAG}", capture_output=True)
            try:
                tar = VAR / f"{container}.tar"
                podman("export", "--output", str(tar), container)
                run("tar", "-C", str(partial), "--numeric-owner", "-xpf", str(tar))
                tar.unlink()
            finally:
                podman("rm", "--force", container, capture_output=True)
            partial.rename(root)
        return root

    def command(self, argv: list[str] | None = None, env: dict[str, str] | None = None) -> list[str]:
        """argv that runs ``argv`` (default: the image's CMD) as the image would, on a read-only root.

        The chain execs all the way down (unshare → sh → chroot → env → the command), so the
        command keeps the pid the caller started: signals reach it as they would PID 1 in a pod.
        """
        root = self.rootfs()
        variables = [*self.env, *(f"{k}={v}" for k, v in (env or {}).items())]
        script = (
            "set -e; root=$1 user=$2 workdir=$3; shift 3; "
            'mount --bind "$root" "$root"; mount -o remount,bind,ro "$root"; '
            'mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs "$root/tmp"; '
            'mount -t proc -o nosuid,nodev,noexec proc "$root/proc"; '
            'mount --rbind /dev "$root/dev"; '
            'exec chroot --userspec="$user" "$root" /usr/bin/env -i -C "$workdir" "$@"'
        )
        return [
            "unshare", "--mount", "--propagation", "private", "/bin/sh", "-c", script, "sh",
            str(root), self.user, self.workdir, *variables, *(self.cmd if argv is None else argv),
        ]  # fmt: skip


def prepare() -> dict[str, Image]:
    """Tools, stand-in bases and a build of every image (cached layers make a repeat quick)."""
    (VAR / "tmp").mkdir(parents=True, exist_ok=True)
    ensure_tools()
    stand_in_bases()
    build()
    podman("image", "prune", "--force", capture_output=True)  # the previous builds' layers
    images = built()
    for image in images.values():
        image.rootfs()  # exported now, with the build, not when a test first runs the image
    return images


def built() -> dict[str, Image]:
    """The images as last built; exported filesystems of older builds are removed."""
    images = {name: Image.inspect(name) for name in IMAGES}
    current = {image.id[:16] for image in images.values()}
    for old in (VAR / "rootfs").glob("*") if (VAR / "rootfs").exists() else ():
        if old.name not in current:
            shutil.rmtree(old, ignore_errors=True)
    return images


def main() -> None:
    for image in prepare().values():
        print(f"{image.name}:{TAG} {image.size / 1e6:.0f} MB", flush=True)


if __name__ == "__main__":
    main()
