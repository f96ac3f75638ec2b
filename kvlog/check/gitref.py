"""Reading a catalog directory as it was at a git ref, without touching the working tree or the index."""

from __future__ import annotations

import subprocess
from pathlib import Path

from kvlog.check.errors import GitError, GitNotFound, NotACommit
from kvlog.check.files import refuse_blob


def _git(directory: Path, *args: str, stdin: bytes | None = None) -> bytes:
    try:
        done = subprocess.run(["git", *args], cwd=directory, input=stdin, capture_output=True, check=False)
    except FileNotFoundError:
        raise GitNotFound("reading a catalog at a git ref needs git, and git is not on PATH") from None
    if done.returncode != 0:
        detail = done.stderr.decode(errors="replace").strip().splitlines()
        raise GitError(f"{directory}: git {args[0]} failed: {detail[-1] if detail else done.returncode}")
    return done.stdout


def files_at_ref(directory: Path, ref: str) -> tuple[dict[str, bytes], dict[str, str], str]:
    """Every file under ``directory`` at ``ref`` (paths relative to it), those not read with why, and the prefix.

    The prefix is ``directory``'s path from the repository root. A directory that did not exist at
    ``ref`` gives no files: everything in it is new. Links and oversized blobs are not read (a pull
    request may plant them); they are returned as refused, with the reason.
    """
    directory = directory.resolve()
    prefix = _git(directory, "rev-parse", "--show-prefix").decode().strip()
    commit = resolve_commit(directory, ref)
    listing = _git(directory, "ls-tree", "-r", "-z", "-l", "--full-tree", commit, "--", prefix or ".")
    blobs: list[tuple[str, str]] = []
    refused: dict[str, str] = {}
    for entry in filter(None, listing.split(b"\0")):
        meta, _, raw_name = entry.partition(b"\t")
        name = raw_name.decode(errors="surrogateescape")
        mode, kind, sha, blob_size = meta.decode().split()
        if kind != "blob" or not name.startswith(prefix):
            continue
        reason = refuse_blob(mode, int(blob_size))
        if reason is None:
            blobs.append((name[len(prefix) :], sha))
        else:
            refused[name[len(prefix) :]] = reason
    if not blobs:
        return {}, refused, prefix
    batch = _git(directory, "cat-file", "--batch", stdin="".join(f"{sha}\n" for _, sha in blobs).encode())
    files: dict[str, bytes] = {}
    offset = 0
    for name, _sha in blobs:
        header_end = batch.index(b"\n", offset)
        size = int(batch[offset:header_end].split()[2])
        files[name] = batch[header_end + 1 : header_end + 1 + size]
        offset = header_end + 1 + size + 1
    return files, refused, prefix


def resolve_commit(directory: Path, ref: str) -> str:
    """The object id of the commit ``ref`` names: the only form of it given to git afterwards.

    A ref is user input and may look like an option (a branch named ``-r`` or ``--format=x``);
    ``--end-of-options`` keeps ``rev-parse`` from reading it as one, and every later git command
    gets the 40-hex id instead, which no git command mistakes for an option.
    """
    try:
        out = _git(directory, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}")
    except GitNotFound:
        raise
    except GitError:
        raise NotACommit(ref, directory) from None
    return out.decode().strip()
