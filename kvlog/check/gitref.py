"""Reading a catalog directory as it was at a git ref, without touching the working tree or the index."""

from __future__ import annotations

import subprocess
from pathlib import Path

from kvlog.errors import KvlogError


class GitError(KvlogError):
    """git is missing, the directory is not in a repository, or the ref names no commit."""


def _git(directory: Path, *args: str, stdin: bytes | None = None) -> bytes:
    try:
        done = subprocess.run(["git", *args], cwd=directory, input=stdin, capture_output=True, check=False)
    except FileNotFoundError:
        raise GitError("--against needs git, and git is not on PATH") from None
    if done.returncode != 0:
        detail = done.stderr.decode(errors="replace").strip().splitlines()
        raise GitError(f"{directory}: git {args[0]} failed: {detail[-1] if detail else done.returncode}")
    return done.stdout


def files_at_ref(directory: Path, ref: str) -> tuple[dict[str, bytes], str]:
    """Every file under ``directory`` at ``ref`` (paths relative to it), and its path from the repository root.

    A directory that did not exist at ``ref`` gives no files: everything in it is new.
    """
    directory = directory.resolve()
    prefix = _git(directory, "rev-parse", "--show-prefix").decode().strip()
    try:
        _git(directory, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}")
    except GitError:
        raise GitError(f"--against {ref}: not a commit in the repository holding {directory}") from None
    listing = _git(directory, "ls-tree", "-r", "-z", "--full-tree", ref, "--", prefix or ".")
    blobs: list[tuple[str, str]] = []
    for entry in filter(None, listing.split(b"\0")):
        meta, _, name = entry.decode().partition("\t")
        _mode, kind, sha = meta.split()
        if kind == "blob" and name.startswith(prefix):
            blobs.append((name[len(prefix) :], sha))
    if not blobs:
        return {}, prefix
    batch = _git(directory, "cat-file", "--batch", stdin="".join(f"{sha}\n" for _, sha in blobs).encode())
    files: dict[str, bytes] = {}
    offset = 0
    for name, _sha in blobs:
        header_end = batch.index(b"\n", offset)
        size = int(batch[offset:header_end].split()[2])
        files[name] = batch[header_end + 1 : header_end + 1 + size]
        offset = header_end + 1 + size + 1
    return files, prefix
