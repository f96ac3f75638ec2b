"""The operations a declarative migration step is made of, read from TOML.

The vocabulary is what an OpenTelemetry schema file can say (renames) plus what it cannot (unit
conversions, enum maps, constants and defaults, fields derived from another field, drops that a
downgrade records as lost) and, where a step needs real logic, a named Python hook. Each operation
is compiled once, when the chain loads, so a broken migration file fails at load time naming itself.
TOML has no null; a value is written either as plain TOML or as ``{ json = "..." }`` (``{ json = "null" }``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import orjson

from kvlog.envelope import inference
from kvlog.io import jsonline
from kvlog.migration.errors import ApplyError, OpError
from kvlog.migration.hooks import HOOKS
from kvlog.schema.catalog import catalog_version
from kvlog.schema.readings import json_number, json_text

Event = dict[str, Any]


#: unit -> (dimension, size in the dimension's base unit)
_UNITS: dict[str, tuple[str, Decimal]] = {
    "bytes": ("bytes", Decimal(1)),
    "kib": ("bytes", Decimal(1 << 10)),
    "mib": ("bytes", Decimal(1 << 20)),
    "gib": ("bytes", Decimal(1 << 30)),
    "kb": ("bytes", Decimal(10**3)),
    "mb": ("bytes", Decimal(10**6)),
    "gb": ("bytes", Decimal(10**9)),
    "s": ("seconds", Decimal(1)),
    "ms": ("seconds", Decimal("0.001")),
    "us": ("seconds", Decimal("0.000001")),
    "fraction": ("ratio", Decimal(1)),
    "percent": ("ratio", Decimal("0.01")),
}


@dataclass(frozen=True)
class Op:
    """One compiled operation: what it reads and writes (for load-time checks) and how it applies."""

    kind: str
    reads: tuple[str, ...]
    writes: tuple[str, ...]
    drops: tuple[str, ...]
    run: Callable[[Event], None]


def value_of(raw: Any) -> Any:
    """A TOML value, or the JSON value of ``{ json = "..." }`` (the way to write null)."""
    if isinstance(raw, dict) and set(raw) == {"json"} and isinstance(raw["json"], str):
        try:
            return orjson.loads(raw["json"])
        except orjson.JSONDecodeError as exc:
            raise OpError(f"invalid JSON value {raw['json']!r}: {exc}") from None
    return raw


def provenance(event: Event) -> dict[str, Any]:
    """The event's ``migrated`` object, created for an event that was emitted live (not migrated)."""
    migrated = event.get("migrated")
    if not isinstance(migrated, dict):
        migrated = {"source_format": f"kvlog-json/v{catalog_version(event.get('schema_version'))}"}
        event["migrated"] = migrated
    return migrated


def inferred(event: Mapping[str, Any]) -> Mapping[str, Any]:
    """The event's inferred fields and their notes; none where ``migrated`` is not kvlog's shape.

    A current event is copied as it is, unvalidated: its ``migrated`` may hold what another tool wrote.
    """
    migrated = event.get("migrated")
    notes = migrated.get("inferred") if isinstance(migrated, dict) else None
    return notes if isinstance(notes, dict) else {}


def source_format(event: Mapping[str, Any]) -> str:
    """The format the event says it was read from (``kvlog-json`` where its ``migrated`` says none)."""
    migrated = event.get("migrated")
    given = migrated.get("source_format") if isinstance(migrated, dict) else None
    return given if isinstance(given, str) else "kvlog-json"


def mark_inferred(event: Event, name: str, rule: str, evidence: str, evidence_line: int | None = None) -> None:
    """Record in the provenance that ``name`` was inferred, by which rule, from what evidence."""
    provenance(event).setdefault("inferred", {})[name] = inference(rule, evidence, evidence_line)


def _rename_notes(event: Event, old: str, new: str | None) -> None:
    """Provenance notes (inferred, uncertainty) follow their field through a rename, and go with a drop."""
    migrated = event.get("migrated")
    if not isinstance(migrated, dict):
        return
    for key in ("inferred", "uncertainty_bytes"):
        notes = migrated.get(key)
        if isinstance(notes, dict) and old in notes:
            note = notes.pop(old)
            if new is not None:
                notes[new] = note
            elif not notes:
                del migrated[key]


def compile_op(spec: Mapping[str, Any]) -> Op:
    """Compile one ``[[ops]]`` table."""
    kind = spec.get("op")
    builder = _BUILDERS.get(kind) if isinstance(kind, str) else None
    if builder is None:
        raise OpError(f"unknown op {kind!r} (known: {', '.join(sorted(_BUILDERS))})")
    return builder(spec)


def _text(spec: Mapping[str, Any], key: str) -> str:
    value = spec.get(key)
    if not isinstance(value, str) or not value:
        raise OpError(f"op {spec.get('op')!r} needs a non-empty string {key!r}")
    return value


def _check_keys(spec: Mapping[str, Any], allowed: set[str]) -> None:
    unknown = set(spec) - allowed - {"op"}
    if unknown:
        raise OpError(f"op {spec.get('op')!r} does not take {', '.join(sorted(unknown))}")


def _rename(spec: Mapping[str, Any]) -> Op:
    _check_keys(spec, {"from", "to"})
    old, new = _text(spec, "from"), _text(spec, "to")

    def run(event: Event) -> None:
        if old in event:
            event[new] = event.pop(old)
            _rename_notes(event, old, new)

    return Op("rename", (old,), (new,), (), run)


def _inference(spec: Mapping[str, Any]) -> tuple[str, str] | None:
    if "rule" not in spec and "evidence" not in spec:
        return None
    return _text(spec, "rule"), _text(spec, "evidence")


def _setter(only_if_absent: bool) -> Callable[[Mapping[str, Any]], Op]:
    def build(spec: Mapping[str, Any]) -> Op:
        _check_keys(spec, {"field", "value", "rule", "evidence"})
        name = _text(spec, "field")
        if "value" not in spec:
            raise OpError(f"op {spec['op']!r} needs a 'value' (write null as {{ json = \"null\" }})")
        value, inference = value_of(spec["value"]), _inference(spec)

        def run(event: Event) -> None:
            if only_if_absent and name in event:
                return
            event[name] = value
            if inference is not None:
                mark_inferred(event, name, *inference)

        return Op(str(spec["op"]), (), (name,), (), run)

    return build


def _map(spec: Mapping[str, Any]) -> Op:
    _check_keys(spec, {"field", "values"})
    name, table = _text(spec, "field"), spec.get("values")
    if not isinstance(table, dict) or not table:
        raise OpError("op 'map' needs a non-empty table 'values' (old value = new value)")
    mapping = {key: value_of(value) for key, value in table.items()}

    def run(event: Event) -> None:
        if name not in event:
            return
        key = event[name] if isinstance(event[name], str) else jsonline.dumps(event[name]).decode()
        if key not in mapping:
            raise ApplyError(f"{name}={json_text(event[name])} has no mapping (known: {', '.join(sorted(mapping))})")
        event[name] = mapping[key]

    return Op("map", (name,), (name,), (), run)


def _convert(spec: Mapping[str, Any]) -> Op:
    _check_keys(spec, {"field", "from_unit", "to_unit"})
    name, source, target = _text(spec, "field"), _text(spec, "from_unit"), _text(spec, "to_unit")
    if source not in _UNITS or target not in _UNITS:
        raise OpError(f"op 'convert': units are {', '.join(_UNITS)}")
    (dimension, size_from), (target_dimension, size_to) = _UNITS[source], _UNITS[target]
    if dimension != target_dimension:
        raise OpError(f"op 'convert': cannot convert {source} to {target}")
    factor = size_from / size_to

    def run(event: Event) -> None:
        value = event.get(name)
        if value is None:
            return
        if not json_number(value):
            raise ApplyError(f"{name}={json_text(value)} is not a number")
        converted = Decimal(str(value)) * factor
        event[name] = int(converted.to_integral_value()) if dimension == "bytes" else float(converted)

    return Op("convert", (name,), (name,), (), run)


def _derive(spec: Mapping[str, Any]) -> Op:
    _check_keys(spec, {"field", "from", "when_null", "otherwise", "rule", "evidence"})
    name, source = _text(spec, "field"), _text(spec, "from")
    if "when_null" not in spec or "otherwise" not in spec:
        raise OpError("op 'derive' needs 'when_null' and 'otherwise' values")
    when_null, otherwise, inference = value_of(spec["when_null"]), value_of(spec["otherwise"]), _inference(spec)

    def run(event: Event) -> None:
        if name in event:
            return
        event[name] = when_null if event.get(source) is None else otherwise
        if inference is not None:
            mark_inferred(event, name, *inference)

    return Op("derive", (source,), (name,), (), run)


def _drop(spec: Mapping[str, Any]) -> Op:
    _check_keys(spec, {"fields"})
    names = spec.get("fields")
    if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
        raise OpError("op 'drop' needs a non-empty list of field names 'fields'")
    dropped = tuple(names)

    def run(event: Event) -> None:
        lost = [name for name in dropped if name in event]
        for name in lost:
            del event[name]
            _rename_notes(event, name, None)
        if lost:
            record = provenance(event).setdefault("lost", [])
            record += [name for name in lost if name not in record]

    return Op("drop", dropped, (), dropped, run)


def _hook(spec: Mapping[str, Any]) -> Op:
    _check_keys(spec, {"name", "reads", "writes"})
    name = _text(spec, "name")
    hook = HOOKS.get(name)
    if hook is None:
        raise OpError(f"unknown hook {name!r} (registered: {', '.join(sorted(HOOKS)) or 'none'})")
    return Op("hook", _field_names(spec, "reads"), _field_names(spec, "writes"), (), hook)


def _field_names(spec: Mapping[str, Any], key: str) -> tuple[str, ...]:
    """A hook's ``reads`` or ``writes``: a list of field names, none if left out.

    Checked because ``tuple()`` takes any iterable: ``writes = "pid"`` loaded as the fields p, i and d,
    and the engine trusts what an op declares it reads and writes.
    """
    names = spec.get(key, [])
    if not isinstance(names, list) or not all(isinstance(name, str) and name for name in names):
        raise OpError(f"op 'hook' needs a list of field names {key!r}")
    return tuple(names)


_BUILDERS: dict[str, Callable[[Mapping[str, Any]], Op]] = {
    "rename": _rename,
    "set": _setter(only_if_absent=False),
    "default": _setter(only_if_absent=True),
    "map": _map,
    "convert": _convert,
    "derive": _derive,
    "drop": _drop,
    "hook": _hook,
}
