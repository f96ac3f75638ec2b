"""Rules on each schema alone and on the catalog's shape: metaschema, $refs, ids, version numbering."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import jsonschema_rs
from jsonschema import Draft4Validator, Draft6Validator, Draft7Validator, Draft201909Validator, Draft202012Validator
from jsonschema.exceptions import ValidationError
from jsonschema.protocols import Validator

from kvlog.check.drafts import detect
from kvlog.check.findings import Finding
from kvlog.check.snapshot import SchemaFile, Snapshot, locate
from kvlog.schema.errors import DerefError
from kvlog.schema.walk import Draft, dereference
from kvlog.schema.walk import declared as declared_draft

# The drafts a catalog file may declare in $schema; each file is checked against its own metaschema.
_META_CLASSES: dict[Draft, type[Validator]] = {
    "draft-04": Draft4Validator,
    "draft-06": Draft6Validator,
    "draft-07": Draft7Validator,
    "2019-09": Draft201909Validator,
    "2020-12": Draft202012Validator,
}
_META: dict[Draft, Validator] = {draft: cls(cls.META_SCHEMA) for draft, cls in _META_CLASSES.items()}


@dataclass
class Structure:
    """What the structure rules found, and what the other rules may use.

    ``resolved`` holds each event version's schema with its ``$ref``s resolved; ``broken`` the files
    the other rules must not use: not a Draft 2020-12 schema, a ``$ref`` that does not resolve, or
    constants that contradict the file name. Later rules assume what these rules check.
    """

    findings: list[Finding] = field(default_factory=list)
    resolved: dict[tuple[str, int], Any] = field(default_factory=dict)
    broken: set[str] = field(default_factory=set)


def check_structure(snapshot: Snapshot) -> Structure:
    """Findings on every file, and each event version's schema with its ``$ref``s resolved (when they do)."""
    out = Structure()
    findings = out.findings
    base = _catalog_base(snapshot)
    for file in snapshot.all_files():
        invalid = _metaschema(file)
        findings += _declared_draft(file) + invalid + _identity(file, base)
        if invalid:
            out.broken.add(file.rel)
    schemas = snapshot.without(out.broken)  # a $ref into a broken file does not resolve
    event_versions = {f.rel: (event, v) for event, versions in schemas.versions.items() for v, f in versions.items()}
    for file in schemas.all_files():
        try:
            full = dereference(file.document, schemas.registry, file.document["$id"])
        except DerefError as exc:
            findings.append(Finding("KV003", str(exc), file.display, locate(file.text, (*exc.path, "$ref"))))
            out.broken.add(file.rel)
            continue
        if file.rel in event_versions:
            event, version = event_versions[file.rel]
            wrong = _constants(file, event, version)
            findings += wrong
            if wrong:
                out.broken.add(file.rel)
            else:
                out.resolved[event, version] = full
    for event, versions in sorted(snapshot.versions.items()):
        missing = sorted(set(range(1, max(versions) + 1)) - set(versions))
        if missing:
            newest = versions[max(versions)]
            listed = ", ".join(f"v{v}.json" for v in missing)
            findings.append(Finding("KV006", f"{event}: missing {listed} (versions run 1, 2, ...)", newest.display, 1))
    return out


def _declared_draft(file: SchemaFile) -> list[Finding]:
    declared = file.document.get("$schema")
    if declared_draft(file.document) is not None:
        return []
    known = "draft-04, draft-06, draft-07, 2019-09 or 2020-12"
    message = f"$schema is {declared!r}; catalog schemas declare their draft ({known}) by its metaschema URI"
    return [Finding("KV002", message, file.display, 1)]


def _metaschema(file: SchemaFile) -> list[Finding]:
    try:
        if jsonschema_rs.meta.is_valid(file.document):  # a hundred times faster; explanations come from below
            return []
    except (jsonschema_rs.ValidationError, jsonschema_rs.ReferencingError, ValueError):
        pass  # a metaschema it does not know: the reference implementation judges
    findings = []
    draft = detect(file.document)
    for error in sorted(_META[draft].iter_errors(file.document), key=_by_path):
        where = "/".join(str(p) for p in error.absolute_path) or "(root)"
        line = locate(file.text, tuple(str(p) for p in error.absolute_path))
        message = f"not a valid {_TITLE[draft]} schema at {where}: {error.message}"
        findings.append(Finding("KV002", message, file.display, line))
    return findings


_TITLE: dict[Draft, str] = {
    "draft-04": "Draft 4",
    "draft-06": "Draft 6",
    "draft-07": "Draft 7",
    "2019-09": "Draft 2019-09",
    "2020-12": "Draft 2020-12",
}


def _by_path(error: ValidationError) -> tuple[str, ...]:
    return tuple(str(p) for p in error.absolute_path)


def _catalog_base(snapshot: Snapshot) -> str | None:
    """The URI prefix most files share: the one a misplaced or mistyped ``$id`` disagrees with."""
    bases = Counter(
        file.document["$id"][: -len(file.rel)]
        for file in snapshot.all_files()
        if file.document["$id"].endswith(file.rel)
    )
    return bases.most_common(1)[0][0] if bases else None


def _identity(file: SchemaFile, base: str | None) -> list[Finding]:
    actual = file.document["$id"]
    expected = f"{base}{file.rel}" if base is not None else None
    if expected is not None and actual != expected:
        line = locate(file.text, ("$id",))
        return [
            Finding(
                "KV004", f"$id is {actual!r} but this file's place in the catalog is {expected!r}", file.display, line
            )
        ]
    if expected is None and not actual.endswith(f"/{file.rel}"):
        return [Finding("KV004", f"$id {actual!r} does not end with this file's place {file.rel!r}", file.display, 1)]
    return []


def _constants(file: SchemaFile, event: str, version: int) -> list[Finding]:
    findings = []
    properties = file.document.get("properties", {})
    for name, expected in (("event", event), ("schema_version", version)):
        spec = properties.get(name) if isinstance(properties, dict) else None
        actual = spec.get("const", "(missing)") if isinstance(spec, dict) else "(missing)"
        if actual != expected or type(actual) is not type(expected):
            line = locate(file.text, ("properties", name))
            findings.append(
                Finding(
                    "KV005",
                    f"properties.{name}.const is {actual!r}; the file name says {expected!r}",
                    file.display,
                    line,
                )
            )
    return findings
