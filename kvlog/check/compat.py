"""JSON-Schema compatibility: whether every instance one schema accepts is accepted by another.

``incompatibilities(writer, reader)`` lists the reasons some instance valid under ``writer`` may be
invalid under ``reader``. Backward compatibility (new readers read old data) is
``incompatibilities(old, new)``; forward (old readers read new data) is ``incompatibilities(new, old)``.
This is the question Confluent Schema Registry and Karapace answer for JSON Schema, asked of the
instance sets, so that the classic cases fall out of one rule instead of a list of special cases:
adding an optional property is safe only when the old content model was closed, removing one only
when the new model is open, ``integer`` widens to ``number`` but not back, and so on.

The answer is exact for the keywords event schemas use (types, enums and consts, bounds, strings,
arrays, object content models, nullable ``anyOf``) and conservative where a proof would need a
solver (a changed ``if``/``then``, ``not``, ``pattern`` or ``patternProperties``): such a change is
reported as incompatible, with the reason, rather than waved through.
The schemas compared must already be dereferenced and stripped of annotations (``kvlog.schema.walk``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from kvlog.check.jsondiff import show
from kvlog.check.validator import linear

_ALL_TYPES = frozenset({"null", "boolean", "object", "array", "number", "integer", "string"})
_NUMERIC = frozenset({"number", "integer"})
# Keywords whose meaning depends on sibling keywords: an allOf member holding one cannot be merged.
_ADJACENT = frozenset(
    {
        "properties",
        "patternProperties",
        "additionalProperties",
        "unevaluatedProperties",
        "items",
        "prefixItems",
        "unevaluatedItems",
        "contains",
        "minContains",
        "maxContains",
        "if",
        "then",
        "else",
    }
)
# Reader keywords this module reasons about; any other one that changed is reported conservatively.
_UNDERSTOOD = frozenset(
    {
        "type",
        "enum",
        "const",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "minLength",
        "maxLength",
        "pattern",
        "items",
        "prefixItems",
        "minItems",
        "maxItems",
        "uniqueItems",
        "properties",
        "required",
        "additionalProperties",
        "patternProperties",
        "propertyNames",
        "minProperties",
        "maxProperties",
        "dependentRequired",
        "allOf",
        "anyOf",
        "oneOf",
    }
)


@dataclass(frozen=True)
class Incompatibility:
    """One reason a writer's instance may fail the reader: where (a field path) and what changed."""

    location: str
    kind: str
    detail: str

    def __str__(self) -> str:
        return f"{self.location}: {self.detail}"


def incompatibilities(
    writer: Any, reader: Any, writer_label: str = "old", reader_label: str = "new"
) -> list[Incompatibility]:
    """Reasons an instance valid under ``writer`` may be rejected by ``reader``; empty when none can be."""
    return _Comparison(writer_label, reader_label).compare(writer, reader, "$")


def _as_dict(schema: Any) -> dict[str, Any]:
    if schema is True:
        return {}
    if schema is False:
        return {"not": {}}
    return dict(schema)


def _types(schema: dict[str, Any]) -> frozenset[str] | None:
    declared = schema.get("type")
    if declared is None:
        return None
    return frozenset([declared] if isinstance(declared, str) else declared)


def _flatten(schema: dict[str, Any]) -> dict[str, Any]:
    """Merge ``allOf`` members into their parent where that cannot change the meaning."""
    members = schema.get("allOf")
    if not members:
        return schema
    out = {k: v for k, v in schema.items() if k != "allOf"}
    kept = []
    for raw in members:
        member = _flatten(_as_dict(raw))
        clash = any(k in out and out[k] != v for k, v in member.items())
        if clash or _ADJACENT & member.keys() or "allOf" in member:
            kept.append(member)
        else:
            out.update(member)
    if kept:
        out["allOf"] = kept
    return out


def _lower(schema: dict[str, Any]) -> tuple[float, bool] | None:
    bounds = []
    if isinstance(schema.get("minimum"), int | float):
        bounds.append((float(schema["minimum"]), False))
    if isinstance(schema.get("exclusiveMinimum"), int | float):
        bounds.append((float(schema["exclusiveMinimum"]), True))
    return max(bounds) if bounds else None


def _upper(schema: dict[str, Any]) -> tuple[float, bool] | None:
    bounds = []
    if isinstance(schema.get("maximum"), int | float):
        bounds.append((float(schema["maximum"]), False))
    if isinstance(schema.get("exclusiveMaximum"), int | float):
        bounds.append((float(schema["exclusiveMaximum"]), True))
    return min(bounds, key=lambda b: (b[0], not b[1])) if bounds else None


def _describe(bound: tuple[float, bool] | None, lower: bool) -> str:
    if bound is None:
        return "none"
    value = int(bound[0]) if bound[0].is_integer() else bound[0]
    return f"{'>' if lower else '<'}{'' if bound[1] else '='} {value}"


def _accepts(schema: dict[str, Any], value: Any) -> bool:
    """Whether ``schema`` accepts ``value``, matching patterns in linear time (a schema under review may backtrack)."""
    try:
        return linear(schema).is_valid(value)
    except ValueError:  # a pattern the linear engine cannot compile: KV008 reports it, treat it as rejecting
        return False


class _Comparison:
    def __init__(self, writer_label: str, reader_label: str) -> None:
        self.w = writer_label
        self.r = reader_label

    def compare(self, writer: Any, reader: Any, loc: str) -> list[Incompatibility]:
        w, r = _flatten(_as_dict(writer)), _flatten(_as_dict(reader))
        if not r or w == r or w.get("not") == {}:
            return []
        finite = self._finite_values(w)
        if finite is not None:
            return self._values(finite, w, r, loc)
        for key in ("anyOf", "oneOf"):
            if key in w:
                rest = {k: v for k, v in w.items() if k != key}
                return _dedupe([inc for branch in w[key] for inc in self.compare({**rest, **_as_dict(branch)}, r, loc)])
        if "anyOf" in r or "oneOf" in r:
            return self._reader_union(w, r, loc)
        return self._keywords(w, r, loc)

    def _finite_values(self, w: dict[str, Any]) -> list[Any] | None:
        if "const" in w:
            return [w["const"]]
        if "enum" in w:
            return list(w["enum"])
        types = _types(w)
        if types is not None and types <= {"null", "boolean"}:
            return [v for t in sorted(types) for v in ([None] if t == "null" else [False, True])]
        return None

    def _values(self, values: list[Any], w: dict[str, Any], r: dict[str, Any], loc: str) -> list[Incompatibility]:
        rejected = [v for v in values if _accepts(w, v) and not _accepts(r, v)]
        if not rejected:
            return []
        shown = ", ".join(show(v) for v in rejected)
        kind = "enum-narrowed" if "enum" in r or "const" in r else "type-narrowed"
        return [Incompatibility(loc, kind, f"{self.r} rejects {shown}, which {self.w} allows")]

    def _reader_union(self, w: dict[str, Any], r: dict[str, Any], loc: str) -> list[Incompatibility]:
        key = "anyOf" if "anyOf" in r else "oneOf"
        branches = [_as_dict(b) for b in r[key]]
        rest = {k: v for k, v in r.items() if k != key}
        found = self.compare(w, rest, loc) if rest else []
        if key == "oneOf" and not _disjoint_by_type(branches):
            return [*found, Incompatibility(loc, "combinator-changed", f"{self.r} adds a oneOf whose branches overlap")]
        types = _types(w)
        variants = [{**w, "type": t} for t in sorted(types)] if types is not None and len(types) > 1 else [w]
        for variant in variants:
            attempts: list[list[Incompatibility]] = [self.compare(variant, branch, loc) for branch in branches]
            if all(attempts):
                closest = min(attempts, key=len)
                found += closest
        return _dedupe(found)

    def _keywords(self, w: dict[str, Any], r: dict[str, Any], loc: str) -> list[Incompatibility]:
        found: list[Incompatibility] = []
        w_types = _types(w)
        r_types = _types(r)
        produced = _ALL_TYPES if w_types is None else w_types
        if r_types is not None:
            lost = {t for t in produced if t not in r_types and not (t == "integer" and "number" in r_types)}
            if lost:
                if w_types is None:
                    detail = f"{self.r} restricts the type to {_names(r_types)}; {self.w} allows any"
                else:
                    detail = (
                        f"type changed from {_names(w_types)} to {_names(r_types)}: {self.r} rejects {_names(lost)}"
                    )
                found.append(Incompatibility(loc, "type-narrowed", detail))
            produced = frozenset(produced - lost)
        if "enum" in r or "const" in r:
            allowed = r["enum"] if "enum" in r else [r["const"]]
            found.append(
                Incompatibility(
                    loc, "enum-added", f"{self.r} allows only {show(allowed)}; {self.w} allows any {_names(produced)}"
                )
            )
        if produced & _NUMERIC:
            found += self._numbers(w, r, loc)
        if "string" in produced:
            found += self._range(w, r, loc, low="minLength", high="maxLength", what="length")
            if "pattern" in r and r.get("pattern") != w.get("pattern"):
                found.append(
                    Incompatibility(
                        loc,
                        "pattern-changed",
                        f"{self.r} requires pattern {show(r['pattern'])}; {self.w} "
                        + (f"required {show(w['pattern'])}" if "pattern" in w else "had none"),
                    )
                )
        if "array" in produced:
            found += self._arrays(w, r, loc)
        if "object" in produced:
            found += self._objects(w, r, loc)
        for member in r.get("allOf", []):
            if member not in w.get("allOf", []):
                found += self.compare({k: v for k, v in w.items() if k != "allOf"}, member, loc)
        for key in sorted(set(r) - _UNDERSTOOD - {"allOf"}):
            if r[key] != w.get(key):
                found.append(
                    Incompatibility(loc, f"{key}-changed", f"{self.r} changes {key}, which kvlog cannot prove safe")
                )
        return _dedupe(found)

    def _numbers(self, w: dict[str, Any], r: dict[str, Any], loc: str) -> list[Incompatibility]:
        found = []
        w_low, r_low = _lower(w), _lower(r)
        if r_low is not None and (
            w_low is None or r_low[0] > w_low[0] or (r_low[0] == w_low[0] and r_low[1] and not w_low[1])
        ):
            found.append(
                Incompatibility(
                    loc,
                    "bound-tightened",
                    f"lower bound raised from {_describe(w_low, True)} ({self.w}) "
                    f"to {_describe(r_low, True)} ({self.r})",
                )
            )
        w_up, r_up = _upper(w), _upper(r)
        if r_up is not None and (w_up is None or r_up[0] < w_up[0] or (r_up[0] == w_up[0] and r_up[1] and not w_up[1])):
            found.append(
                Incompatibility(
                    loc,
                    "bound-tightened",
                    f"upper bound lowered from {_describe(w_up, False)} ({self.w}) "
                    f"to {_describe(r_up, False)} ({self.r})",
                )
            )
        r_step, w_step = r.get("multipleOf"), w.get("multipleOf")
        if r_step is not None and (w_step is None or not math.isclose(w_step / r_step, round(w_step / r_step))):
            found.append(
                Incompatibility(
                    loc,
                    "bound-tightened",
                    f"{self.r} requires multiples of {r_step}, {self.w} of {w_step or 'anything'}",
                )
            )
        return found

    def _range(
        self, w: dict[str, Any], r: dict[str, Any], loc: str, *, low: str, high: str, what: str
    ) -> list[Incompatibility]:
        found = []
        if r.get(low, 0) > w.get(low, 0):
            found.append(
                Incompatibility(
                    loc, "bound-tightened", f"{low} raised from {w.get(low, 0)} ({self.w}) to {r[low]} ({self.r})"
                )
            )
        if high in r and r[high] < w.get(high, math.inf):
            found.append(
                Incompatibility(
                    loc,
                    "bound-tightened",
                    f"{high} lowered from {w.get(high, 'none')} ({self.w}) to {r[high]} ({self.r}): {what} limit",
                )
            )
        return found

    def _arrays(self, w: dict[str, Any], r: dict[str, Any], loc: str) -> list[Incompatibility]:
        found = self._range(w, r, loc, low="minItems", high="maxItems", what="item count")
        if r.get("uniqueItems") and not w.get("uniqueItems"):
            found.append(
                Incompatibility(loc, "unique-items-added", f"{self.r} requires unique items, {self.w} does not")
            )
        w_prefix, r_prefix = w.get("prefixItems", []), r.get("prefixItems", [])
        for index in range(max(len(w_prefix), len(r_prefix))):
            w_item = w_prefix[index] if index < len(w_prefix) else w.get("items", True)
            r_item = r_prefix[index] if index < len(r_prefix) else r.get("items", True)
            found += self.compare(w_item, r_item, f"{loc}[{index}]")
        found += self.compare(w.get("items", True), r.get("items", True), f"{loc}[]")
        return found

    def _objects(self, w: dict[str, Any], r: dict[str, Any], loc: str) -> list[Incompatibility]:
        found: list[Incompatibility] = []
        w_props, r_props = w.get("properties", {}), r.get("properties", {})
        w_extra, r_extra = w.get("additionalProperties", True), r.get("additionalProperties", True)
        if r.get("patternProperties", {}) != w.get("patternProperties", {}):
            found.append(
                Incompatibility(
                    loc,
                    "pattern-properties-changed",
                    f"{self.r} changes patternProperties, which kvlog cannot prove safe",
                )
            )
        for name in sorted(set(w_props) | set(r_props)):
            here = f"{name}" if loc == "$" else f"{loc}.{name}"
            w_sub = w_props.get(name, w_extra)
            r_sub = r_props.get(name, r_extra)
            if w_sub is False:
                continue
            if name not in r_props and r_sub is False:
                found.append(
                    Incompatibility(
                        here, "property-removed", f"{self.w} allows {name}, {self.r} rejects it (closed content model)"
                    )
                )
            elif name not in w_props and _as_dict(w_sub) == {} and _as_dict(r_sub) != {}:
                found.append(
                    Incompatibility(
                        here,
                        "property-added-open",
                        f"{self.r} constrains {name}, but {self.w} is open (no additionalProperties false): "
                        f"any {name} was allowed",
                    )
                )
            else:
                found += self.compare(w_sub, r_sub, here)
        if w_extra is not False and r_extra is not True:
            if r_extra is False:
                found.append(
                    Incompatibility(
                        loc,
                        "content-model-closed",
                        f"{self.r} closes the content model (additionalProperties false); "
                        f"{self.w} allowed other properties",
                    )
                )
            else:
                found += self.compare(w_extra, r_extra, f"{loc}.*")
        for name in r.get("required", []):
            if name not in w.get("required", []):
                here = f"{name}" if loc == "$" else f"{loc}.{name}"
                found.append(
                    Incompatibility(here, "required-added", f"{self.r} requires {name}; {self.w} events may lack it")
                )
        found += self._range(w, r, loc, low="minProperties", high="maxProperties", what="property count")
        if "propertyNames" in r:
            if w_extra is False and not w.get("patternProperties"):
                names = {"enum": sorted(n for n, s in w_props.items() if s is not False)}
                found += self.compare(names, r["propertyNames"], f"{loc} property names")
            else:
                found += self.compare(
                    w.get("propertyNames", {"type": "string"}), r["propertyNames"], f"{loc} property names"
                )
        for name, needed in r.get("dependentRequired", {}).items():
            extra = [n for n in needed if n not in w.get("dependentRequired", {}).get(name, [])]
            if extra:
                found.append(
                    Incompatibility(loc, "required-added", f"{self.r} requires {extra} whenever {name} is present")
                )
        return found


def _disjoint_by_type(branches: list[dict[str, Any]]) -> bool:
    seen: set[str] = set()
    for branch in branches:
        types = _types(branch)
        if types is not None and "number" in types:
            types |= {"integer"}  # every integer is a number, so the two overlap
        if types is None or types & seen:
            return False
        seen |= types
    return True


def _names(types: frozenset[str] | set[str]) -> str:
    return "|".join(sorted(types))


def _dedupe(found: list[Incompatibility]) -> list[Incompatibility]:
    return list(dict.fromkeys(found))
