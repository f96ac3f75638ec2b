"""What a migration run writes where, decided before anything is read or written.

Every path a run writes (an output file, the report, the dead letters, a backup) is compared with
every input and with every other output, by inode where the file exists and by resolved path where
it does not: a run that would write over one of its own inputs, or write two outputs to one file,
is refused as a whole, and nothing is touched. Once, ``--dead-letter`` naming the input left it at
0 bytes, even under ``--dry-run``.

``kvlog.commands.migrate`` plans with this module. A refusal is a ``PlanError``, which names each
option by its keyword argument (``output``, ``in_place``): the CLI words it with its flags.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from kvlog.io.errors import InputError
from kvlog.io.expansion import Input, file_identity
from kvlog.io.inputs import STDIN
from kvlog.io.uris import is_uri
from kvlog.migration.errors import PlanError

#: where an output goes: a path, or a store object's URI
_Target = TypeVar("_Target", str, Path)


@dataclass(frozen=True)
class Destination:
    """Where one input's output goes: ``stdout``, a ``file`` (atomic), a ``store``'s object, the input, or nowhere."""

    kind: str  # "stdout" | "file" | "store" | "in_place" | "discard"
    path: Path | None = None
    backup_suffix: str | None = None
    #: ``store``: the object's URI (``s3://bucket/key``), written once complete (``kvlog.io.store``)
    uri: str | None = None


@dataclass(frozen=True)
class Task:
    """One input and where its output goes."""

    name: str
    destination: Destination


@dataclass(frozen=True)
class Request:
    """The paths a migration run was asked to read and write."""

    inputs: list[Input]
    output: str | None = None
    in_place: bool = False
    backup_suffix: str = ".orig"
    dry_run: bool = False
    report: str | None = None
    dead_letter: str | None = None


def plan(request: Request) -> list[Task]:
    """One task per input, or PlanError when the request conflicts with itself."""
    names, output = [one.name for one in request.inputs], request.output
    if request.in_place:
        if output is not None:
            raise PlanError("{in_place} and {output} exclude each other")
        if STDIN in names:
            raise PlanError("{in_place} cannot replace standard input")
        if stored := next((name for name in names if is_uri(name)), None):
            raise PlanError(
                "{in_place} cannot replace {name}: an object store has no atomic rename and no hard-link backup, "
                "so the original could be lost; write the migrated logs elsewhere with {output}",
                name=stored,
            )
        if not request.backup_suffix or "/" in request.backup_suffix:
            raise PlanError("{in_place} keeps a backup beside each file: {backup_suffix} must be a non-empty name part")
    tasks = _tasks(request)
    written: list[tuple[_Role, str]] = []
    if not request.dry_run:
        written += [(("output", None), str(t.destination.path)) for t in tasks if t.destination.kind == "file"]
        written += [(("output", None), str(t.destination.uri)) for t in tasks if t.destination.kind == "store"]
        if request.output is not None and any(
            t.destination.path != Path(request.output) and t.destination.uri != request.output for t in tasks
        ):
            written.append((("output", None), request.output))  # the directory the outputs go into
        written += [(("backup", t.name), t.name + request.backup_suffix) for t in tasks if request.in_place]
    for option, path in (("report", request.report), ("dead_letter", request.dead_letter)):
        if path is not None:
            written.append(((option, None), path))
    _refuse_conflicts([n for n in names if n != STDIN], written)
    return tasks


def _tasks(request: Request) -> list[Task]:
    inputs, output = request.inputs, request.output
    names = [one.name for one in inputs]
    if not names:
        return []
    if request.dry_run:
        return [Task(name, Destination("discard")) for name in names]
    if request.in_place:
        return [Task(name, Destination("in_place", backup_suffix=request.backup_suffix)) for name in names]
    if output is None or output == STDIN:
        return [Task(name, Destination("stdout")) for name in names]
    if is_uri(output):  # objects of a store: a bucket, a prefix ending in / (or several inputs) holds one per input
        many = len(names) > 1 or output.endswith("/") or "/" not in output.partition("://")[2]
        uris = _mirrored(output, inputs, lambda relative: f"{output.rstrip('/')}/{relative}") if many else [output]
        return [Task(name, Destination("store", uri=uri)) for name, uri in zip(names, uris, strict=True)]
    destination = Path(output)
    if len(names) > 1 or destination.is_dir() or output.endswith(("/", os.sep)):
        paths = _mirrored(output, inputs, lambda relative: destination / relative)
    else:
        paths = [destination]
    return [Task(name, Destination("file", path)) for name, path in zip(names, paths, strict=True)]


def _mirrored(output: str, inputs: list[Input], place: Callable[[str], _Target]) -> list[_Target]:
    """Each input's output below ``output``, at its path below the directory or pattern that found it.

    As ``cp -r`` and rsync do: ``fleet/`` with ``node1/server.log`` and ``node2/server.log`` writes both.
    Two inputs that would still write one output are refused, naming both.
    """
    targets: dict[_Target, str] = {}
    for one in inputs:
        target = place(one.relative)
        if target in targets:
            raise PlanError(
                "{output} {path}: {first} and {second} would both be written to {target}",
                path=output,
                first=targets[target],
                second=one.name,
                target=str(target),
            )
        targets[target] = one.name
    return list(targets)


#: what a written path is: ("output" | "report" | "dead_letter", None), or ("backup", the input it backs up)
_Role = tuple[str, str | None]


def _refuse_conflicts(inputs: list[str], written: list[tuple[_Role, str]]) -> None:
    """No written path is an input, and no two written paths are one file."""
    read = {file_identity(name): name for name in inputs}
    seen: dict[object, tuple[_Role, str]] = {}
    for role, path in written:
        label, values = _label(role, "of")
        if role[0] in ("report", "dead_letter") and Path(path).is_dir():
            raise PlanError(label + " {path} is a directory; name a file", path=path, **values)
        key = file_identity(path)
        if key in read:
            hint = ": use {in_place} to replace it" if role[0] == "output" else ""
            template = label + " {path} is the input {input}; it would be overwritten" + hint
            raise PlanError(template, path=path, input=read[key], **values)
        if key in seen:
            other_role, other = seen[key]
            other_label, other_values = _label(other_role, "other_of")
            template = label + " {path} and " + other_label + " {other} are the same file"
            raise PlanError(template, path=path, other=other, **values, **other_values)
        seen[key] = (role, path)


def _label(role: _Role, key: str) -> tuple[str, dict[str, object]]:
    """How a message names a written path: its option, or the input it is the backup of (a value ``key``)."""
    option, owner = role
    if option == "backup":
        return f"the backup of {{{key}}}", {key: owner}
    return f"{{{option}}}", {}


def allowed_unparsed(patterns: tuple[str, ...], files: tuple[str, ...]) -> tuple[str, ...]:
    """The ``allow_unparsed`` patterns and the files', each checked to compile; a bad one is named (file, line)."""
    found = [("{allow_unparsed} {given}", {"given": repr(pattern)}, pattern) for pattern in patterns]
    for name in files:
        try:
            text = Path(name).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(f"{name}: cannot read the patterns: {getattr(exc, 'strerror', None) or exc}") from None
        for number, line in enumerate(text.splitlines(), 1):
            if line.strip() and not line.lstrip().startswith("#"):
                found.append(("{where}", {"where": f"{name}:{number}"}, line))
    for where, values, pattern in found:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise PlanError(where + ": not a regular expression: {error}", error=exc, **values) from None
    return tuple(pattern for _, _, pattern in found)
