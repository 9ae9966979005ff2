"""Read the Dockerfiles: their instructions, what they copy, and the `uv sync` that installs each image."""

from __future__ import annotations

import re
import shlex
import tomllib

from tests.support.processes import REPO

# Dockerfile: (its package, its code, the other service's code that must stay out)
IMAGES = {
    "services/api/Dockerfile": (
        "gatehouse-api",
        "services/api/gatehouse_api",
        "services/worker/gatehouse_worker",
    ),
    "services/worker/Dockerfile": (
        "gatehouse-worker",
        "services/worker/gatehouse_worker",
        "services/api/gatehouse_api",
    ),
}
# The development-only WB sandbox image (compose, the dev overlay); neither image above contains it.
SANDBOX_DOCKERFILE = "dev/wb_sandbox/Dockerfile"
SANDBOX_PACKAGE = "gatehouse-wb-sandbox"
SANDBOX_CODE = "dev/wb_sandbox/gatehouse_wb_sandbox"
DOCKERFILES = (*IMAGES, SANDBOX_DOCKERFILE)


def instructions(dockerfile: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    text = (REPO / dockerfile).read_text()
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    joined = re.sub(r"\\\n", " ", "\n".join(lines))
    return [
        (parts[0].upper(), parts[1] if len(parts) > 1 else "")
        for parts in (line.strip().split(None, 1) for line in joined.splitlines())
        if parts
    ]


def base_images(dockerfile: str) -> list[str]:
    """The image of each FROM that is not an earlier stage, its global ARGs (``${NAME}``) resolved."""
    steps = instructions(dockerfile)
    first = next(i for i, (op, _) in enumerate(steps) if op == "FROM")
    defaults = dict(args.split("=", 1) for op, args in steps[:first] if op == "ARG" and "=" in args)
    stages: set[str] = set()
    images = []
    for op, args in steps:
        if op == "FROM":
            words = [w for w in args.split() if not w.startswith("--")]
            image = re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: defaults[m[1] or m[2]], words[0])
            if image not in stages and image not in images:
                images.append(image)
            if len(words) == 3 and words[1].upper() == "AS":
                stages.add(words[2])
    return images


def final_stage(dockerfile: str) -> list[tuple[str, str]]:
    steps = instructions(dockerfile)
    start = max(i for i, (op, _) in enumerate(steps) if op == "FROM")
    return steps[start:]


def uv_syncs(dockerfile: str) -> list[list[str]]:
    """Each `uv sync …` command of the Dockerfile's RUN instructions, from `uv` on."""
    commands = [
        shlex.split(args) for op, args in instructions(dockerfile) if op == "RUN" and "uv sync" in args
    ]
    return [command[command.index("uv") :] for command in commands]


def image_install(dockerfile: str) -> list[str]:
    """The `uv sync` that installs the image's packages (its last one)."""
    return uv_syncs(dockerfile)[-1]


def copied_sources(dockerfile: str) -> list[str]:
    """What the Dockerfile COPYs from the build context (not from another stage)."""
    return [
        src
        for op, args in instructions(dockerfile)
        if op == "COPY" and "--from" not in args
        for src in args.split()[:-1]
    ]


def bind_mounts(dockerfile: str) -> list[str]:
    """The build-context sources of the RUN instructions' bind mounts."""
    return re.findall(
        r"--mount=type=bind,source=([^,\s]+)",
        " ".join(a for op, a in instructions(dockerfile) if op == "RUN"),
    )


def workspace_members() -> list[str]:
    """The uv workspace's members (directories), as the root pyproject.toml lists them."""
    return tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["uv"]["workspace"]["members"]
