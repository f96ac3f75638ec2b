"""One member of an object or one item of an array: the subschemas that apply to it.

A break found in one member or item is shown as a break of a whole instance that holds it,
validated against both schemas.
"""

from __future__ import annotations

import itertools
from typing import Any

from kvlog.check import regular
from kvlog.check.inclusion.algebra import merge
from kvlog.check.inclusion.outcome import Found, Inclusion
from kvlog.check.inclusion.witnesses import accepts, unproven
from kvlog.check.instances import candidates


def leftover(schema: dict[str, Any], additional: str, unevaluated: str) -> Any:
    """What applies to members (or items) no other keyword names: additional*, else unevaluated*, else anything."""
    if additional in schema:
        return schema[additional]
    return schema.get(unevaluated, True)


def unnamed(schema: dict[str, Any]) -> Any:
    """What applies to the members no ``properties`` or ``patternProperties`` name."""
    return leftover(schema, "additionalProperties", "unevaluatedProperties")


def closed(schema: dict[str, Any]) -> bool:
    """Whether an object of ``schema`` may hold only the members its ``properties`` name."""
    return unnamed(schema) is False and not schema.get("patternProperties")


def item(schema: dict[str, Any], index: int) -> Any:
    """The subschema that applies to the item at ``index``."""
    prefix = schema.get("prefixItems", [])
    if index < len(prefix):
        return prefix[index]
    if "items" in schema:
        return schema["items"]
    return schema.get("unevaluatedItems", True)


def member_schema(schema: dict[str, Any], name: str) -> Any:
    """The conjunction of the subschemas that apply to member ``name``; False when it cannot appear."""
    names = schema.get("propertyNames")
    if names is not None and accepts(names, name) is False:
        return False
    applied: list[Any] = []
    if name in schema.get("properties", {}):
        applied.append(schema["properties"][name])
    for pattern, sub in schema.get("patternProperties", {}).items():
        language = regular.of(pattern)
        matched = language.fsm.accepts(name) if language is not None else accepts({"pattern": pattern}, name)
        if matched:
            applied.append(sub)
    if not applied:
        applied.append(unnamed(schema))
    folded: Any = True
    for sub in applied:
        folded = merge(folded, sub)
    return folded


def forced(writer: dict[str, Any], name: str) -> bool:
    """Whether every object of ``writer`` has ``name``: closed to too few other names for its minProperties."""
    if not closed(writer):
        return False
    others = [n for n in writer.get("properties", {}) if n != name and member_schema(writer, n) is not False]
    return bool(len(others) < writer.get("minProperties", 0))


def fresh_name(schema: dict[str, Any], named: set[str]) -> str | None:
    """A member name no property or pattern of ``schema`` claims, and that its propertyNames allow."""
    for name in itertools.chain(["extra", "x", "other"], (f"extra{i}" for i in range(50))):
        claimed = name in named or any(accepts({"pattern": p}, name) for p in schema.get("patternProperties", {}))
        if not claimed and ("propertyNames" not in schema or accepts(schema["propertyNames"], name) is True):
            return name
    return None


def lift_item(outcome: Inclusion, writer: dict[str, Any], reader: dict[str, Any], index: int) -> Inclusion:
    """A break of the item at ``index`` (or any later one) becomes a break of an array holding it."""
    if outcome.holds is not False:
        return outcome
    values = [outcome.witness.value] if outcome.witness is not None else []
    for base in [b for b in candidates(writer) if isinstance(b, list)][:8]:
        for value in values:
            filler = [candidates(item(writer, i))[:1] for i in range(len(base), index)]
            if any(not f for f in filler):
                continue
            padded = base + [f[0] for f in filler]
            instance = [*padded[:index], value, *padded[index + 1 :]]
            if accepts(writer, instance) is True and accepts(reader, instance) is False:
                return Inclusion(False, outcome.reasons, Found(instance))
    return unproven(outcome)


def lift_member(outcome: Inclusion, writer: dict[str, Any], reader: dict[str, Any], name: str | None) -> Inclusion:
    """A break inside member ``name`` becomes a break of an object holding it, validated against both."""
    if outcome.holds is not False or name is None:
        return outcome
    values = [outcome.witness.value] if outcome.witness is not None else []
    values += candidates(member_schema(writer, name))
    for base in candidates(writer)[:8]:
        if not isinstance(base, dict):
            continue
        for value in values[:12]:
            instance = {**base, name: value}
            if accepts(writer, instance) is True and accepts(reader, instance) is False:
                return Inclusion(False, outcome.reasons, Found(instance))
    return unproven(outcome)


def embed(outcome: Inclusion, writer: dict[str, Any], reader: dict[str, Any], name: str) -> Inclusion:
    """``lift_member`` for a break the member's own comparison found, whatever its ``holds`` said."""
    return lift_member(Inclusion(False, outcome.reasons, outcome.witness), writer, reader, name)
