"""The shell sessions of the README and docs/, as the doc tests run them.

A session is a fenced block whose language is ``sh``. Its commands run in one
bash per page (a page's sessions share variables, as a reader's terminal
would), with ``set -eo pipefail``: a failing command fails the page, so a
session shows an expected failure as ``cmd || echo "exit $?"``.

Expected output follows the command it belongs to, one ``# -> `` line per
line of output (stdout and stderr together, blank lines ignored). ``…``
stands for any text within a line; a line that is only ``# -> …`` stands for
any number of lines. Output no expectation claims is not checked, but the
output before an expectation must match it whole: everything printed since
the previous expectation.

A block that cannot run on a test machine says why on its fence:
``sh no-run: <reason>`` (a container engine, a cluster). Nothing else is
exempt. docs/development/tests.md says this for the reader.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

FENCE = re.compile(r"^```(\S*)(.*)$")
EXPECT = "# -> "
WILDCARD = "…"


@dataclass
class Expectation:
    line: int  # 1-based line in the page of the first `# ->`
    lines: list[str]


@dataclass
class Session:
    page: Path
    line: int  # 1-based line of the opening fence
    language: str
    info: str  # the rest of the fence line
    commands: list[tuple[int, str]] = field(default_factory=list)  # (page line, text)
    expectations: list[Expectation] = field(default_factory=list)

    @property
    def runs(self) -> bool:
        return self.language == "sh" and not self.info.strip().startswith("no-run")

    @property
    def skip_reason(self) -> str | None:
        info = self.info.strip()
        return info.removeprefix("no-run").lstrip(": ") if info.startswith("no-run") else None


def sessions(page: Path) -> list[Session]:
    """Every fenced block of the page (all languages), with its commands and expectations."""
    found: list[Session] = []
    current: Session | None = None
    pending: Expectation | None = None
    for number, raw in enumerate(page.read_text().splitlines(), start=1):
        match = FENCE.match(raw)
        if current is None:
            if match:
                current = Session(page, number, match.group(1), match.group(2))
            continue
        if raw.startswith("```"):
            if raw.strip() != "```":  # a closing fence has no info string: this opens a block inside a block
                raise ValueError(f"{page}:{number}: a fence opens inside the block of line {current.line}")
            found.append(current)
            current, pending = None, None
            continue
        if raw.startswith(EXPECT) or raw == EXPECT.rstrip():
            text = raw[len(EXPECT) :] if raw.startswith(EXPECT) else ""
            if pending is None:
                pending = Expectation(number, [])
                current.expectations.append(pending)
                current.commands.append((number, f"__expect {len(current.expectations) - 1}"))
            pending.lines.append(text.rstrip())
            continue
        pending = None
        current.commands.append((number, raw))
    if current is not None:
        raise ValueError(f"{page}:{current.line}: the block never closes")
    return found


def script(page_sessions: list[Session], marker: str) -> tuple[str, dict[int, int]]:
    """One bash script of the page's runnable sessions, and its line → page line map.

    Each expectation becomes a printed marker, so the output splits into the
    chunks the expectations claim.
    """
    lines = ["set -eo pipefail", f"trap 'echo \"{marker}FAILED $LINENO\"' ERR"]
    where: dict[int, int] = {}
    index = 0
    for session in page_sessions:
        if not session.runs:
            continue
        for page_line, text in session.commands:
            if text.startswith("__expect "):
                text = f"printf '\\n{marker}EXPECT {index}\\n'"
                index += 1
            lines.append(text)
            where[len(lines)] = page_line
    lines.append(f"printf '\\n{marker}DONE\\n'")
    return "\n".join(lines) + "\n", where


def chunks(output: str, marker: str) -> tuple[list[list[str]], bool, int | None]:
    """The output between markers (blank lines dropped); whether it ran to the end; the failed line."""
    parts: list[list[str]] = [[]]
    done, failed = False, None
    for raw in output.splitlines():
        if raw.startswith(marker):
            word, _, rest = raw[len(marker) :].partition(" ")
            if word == "EXPECT":
                parts.append([])
            elif word == "DONE":
                done = True
            elif word == "FAILED":
                failed = int(rest)
            continue
        if raw.strip():
            parts[-1].append(raw.rstrip())
    return parts, done, failed


def matches(expected: list[str], output: list[str]) -> bool:
    """Whether the output lines are what the expectation shows (`…` any text, a `…` line any lines)."""
    parts = []
    for line in expected:
        if line == WILDCARD:
            parts.append(r"(?:[^\n]*\n)*")
        elif line.strip():
            parts.append(r"[^\n]*".join(map(re.escape, line.split(WILDCARD))) + r"\n")
    return re.fullmatch("".join(parts), "".join(f"{line}\n" for line in output)) is not None
