"""What a migration run writes where, decided before anything is read or written.

Every path a run writes (an output file, the report, the dead letters, a backup) is compared with
every input and with every other output, by inode where the file exists and by resolved path where
it does not: a run that would write over one of its own inputs, or write two outputs to one file,
is refused as a whole, and nothing is touched. Once, ``--dead-letter`` naming the input left it at
0 bytes, even under ``--dry-run``.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from kvlog.errors import KvlogError
from kvlog.io.inputs import STDIN, InputError


class PlanError(KvlogError):
    """The options or paths of a run conflict; nothing was read or written."""


@dataclass(frozen=True)
class Destination:
    """Where one input's output goes: ``stdout``, a ``file`` (atomic), the input itself, or nowhere."""

    kind: str  # "stdout" | "file" | "in_place" | "discard"
    path: Path | None = None
    backup_suffix: str | None = None


@dataclass(frozen=True)
class Task:
    """One input and where its output goes."""

    name: str
    destination: Destination


@dataclass(frozen=True)
class Request:
    """The paths a migration run was asked to read and write."""

    inputs: list[str]
    output: str | None = None
    in_place: bool = False
    backup_suffix: str = ".orig"
    dry_run: bool = False
    report: str | None = None
    dead_letter: str | None = None


def plan(request: Request) -> list[Task]:
    """One task per input, or PlanError when the request conflicts with itself."""
    names, output = request.inputs, request.output
    if request.in_place:
        if output is not None:
            raise PlanError("--in-place and -o exclude each other")
        if STDIN in names:
            raise PlanError("--in-place cannot replace standard input")
        if not request.backup_suffix or "/" in request.backup_suffix:
            raise PlanError("--in-place keeps a backup beside each file: --backup-suffix must be a non-empty name part")
    tasks = _tasks(request)
    written: list[tuple[str, str]] = []
    if not request.dry_run:
        written += [("-o", str(t.destination.path)) for t in tasks if t.destination.kind == "file"]
        if request.output is not None and any(t.destination.path != Path(request.output) for t in tasks):
            written.append(("-o", request.output))  # the directory the outputs go into
        written += [(f"the backup of {t.name}", t.name + request.backup_suffix) for t in tasks if request.in_place]
    for option, path in (("--report", request.report), ("--dead-letter", request.dead_letter)):
        if path is not None:
            written.append((option, path))
    _refuse_conflicts([n for n in names if n != STDIN], written)
    return tasks


def _tasks(request: Request) -> list[Task]:
    names, output = request.inputs, request.output
    if not names:
        return []
    if request.dry_run:
        return [Task(name, Destination("discard")) for name in names]
    if request.in_place:
        return [Task(name, Destination("in_place", backup_suffix=request.backup_suffix)) for name in names]
    if output is None or output == STDIN:
        return [Task(name, Destination("stdout")) for name in names]
    destination = Path(output)
    if len(names) > 1 or destination.is_dir() or output.endswith(("/", os.sep)):
        paths = [destination / Path(name).name for name in names]
        if len(set(paths)) != len(paths):
            raise PlanError(f"-o {output}: two inputs have the same file name")
    else:
        paths = [destination]
    return [Task(name, Destination("file", path)) for name, path in zip(names, paths, strict=True)]


def _refuse_conflicts(inputs: list[str], written: list[tuple[str, str]]) -> None:
    """No written path is an input, and no two written paths are one file."""
    read = {_identity(name): name for name in inputs}
    seen: dict[object, tuple[str, str]] = {}
    for option, path in written:
        if option in ("--report", "--dead-letter") and Path(path).is_dir():
            raise PlanError(f"{option} {path} is a directory; name a file")
        key = _identity(path)
        if key in read:
            hint = ": use --in-place to replace it" if option == "-o" else ""
            raise PlanError(f"{option} {path} is the input {read[key]}; it would be overwritten{hint}")
        if key in seen:
            other_option, other = seen[key]
            raise PlanError(f"{option} {path} and {other_option} {other} are the same file")
        seen[key] = (option, path)


def _identity(path: str) -> object:
    """The inode of an existing file, else the path with every link resolved."""
    try:
        status = Path(path).stat()
    except OSError:
        return os.path.realpath(path)
    return (status.st_dev, status.st_ino)


def allowed_unparsed(patterns: tuple[str, ...], files: tuple[str, ...]) -> tuple[str, ...]:
    """The --allow-unparsed patterns, each checked to compile; a bad one is named with its file and line."""
    found = [(f"--allow-unparsed {pattern!r}", pattern) for pattern in patterns]
    for name in files:
        try:
            text = Path(name).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(f"{name}: cannot read the patterns: {getattr(exc, 'strerror', None) or exc}") from None
        for number, line in enumerate(text.splitlines(), 1):
            if line.strip() and not line.lstrip().startswith("#"):
                found.append((f"{name}:{number}", line))
    for where, pattern in found:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise PlanError(f"{where}: not a regular expression: {exc}") from None
    return tuple(pattern for _, pattern in found)
