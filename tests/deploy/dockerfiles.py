"""Read the Dockerfiles: their instructions, and the `uv sync` that installs each image."""

from __future__ import annotations

import re
import shlex

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
