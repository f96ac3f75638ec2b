"""Schemas as sets of instances: conjunctions, unions of branches, and the parts of a conjunction.

``merge`` is the conjunction of two schemas, ``branches`` the writer as a union of simpler ones,
``conjuncts`` the parts every instance of a schema satisfies.

``branches`` may over-approximate the writer, never under-approximate it: that keeps a "yes" sound.
"""

from __future__ import annotations

import math
from typing import Any

from kvlog.check.inclusion.kinds import admits, covers, excluded, kinds
from kvlog.check.instances import same

# The applicator groups a schema is split along: each is one obligation of its own, except beside
# unevaluated*, which sees what they evaluated (``allOf`` is folded in separately).
GROUPS = (("anyOf",), ("oneOf",), ("not",), ("if", "then", "else"), ("dependentSchemas",))


def merge(a: Any, b: Any) -> Any:
    """The conjunction of two schemas, folded into one where that keeps its meaning, else via ``allOf``.

    Types meet exactly: ``number`` and ``integer`` give ``integer``. (They gave ``number``, and a reader
    whose integer rule came by ``patternProperties`` or by ``allOf`` beside ``unevaluated*`` was merged
    into one that accepts any number: a change to integers only was called compatible.)
    """
    if a is False or b is False:
        return False
    if a is True or a == {}:
        return {} if b is True else b
    if b is True or b == {}:
        return a
    out = dict(a)
    rest: list[Any] = []
    b = dict(b)
    for group in _SIBLING_GROUPS:
        theirs = {key: b.pop(key) for key in group if key in b}
        mine = {key: out[key] for key in group if key in out}
        if not mine:
            out.update(theirs)
        elif theirs and not same(mine, theirs):
            _merge_group(out, mine, theirs, rest)
    for key, value in b.items():
        if key not in out or same(out[key], value):
            if key in ("additionalProperties", "unevaluatedProperties", "items", "unevaluatedItems") and (
                _object_model(out, b) or _array_model(out, b)
            ):
                rest.append({key: value})
                continue
            out[key] = value
            continue
        mine = out[key]
        if key == "type":
            kept = [t for t in kinds({"type": mine}) if covers({"type": value}, t)]  # every value of t, not some
            kept += ["integer"] if admits({"type": mine}, "integer") and admits({"type": value}, "integer") else []
            out[key] = [t for t in dict.fromkeys(kept) if not (t == "integer" and "number" in kept)] or ["__none__"]
        elif key in ("minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties"):
            out[key] = max(mine, value)
        elif key in ("maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties"):
            out[key] = min(mine, value)
        elif key == "required":
            out[key] = list(dict.fromkeys([*mine, *value]))
        elif key == "enum":
            out[key] = [v for v in mine if any(same(v, w) for w in value)]
        elif key == "uniqueItems":
            out[key] = bool(mine) or bool(value)
        elif key in ("properties", "patternProperties", "dependentSchemas") and not _object_model(out, b):
            out[key] = {**mine, **{n: merge(mine[n], s) if n in mine else s for n, s in value.items()}}
        elif key == "dependentRequired":
            out[key] = {**mine, **{n: list(dict.fromkeys([*mine.get(n, []), *s])) for n, s in value.items()}}
        elif key == "allOf":
            out[key] = [*mine, *value]
        elif key == "not":
            out[key] = {"anyOf": [mine, value]}
        else:
            rest.append({key: value})
    if rest:
        out["allOf"] = [*out.get("allOf", []), *rest]
    return out


# Keywords that mean something only beside a sibling: then/else beside if, min/maxContains beside contains.
# Each group is merged as a whole; split across two schemas, a then would meet the other's if, or a
# minContains the other's contains, and the conjunction would claim more than either schema says.
_SIBLING_GROUPS = (("if", "then", "else"), ("contains", "minContains", "maxContains"))


def _merge_group(out: dict[str, Any], mine: dict[str, Any], theirs: dict[str, Any], rest: list[Any]) -> None:
    """Both schemas hold a sibling group, not the same: fold the counts of one ``contains``, else keep both."""
    if "contains" in mine and "contains" in theirs and same(mine["contains"], theirs["contains"]):
        low = max(mine.get("minContains", 1), theirs.get("minContains", 1))
        high = min(mine.get("maxContains", math.inf), theirs.get("maxContains", math.inf))
        out["minContains"] = low
        if high != math.inf:
            out["maxContains"] = high
        return
    rest.append(theirs)


def _object_model(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether both sides shape object members, so that additionalProperties would change meaning if merged."""
    keys = ("properties", "patternProperties", "additionalProperties", "unevaluatedProperties")
    return (
        any(k in a for k in keys)
        and any(k in b for k in keys)
        and (any(k in a or k in b for k in ("additionalProperties", "unevaluatedProperties")))
    )


def _array_model(a: dict[str, Any], b: dict[str, Any]) -> bool:
    keys = ("prefixItems", "items", "unevaluatedItems", "contains")
    return any(k in a for k in keys) and any(k in b for k in keys)


def branches(schema: Any, depth: int = 3) -> list[tuple[str, Any]]:
    """The writer as a union of (type, conjunction) pairs; a superset of its instances, never a subset."""
    if schema is False:
        return []
    if schema is True:
        schema = {}
    for key in ("anyOf", "oneOf"):
        if key in schema and depth > 0:
            rest = {k: v for k, v in schema.items() if k != key}
            return [pair for member in schema[key] for pair in branches(merge(rest, member), depth - 1)]
    if "allOf" in schema and depth > 0:
        rest = {k: v for k, v in schema.items() if k != "allOf"}
        folded: Any = rest
        for member in schema["allOf"]:
            folded = merge(folded, member)
        if folded is False or "allOf" not in folded or folded["allOf"] != schema["allOf"]:
            return branches(folded, depth - 1)
    if "if" in schema and depth > 0:
        rest = {k: v for k, v in schema.items() if k not in ("if", "then", "else")}
        return branches(merge(merge(rest, schema["if"]), schema.get("then", True)), depth - 1) + branches(
            merge(rest, schema.get("else", True)), depth - 1
        )
    ruled_out = excluded(schema.get("not"))
    out = []
    for kind in kinds(schema):
        if kind in ruled_out or (kind == "number" and "integer" in ruled_out and "number" in ruled_out):
            continue
        out.append((kind, {**schema, "type": kind}))
    if "number" in ruled_out or "integer" not in ruled_out:
        return out
    return [(k, s) if k != "number" else (k, {**s, "not": {"type": "integer"}}) for k, s in out]


def conjuncts(schema: Any) -> list[Any]:
    """Subschemas every instance of ``schema`` satisfies as they stand: its allOf members and applicator groups."""
    if not isinstance(schema, dict):
        return []
    found = list(schema.get("allOf", []))
    for group in GROUPS:
        taken = {k: schema[k] for k in group if k in schema}
        if taken and not evaluates(schema):
            found.append(taken)
    return found


def evaluates(schema: dict[str, Any]) -> bool:
    """Whether ``schema`` has an unevaluated* keyword, which sees what its applicators evaluated."""
    return "unevaluatedProperties" in schema or "unevaluatedItems" in schema
