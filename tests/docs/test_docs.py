"""Every shell session of the README and docs/ runs against a real `make run` stack.

One stack for the module: `python dev/run.py` (what `make run` runs) on a
database and Redis database of its own, with free ports and scaled waits
(STACK_ENV; docs/development/tests.md lists them for the reader). Each page
runs in one bash in a directory whose `var` is the stack's and whose `.venv`
is the project's, so `cat var/admin-token` and `.venv/bin/…` work as written.
The ports the docs show (8000 the API, 8081 the WB sandbox, 1025 the mail
sink, 8090 a receiver of the reader's) are replaced by free ones.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from tests.conftest import _libpq, missing_tool, with_database
from tests.docs.sessions import WILDCARD, Session, chunks, matches, script, sessions
from tests.support.processes import REPO, free_port, wait_until

PAGES = sorted([REPO / "README.md", *(REPO / "docs").rglob("*.md")])
RUNNABLE = [page for page in PAGES if any(s.runs for s in sessions(page))]
DOC_PORTS = {"API": 8000, "SANDBOX": 8081, "MAIL": 1025, "RECEIVER": 8090, "SANDBOX2": 8082}
SHELL_WORDS = ("curl ", "make ", ".venv/", "export ", "uv ", "gatehouse-", "docker ", "kubectl ")
# The waits a reader would sit through, scaled (the settings exist for this; see the docs).
STACK_ENV = {
    "RETRY_DELAY_SCALE": "0.001",
    "WEBHOOK_RETRY_SCHEDULE_MS": "0,1000,2000",
    "BULK_BATCH_SIZE": "50",
    "CART_ABANDON_AFTER_MS": "3000",
}
PAGE_TIMEOUT_S = 240
MARKER = f"@@doc-{uuid.uuid4().hex[:8]}@@ "


def page_id(page: Path) -> str:
    return str(page.relative_to(REPO))


def test_every_block_is_a_session_the_runner_knows():
    """A shell session hides nowhere: it is an `sh` block that runs, or says on its fence why it cannot."""
    problems = []
    for page in PAGES:
        for block in sessions(page):
            where = f"{page_id(page)}:{block.line}"
            if block.language in ("bash", "shell", "console", "zsh", "shell-session"):
                problems.append(f"{where}: a shell session fenced as {block.language!r}; use sh")
            elif block.language == "sh":
                if block.skip_reason is not None and not block.skip_reason:
                    problems.append(f"{where}: no-run without a reason")
            elif any(text.lstrip().startswith(SHELL_WORDS) for _, text in block.commands):
                problems.append(
                    f"{where}: commands in a {block.language or 'plain'!r} block; fence them as sh"
                )
            if block.runs:
                for line, text in block.commands:
                    if WILDCARD in text or re.search(r"<[a-z][a-z ]+>", text):
                        problems.append(f"{page_id(page)}:{line}: a placeholder in a command: {text.strip()}")
    assert not problems, "\n".join(problems)


def test_no_run_blocks_name_files_that_exist():
    """What cannot run here (a container engine, a cluster) at least points at real files."""
    missing = []
    for page in PAGES:
        for block in sessions(page):
            if block.language != "sh" or block.runs:
                continue
            for line, text in block.commands:
                command = text.split(" #", 1)[0] if not text.lstrip().startswith("#") else ""
                for path in re.findall(r"(?:infra|services|dev)/[\w./-]+", command):
                    path = path.rstrip(".")
                    # A file the reader makes from its example (secrets.env from secrets.env.example) counts.
                    if not (REPO / path).exists() and not (REPO / f"{path}.example").exists():
                        missing.append(f"{page_id(page)}:{line}: {path}")
    assert not missing, "\n".join(missing)


@pytest.fixture(scope="module")
def stack(tmp_path_factory, pg_server: str, redis_url: str) -> Iterator[dict[str, int | Path]]:
    for tool in ("jq", "curl"):
        if shutil.which(tool) is None:
            missing_tool(f"no {tool}, which the docs' sessions use — apt-get install {tool}")
    root = tmp_path_factory.mktemp("docs")
    name = f"gatehouse_docs_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(_libpq(pg_server), autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    ports = {key: free_port() for key in DOC_PORTS}
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/tmp"),
        "DATABASE_URL": with_database(pg_server, name),
        "REDIS_URL": redis_url,
        "API_PORT": str(ports["API"]),
        "WB_SANDBOX_PORT": str(ports["SANDBOX"]),
        "MAIL_SINK_PORT": str(ports["MAIL"]),
        **STACK_ENV,
    }
    log = open(root / "make-run.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [sys.executable, "dev/run.py", "--var", str(root / "var")],
        cwd=REPO,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:

        def up() -> bool:
            assert proc.poll() is None, (root / "make-run.log").read_text()
            return "Gatehouse is up" in (root / "make-run.log").read_text()

        wait_until(up, timeout=90, interval=0.2, what="make run's banner")
        yield {"root": root, "var": root / "var", **ports}
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()
        print((root / "make-run.log").read_text()[-4000:])
        with psycopg.connect(_libpq(pg_server), autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def localise(text: str, stack: dict) -> str:
    for key, doc_port in DOC_PORTS.items():
        text = re.sub(rf"(?<![\d.]){doc_port}(?!\d)", str(stack[key]), text)
    return text


@pytest.mark.parametrize("page", RUNNABLE, ids=page_id)
def test_page_sessions(page: Path, stack: dict, tmp_path: Path):
    blocks: list[Session] = [s for s in sessions(page) if s.runs]
    text, where = script(blocks, MARKER)
    workdir = tmp_path / "reader"
    workdir.mkdir()
    (workdir / "var").symlink_to(stack["var"])
    (workdir / ".venv").symlink_to(Path(sys.executable).parents[1])
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "LANG": "C.UTF-8",
        "TERM": "dumb",
    }
    proc = subprocess.Popen(
        ["bash", "-c", localise(text, stack)],
        cwd=workdir,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        output, _ = proc.communicate(timeout=PAGE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
        pytest.fail(f"{page_id(page)}: still running after {PAGE_TIMEOUT_S}s:\n{output.decode()[-4000:]}")
    finally:
        # What a session left running (a receiver in the background) goes with the page.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    transcript = output.decode(errors="replace")
    parts, done, failed = chunks(transcript, MARKER)
    expectations = [e for block in blocks for e in block.expectations]
    wrong = [
        f"{page_id(page)}:{expectation.line}: expected\n  "
        + "\n  ".join(wanted)
        + "\ngot\n  "
        + "\n  ".join(got)
        for expectation, got in zip(expectations, parts, strict=False)
        if not matches(wanted := [localise(line, stack) for line in expectation.lines], got)
    ]
    assert not wrong, "\n".join(wrong)
    if failed is not None:
        pytest.fail(f"{page_id(page)}:{where.get(failed, '?')}: a command failed\n{transcript[-4000:]}")
    assert done, f"{page_id(page)}: the sessions stopped early\n{transcript[-4000:]}"
    assert len(parts) == len(expectations) + 1
