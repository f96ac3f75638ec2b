"""The release the docs name, and whether this checkout can tell it is a tag.

A tag is a fact about the published repository, not about a commit: CI's fresh clone of the
submitted branch carries no tags at all, while a developer's clone (where releases are tagged) does.
"""

from __future__ import annotations

import re
import subprocess

from docs_helpers import ROOT, page

SOURCE = ROOT

#: the release the pre-commit snippet of docs/check.md pins (``rev:``)
PINNED_REV = re.search(r"^\s+rev: (\S+)$", page("docs/check.md").read_text(), flags=re.MULTILINE)


def git_lines(*args: str) -> list[str]:
    done = subprocess.run(["git", "-C", str(SOURCE), *args], capture_output=True, text=True, check=False)
    return done.stdout.splitlines() if done.returncode == 0 else []


def tag_known(tag: str) -> bool | None:
    """Whether ``tag`` is a tag of this checkout; ``None`` when the checkout carries no tags to tell by."""
    if git_lines("rev-parse", "--verify", "--quiet", f"refs/tags/{tag}"):
        return True
    return False if git_lines("tag", "--list") else None
