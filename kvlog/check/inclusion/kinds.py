"""The JSON types a schema lets through, read from its ``type``: the first question of every comparison.

``integer`` sits inside ``number``; a schema without ``type`` lets every type through.
"""

from __future__ import annotations

from typing import Any

TYPES = ("null", "boolean", "object", "array", "number", "string")
NUMERIC = ("integer", "number")


def kinds(schema: dict[str, Any]) -> tuple[str, ...]:
    """The types ``schema`` declares, ``integer`` dropped where ``number`` already holds it."""
    declared = schema.get("type")
    if declared is None:
        return ("null", "boolean", "object", "array", "number", "string")
    listed = [declared] if isinstance(declared, str) else list(declared)
    if "number" in listed:
        listed = [t for t in listed if t != "integer"]
    return tuple(t for t in (*TYPES, "integer") if t in listed)


def admits(schema: Any, kind: str) -> bool:
    """Whether ``schema``'s ``type`` lets values of ``kind`` through (``integer`` sits inside ``number``)."""
    if schema is True:
        return True
    if schema is False or not isinstance(schema, dict):
        return False
    declared = schema.get("type")
    if declared is None:
        return True
    listed = [declared] if isinstance(declared, str) else declared
    return kind in listed or (kind == "integer" and "number" in listed) or (kind == "number" and "integer" in listed)


def covers(schema: dict[str, Any], kind: str) -> bool:
    """Whether ``schema``'s ``type`` accepts every value of ``kind``."""
    declared = schema.get("type")
    if declared is None:
        return True
    listed = [declared] if isinstance(declared, str) else declared
    return kind in listed or (kind == "integer" and "number" in listed)


def excluded(negated: Any) -> set[str]:
    """The types a ``not`` rules out entirely: those its subschema accepts whatever the value."""
    if negated is True or negated == {}:
        return set(TYPES) | {"integer"}
    if isinstance(negated, dict) and set(negated) == {"anyOf"} and isinstance(negated["anyOf"], list):
        return set().union(*(excluded(member) for member in negated["anyOf"]))  # not (A or B): neither
    if not isinstance(negated, dict) or set(negated) != {"type"}:
        return set()
    types = set(kinds(negated))
    return types | {"integer"} if "number" in types else types


def finite(schema: dict[str, Any]) -> list[Any] | None:
    """Every value ``schema`` may hold, where they are few enough to list (``const``, ``enum``, null, booleans)."""
    if "const" in schema:
        return [schema["const"]]
    if "enum" in schema:
        return list(schema["enum"])
    listed = kinds(schema)
    if set(listed) <= {"null", "boolean"}:
        return [v for k in listed for v in ([None] if k == "null" else [False, True])]
    return None


def names(declared: Any) -> str:
    """A ``type`` as a message shows it: ``integer|string``."""
    return "|".join(declared) if isinstance(declared, list) else str(declared)
