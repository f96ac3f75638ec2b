"""A catalog as a set of files, read from a directory or a git ref, with every unreadable file reported.

``Catalog.load`` stops at the first broken file, which is right for a program that emits events;
a checker must instead report every broken file in one run and carry on with the readable ones.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import orjson
from referencing import Registry

from kvlog.check.errors import Refused
from kvlog.check.files import MAX_DEPTH, depth, entries, read_file
from kvlog.check.findings import Finding
from kvlog.schema.catalog import Catalog, version_in


@dataclass(frozen=True)
class SchemaFile:
    """One parsed schema file: where it is (for messages), its text (for line numbers) and its document."""

    rel: str
    display: str
    text: str
    document: dict[str, Any]


@dataclass
class Snapshot:
    """The readable files of one catalog at one point in time."""

    label: str
    shared: dict[str, SchemaFile] = field(default_factory=dict)
    versions: dict[str, dict[int, SchemaFile]] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    #: Files that are there but could not be read or parsed (each has a finding): not removed, unknown.
    unread: set[str] = field(default_factory=set)

    @classmethod
    def from_files(cls, label: str, files: dict[str, bytes], display: dict[str, str]) -> Snapshot:
        """Parse ``files`` (catalog-relative path -> content); ``display`` says how to name each in messages."""
        snapshot = cls(label)
        for rel in sorted(files):
            parts = rel.split("/")
            if not rel.endswith(".json"):
                continue
            name = display[rel]
            if len(parts) == 1 and parts[0].startswith("_"):
                parsed = _parse(name, files[rel], snapshot.findings)
                if parsed is not None:
                    snapshot.shared[rel] = SchemaFile(rel, name, *parsed)
                continue
            version = version_in(parts[-1]) if len(parts) == 2 else None
            if version is None:
                snapshot.findings.append(
                    Finding("KV007", "not part of the catalog layout <event>/v<N>.json or _<shared>.json", name)
                )
                continue
            parsed = _parse(name, files[rel], snapshot.findings)
            if parsed is not None:
                snapshot.versions.setdefault(parts[0], {})[version] = SchemaFile(rel, name, *parsed)
            else:
                snapshot.unread.add(rel)
        return snapshot

    @classmethod
    def from_directory(cls, directory: Path, root: Path) -> Snapshot:
        """The catalog as it is on disk now; only regular files inside the project ``root`` are read."""
        files: dict[str, bytes] = {}
        refused: dict[str, str] = {}
        for path in entries(directory, lambda name: name.endswith(".json")):
            rel = path.relative_to(directory).as_posix()
            try:
                files[rel] = read_file(path, root)
            except Refused as exc:
                refused[rel] = str(exc)
        snapshot = cls.from_files("working tree", files, {rel: display_path(directory / rel) for rel in files})
        snapshot.findings[:0] = refusals(refused, {rel: display_path(directory / rel) for rel in refused})
        snapshot.unread |= set(refused)
        return snapshot

    def without(self, rels: set[str]) -> Snapshot:
        """A copy without the files ``rels`` (those the structure rules found broken), findings aside."""
        return Snapshot(
            self.label,
            {rel: f for rel, f in self.shared.items() if rel not in rels},
            {
                event: kept
                for event, versions in self.versions.items()
                if (kept := {v: f for v, f in versions.items() if f.rel not in rels})
            },
        )

    def all_files(self) -> list[SchemaFile]:
        """Shared files, then every event version in order."""
        versioned = [self.versions[e][v] for e in sorted(self.versions) for v in sorted(self.versions[e])]
        return [*self.shared.values(), *versioned]

    @cached_property
    def catalog(self) -> Catalog:
        """The readable part of the snapshot as a ``Catalog``, for validators and the migration chain."""
        return Catalog(
            schemas={e: {v: f.document for v, f in vs.items()} for e, vs in self.versions.items()},
            shared={f.document["$id"]: f.document for f in self.shared.values()},
            paths={(e, v): Path(f.display) for e, vs in self.versions.items() for v, f in vs.items()},
        )

    @property
    def registry(self) -> Registry[Any]:
        """Every readable document by its ``$id``, so relative ``$ref``s resolve offline."""
        return self.catalog.registry


def refusals(refused: dict[str, str], display: dict[str, str]) -> list[Finding]:
    """The schema files that were not read (``kvlog.check.files`` says why), one finding each."""
    return [Finding("KV001", reason, display[rel]) for rel, reason in sorted(refused.items())]


def _parse(name: str, content: bytes, findings: list[Finding]) -> tuple[str, dict[str, Any]] | None:
    try:
        document = orjson.loads(content)
    except orjson.JSONDecodeError as exc:
        findings.append(Finding("KV001", f"invalid JSON: {exc.msg} (column {exc.colno})", name, exc.lineno))
        return None
    if not isinstance(document, dict):
        findings.append(Finding("KV001", "a schema must be a JSON object", name, 1))
        return None
    nesting = depth(document)
    if nesting > MAX_DEPTH:
        findings.append(Finding("KV001", f"nested {nesting} levels deep; a schema may nest {MAX_DEPTH}", name, 1))
        return None
    if not isinstance(document.get("$id"), str):
        findings.append(Finding("KV001", "a schema needs a string $id, so that $refs can find it", name, 1))
        return None
    return content.decode(), document


def display_path(path: Path) -> str:
    """``path`` relative to the working directory when inside it: the form CI annotations need.

    Its directory is resolved, not its last part: a planted link is named, not what it points to.
    """
    try:
        return (path.parent.resolve() / path.name).relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return str(path)


def locate(text: str, pointer: tuple[str, ...]) -> int | None:
    """The line of the deepest key of ``pointer`` found in ``text``: good enough to put an annotation on."""
    position, found = 0, None
    for part in pointer:
        if part.isdigit():
            continue
        index = text.find(orjson.dumps(part).decode() + ":", position)
        if index < 0:
            index = text.find(orjson.dumps(part).decode(), position)
        if index < 0:
            break
        position, found = index, index
    return None if found is None else text.count("\n", 0, found) + 1
