"""The pre-commit hooks of ``.pre-commit-hooks.yaml``, installed and run by the real pre-commit on a user's project."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from check_helpers import GIT_ENV, acme_project, commit_all, git, read_json, write_json
from release_helpers import PINNED_REV, tag_known

import kvlog

SOURCE = Path(kvlog.__file__).resolve().parents[1]
PRE_COMMIT = Path(sys.executable).with_name("pre-commit")

pytestmark = pytest.mark.slow


def pre_commit(
    project: Path, home: Path, ref: str | None = None, repo: Path = SOURCE
) -> subprocess.CompletedProcess[str]:
    """``pre-commit try-repo`` of kvlog's checkout: its working tree, or the commit ``ref`` names."""
    env = {**os.environ, **GIT_ENV, "PRE_COMMIT_HOME": str(home)}
    command = [
        str(PRE_COMMIT),
        "try-repo",
        str(repo),
        *(["--ref", ref] if ref else []),
        "--all-files",
        "--color",
        "never",
    ]
    return subprocess.run(command, cwd=project, env=env, capture_output=True, text=True, timeout=600, check=False)


def test_the_hooks_pass_a_clean_catalog_and_stop_broken_commits(tmp_path: Path) -> None:
    if not (SOURCE / ".pre-commit-hooks.yaml").is_file() or shutil.which("git") is None:
        pytest.skip("needs kvlog's source checkout (a git repository with .pre-commit-hooks.yaml)")
    assert PRE_COMMIT.is_file(), "pre-commit is part of the dev extra"
    project = acme_project(tmp_path / "acme")
    git(project, "init", "-q", "-b", "main")
    commit_all(project, "acme.alloc v1")
    home = tmp_path / "pre-commit-home"

    # docs/check.md's snippet as a user pins it: the hooks at the release it names. A checkout without
    # tags (CI's clone of one branch) stands in a clone whose HEAD carries the release's tag.
    assert PINNED_REV is not None
    release, repo = PINNED_REV.group(1), SOURCE
    if tag_known(release) is None:
        repo = tmp_path / "kvlog-release"
        subprocess.run(["git", "clone", "-q", str(SOURCE), str(repo)], check=True, env={**os.environ, **GIT_ENV})
        git(repo, "tag", release)
    clean = pre_commit(project, home, ref=release, repo=repo)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert "kvlog check (released versions)" in clean.stdout

    # A new enum value edited into the released v1: valid on its own, caught only against HEAD.
    v1 = project / "telemetry" / "schemas" / "acme.alloc" / "v1.json"
    schema = read_json(v1)
    schema["properties"]["pool_state"]["enum"].append("evicted")
    write_json(v1, schema)
    git(project, "add", "-A")
    edited = pre_commit(project, home)
    assert edited.returncode == 1
    assert (
        "telemetry/schemas/acme.alloc/v1.json:32: KV201 error: acme.alloc@1 was released at HEAD and must not change: "
        'field pool_state: enum: added "evicted"; add v2 (with a migration) instead'
    ) in edited.stdout
    assert edited.stdout.count("- hook id: kvlog-check-released") == 1
    assert "- hook id: kvlog-check\n" not in edited.stdout
