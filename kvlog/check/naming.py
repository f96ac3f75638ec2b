"""Naming rules: the promises kvlog's events make in their field names (bytes are integers, states are enums)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from kvlog.check.findings import Finding
from kvlog.check.jsondiff import show
from kvlog.check.snapshot import SchemaFile, Snapshot, locate
from kvlog.schema.errors import DerefError
from kvlog.schema.fields import Facts
from kvlog.schema.walk import dereference, map_subschemas

_UNIT_SUFFIX = re.compile(r"_(?:[kmgtp]i?b|bytes?_[kmgt]i?b)$", re.IGNORECASE)
_STATE_FIELD = re.compile(r"(?:^|_)(?:state|status|kind|mode)$")
_BYTES_DEF = re.compile(r"#/\$defs/bytes$")
# *_bytes, plus numpy's and torch's established spelling ``nbytes``.
_BYTES_NAME = re.compile(r"(?:_bytes|^nbytes|_nbytes)$")
# Differences of two byte counts may be negative: their names say so, or their schemas do, with an
# extension keyword (``x-`` keywords are annotations to every validator).
_SIGNED_BYTES = re.compile(r"(?:delta|discrepancy)_bytes$")
SIGNED_KEYWORD = "x-kvlog-signed"
_NO_MINIMUM = "it has no minimum of 0"


def check_naming(snapshot: Snapshot) -> list[Finding]:
    """Every property of every file (shared definitions included, each checked once, where it is written)."""
    findings: list[Finding] = []
    for file in snapshot.all_files():
        for name, raw, pointer in _properties(file.document, ()):
            findings += _check_property(snapshot, file, name, raw, pointer)
    return findings


def _properties(schema: Any, path: tuple[str, ...]) -> Iterator[tuple[str, Any, tuple[str, ...]]]:
    """Every (name, subschema, pointer) under a ``properties`` keyword, at any depth."""
    found: list[tuple[str, Any, tuple[str, ...]]] = []

    def visit(sub: Any, sub_path: tuple[str, ...]) -> Any:
        if len(sub_path) >= 2 and sub_path[-2] == "properties":
            found.append((sub_path[-1], sub, sub_path))
        map_subschemas(sub, visit, sub_path)
        return sub

    map_subschemas(schema, visit, path)
    yield from found


def _check_property(
    snapshot: Snapshot, file: SchemaFile, name: str, raw: Any, pointer: tuple[str, ...]
) -> list[Finding]:
    if raw is False:
        return []
    line = locate(file.text, pointer)
    where = f"{name} ({'/'.join(pointer)})"
    findings = []
    if _UNIT_SUFFIX.search(name):
        findings.append(
            Finding("KV102", f"{where}: sizes are integer bytes; name it *_bytes, not {name}", file.display, line)
        )
    if not _BYTES_NAME.search(name) and _refers_to_bytes(raw):
        findings.append(Finding("KV103", f"{where} is a byte count ($defs/bytes); name it *_bytes", file.display, line))
    try:
        schema = dereference(raw, snapshot.registry, file.document["$id"])
    except DerefError:
        return findings  # reported once by the structure rules
    if _BYTES_NAME.search(name):
        signed = bool(_SIGNED_BYTES.search(name)) or (isinstance(raw, dict) and raw.get(SIGNED_KEYWORD) is True)
        problem = _integer_problem(schema, signed)
        if problem is not None:
            what = "an integer" if signed else "a non-negative integer"
            remedy = (
                "" if signed or problem != _NO_MINIMUM else f' (a signed difference says so: "{SIGNED_KEYWORD}": true)'
            )
            findings.append(
                Finding("KV101", f"{where} must be {what} (or null): {problem}{remedy}", file.display, line)
            )
    if _STATE_FIELD.search(name) and not _is_enumerated(schema):
        findings.append(Finding("KV104", f"{where} is a state field; declare its values with enum", file.display, line))
    return findings


def _refers_to_bytes(schema: Any) -> bool:
    if not isinstance(schema, dict):
        return False
    if isinstance(schema.get("$ref"), str) and _BYTES_DEF.search(schema["$ref"]):
        return True
    return any(_refers_to_bytes(branch) for key in ("anyOf", "oneOf", "allOf") for branch in schema.get(key, []))


def _integer_problem(schema: Any, signed: bool) -> str | None:
    """Why a (dereferenced) byte-count schema breaks its promise of integers, non-negative unless ``signed``."""
    if schema is True or schema == {}:
        return "it accepts any value"
    return _broken_promise(Facts.of(schema), signed)


def _broken_promise(facts: Facts, signed: bool) -> str | None:
    if facts.types == frozenset({"object"}) and facts.entries is not None:
        # A map of byte counts (e.g. field name -> uncertainty): its values carry the promise.
        return _broken_promise(facts.entries, signed)
    if facts.values is not None:
        bad = [v for v in facts.values if v is not None and not (type(v) is int and (signed or v >= 0))]
        return f"it allows {bad[0]!r}" if bad else None
    if facts.types is None:
        return "it declares no type"
    if not facts.types <= {"integer", "null"}:
        return f"its type is {show(sorted(facts.types))}"
    if "integer" in facts.types and facts.signed and not signed:
        return _NO_MINIMUM
    return None


def _is_enumerated(schema: Any) -> bool:
    return Facts.of(schema).values is not None
