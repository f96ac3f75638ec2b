"""The documentation a user reads, README.md and the pages of ``docs/``, as the tests take it apart.

The README is the first page; the reference lives in ``docs/*.md``. A fact the tests hold the docs to
is found on the page that states it, so moving a fact to another page moves its test with it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
#: every page a user reads, README first
PAGES = [README, *sorted(DOCS.glob("*.md"))]

_FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", flags=re.DOTALL | re.MULTILINE)


def page(name: str) -> Path:
    """A page by its path below the repository root (``README.md``, ``docs/migrate.md``)."""
    path = ROOT / name
    assert path.is_file(), f"{name} is not a page of the docs"
    return path


def name_of(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def blocks(path: Path, language: str) -> list[str]:
    """The fenced code blocks of ``path`` in ``language`` (``python``, ``console``), in page order."""
    return [body for lang, body in _FENCE.findall(path.read_text()) if lang == language]


def prose(path: Path) -> str:
    """The page without its fenced code blocks and inline code, where a ``[x](y)`` is a link."""
    return re.sub(r"`[^`\n]*`", "", _FENCE.sub("", path.read_text()))


def section(path: Path, heading: str) -> str:
    """The text under ``heading`` (without its ``#``s) up to the next heading of its level or above."""
    text = path.read_text()
    found = re.search(rf"^(#+) {re.escape(heading)}\n", text, flags=re.MULTILINE)
    assert found is not None, f"{name_of(path)} has no heading {heading!r}"
    rest = text[found.end() :]
    end = re.search(rf"^#{{1,{len(found.group(1))}}} ", _FENCE.sub(lambda m: " " * len(m.group(0)), rest), re.M)
    return rest[: end.start()] if end else rest


def console_session(block: str) -> list[tuple[str, list[str]]]:
    """A ``console`` block as (command, the lines it prints); a ``<<'EOF'`` here-document stays with its command."""
    commands: list[tuple[str, list[str]]] = []
    lines = iter(block.splitlines())
    for line in lines:
        if line.startswith("$ "):
            command = line[2:]
            if "<<'EOF'" in command:
                command += "\n" + "\n".join(iter(lines.__next__, "EOF")) + "\nEOF"
            commands.append((command, []))
        else:
            commands[-1][1].append(line)
    return commands


def run_console(command: str, cwd: Path) -> list[str]:
    """What ``command`` prints, standard output and error together, as a user's bash runs it with this kvlog."""
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    done = subprocess.run(
        ["bash", "-c", "exec 2>&1\n" + command],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "PATH": path},
    )
    return done.stdout.splitlines()


def anchors(path: Path) -> set[str]:
    """The anchors GitHub gives the headings of ``path``: lower case, punctuation dropped, spaces as ``-``."""
    seen: dict[str, int] = {}
    for heading in re.findall(r"^#+ (.+)$", _FENCE.sub("", path.read_text()), flags=re.MULTILINE):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        if count:
            seen[f"{slug}-{count}"] = 1
    return set(seen)
