"""Whether every instance one schema accepts is accepted by another: yes, no with an instance, or undecided.

``Judge.includes(writer, reader)`` answers for Draft 2020-12 schemas (``kvlog.check.drafts`` reads the
other drafts into them). The reader is split exactly: an instance must satisfy every ``allOf``
member, the base keywords, each ``anyOf``/``oneOf``/``not``/``if`` group, so each is a question of
its own. The writer is split into simpler branches (its types, ``anyOf``/``oneOf`` branches,
``if``/``then``/``else`` arms), which may over-approximate it: that keeps "yes" sound, and every "no"
carries a candidate instance that is checked against both schemas before anyone sees it. Where a
proof would need more than these rules (overlapping ``oneOf``, ``unevaluated*`` beside dynamic
applicators, patterns outside the regular dialect), the answer is "undecided", with the reason.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Literal

from kvlog.check import regular
from kvlog.check.drafts import SchemaError, validator
from kvlog.check.instances import beyond, candidates, fragile, same
from kvlog.check.jsondiff import show
from kvlog.schema.readings import json_number

_TYPES = ("null", "boolean", "object", "array", "number", "string")
_NUMERIC = ("integer", "number")
_APPLICATORS = ("allOf", "anyOf", "oneOf", "not", "if", "then", "else", "dependentSchemas", "$ref")
_MAX_DEPTH = 24
_MAX_PATTERN_CELLS = 6


@dataclass(frozen=True)
class Reason:
    """Where (a JSON path into the instance) and why the two schemas differ there."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


@dataclass(frozen=True)
class Found:
    """An instance (which may be JSON ``null``), boxed so that "none found" is not confused with it."""

    value: Any


@dataclass(frozen=True)
class Inclusion:
    """``holds``: True (included), False (an instance breaks; ``witness`` when one was built), None (undecided)."""

    holds: bool | None
    reasons: tuple[Reason, ...] = ()
    witness: Found | None = None


YES = Inclusion(True)


def conjoin(outcomes: Iterable[Inclusion]) -> Inclusion:
    """Every obligation must hold: the first break wins, else any undecided one, else yes."""
    listed = list(outcomes)
    broken = [o for o in listed if o.holds is False]
    if broken:
        witness = next((o.witness for o in broken if o.witness is not None), None)
        first_per_path = {reason.path: reason for reason in reversed(_reasons(broken))}
        return Inclusion(False, tuple(reversed(first_per_path.values())), witness)
    undecided = [o for o in listed if o.holds is None]
    return Inclusion(None, _reasons(undecided)) if undecided else YES


def _reasons(outcomes: list[Inclusion]) -> tuple[Reason, ...]:
    return tuple(dict.fromkeys(reason for o in outcomes for reason in o.reasons))


def accepts(schema: Any, value: Any) -> bool | None:
    """Whether a 2020-12 ``schema`` accepts ``value``; ``None`` when it cannot be compiled."""
    if fragile(schema, value):
        return None
    try:
        return bool(validator(schema, "2020-12").is_valid(value))
    except (SchemaError, ValueError, TypeError, OverflowError):
        return None


def _types(schema: dict[str, Any]) -> tuple[str, ...]:
    declared = schema.get("type")
    if declared is None:
        return ("null", "boolean", "object", "array", "number", "string")
    listed = [declared] if isinstance(declared, str) else list(declared)
    if "number" in listed:
        listed = [t for t in listed if t != "integer"]
    return tuple(t for t in (*_TYPES, "integer") if t in listed)


def _admits(schema: Any, kind: str) -> bool:
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


def _covers(schema: dict[str, Any], kind: str) -> bool:
    """Whether ``schema``'s ``type`` accepts every value of ``kind``."""
    declared = schema.get("type")
    if declared is None:
        return True
    listed = [declared] if isinstance(declared, str) else declared
    return kind in listed or (kind == "integer" and "number" in listed)


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
            kept = [t for t in _types({"type": mine}) if _covers({"type": value}, t)]  # every value of t, not some
            kept += ["integer"] if _admits({"type": mine}, "integer") and _admits({"type": value}, "integer") else []
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
    excluded = _excluded_types(schema.get("not"))
    out = []
    for kind in _types(schema):
        if kind in excluded or (kind == "number" and "integer" in excluded and "number" in excluded):
            continue
        out.append((kind, {**schema, "type": kind}))
    if "number" in excluded or "integer" not in excluded:
        return out
    return [(k, s) if k != "number" else (k, {**s, "not": {"type": "integer"}}) for k, s in out]


def _excluded_types(negated: Any) -> set[str]:
    """The types a ``not`` rules out entirely: those its subschema accepts whatever the value."""
    if negated is True or negated == {}:
        return set(_TYPES) | {"integer"}
    if isinstance(negated, dict) and set(negated) == {"anyOf"} and isinstance(negated["anyOf"], list):
        return set().union(*(_excluded_types(member) for member in negated["anyOf"]))  # not (A or B): neither
    if not isinstance(negated, dict) or set(negated) != {"type"}:
        return set()
    types = set(_types(negated))
    return types | {"integer"} if "number" in types else types


class Judge:
    """Decides inclusion of the writer's instances in the reader's; labels name the two sides in reasons."""

    def __init__(self, writer_label: str = "old", reader_label: str = "new") -> None:
        self.w = writer_label
        self.r = reader_label
        self._depth = 0

    def includes(self, writer: Any, reader: Any, path: str = "$") -> Inclusion:
        """Whether every instance of ``writer`` is one of ``reader``."""
        if reader is True or reader == {} or writer is False or same(writer, reader):
            return YES
        if self._depth > _MAX_DEPTH:
            return self._undecided(path, "the schemas nest deeper than kvlog compares")
        self._depth += 1
        try:
            return self._includes(writer, reader, path)
        finally:
            self._depth -= 1

    # -- the reader, split exactly --------------------------------------------------------------------

    def _includes(self, writer: Any, reader: Any, path: str) -> Inclusion:
        if (isinstance(writer, dict) and "$ref" in writer) or (isinstance(reader, dict) and "$ref" in reader):
            return self._undecided(path, "a reference kvlog does not follow (recursive or to another document)")
        split = branches(writer)
        if not split:
            return YES
        if reader is False:
            return self._refute(path, writer, f"{self.r} accepts no value here; {self.w} does")
        held = _conjuncts(writer)  # a reader part the writer itself requires holds for every writer instance
        parts = [part for part in self._reader_parts(reader) if not any(same(part, c) for c in held)]
        return conjoin(self._branch(kind, branch, part, path) for kind, branch in split for part in parts)

    def _reader_parts(self, reader: dict[str, Any]) -> list[Any]:
        """The reader as a conjunction of independent parts (``allOf`` folded in when unevaluated* needs it)."""
        reader = dict(reader)
        if ("unevaluatedProperties" in reader or "unevaluatedItems" in reader) and "allOf" in reader:
            members = reader.pop("allOf")
            for member in members:
                reader = merge(reader, member) if isinstance(reader, dict) else reader
            if not isinstance(reader, dict):
                return [reader]
        parts: list[Any] = []
        if "allOf" in reader and not ("unevaluatedProperties" in reader or "unevaluatedItems" in reader):
            parts += reader.pop("allOf")
        for group in (("anyOf",), ("oneOf",), ("not",), ("if", "then", "else"), ("dependentSchemas",)):
            taken = {k: reader.pop(k) for k in group if k in reader}
            if taken and not _evaluates(reader):
                parts.append(taken)
            elif taken:
                reader.update(taken)
        return [reader, *parts]

    def _branch(self, kind: str, writer: dict[str, Any], reader: Any, path: str) -> Inclusion:
        if reader is True or reader == {}:
            return YES
        if reader is False:
            return self._refute(path, writer, f"{self.r} accepts no value here; {self.w} does")
        if "allOf" in reader and len(reader) == 1:
            return conjoin(self.includes(writer, member, path) for member in reader["allOf"])
        if "anyOf" in reader and len(reader) == 1:
            return self._any(kind, writer, reader["anyOf"], path)
        if "oneOf" in reader and len(reader) == 1:
            return self._one(kind, writer, reader["oneOf"], path)
        if "not" in reader and len(reader) == 1:
            return self._not(writer, reader["not"], path)
        if set(reader) <= {"if", "then", "else"}:
            return self._conditional(writer, reader, path)
        if set(reader) == {"dependentSchemas"}:
            return self._dependent_schemas(kind, writer, reader["dependentSchemas"], path)
        if any(key in reader for key in _APPLICATORS):
            return self._search(writer, reader, path, "the new schema mixes applicators with unevaluated keywords")
        return self._typed(kind, writer, reader, path)

    def _any(self, kind: str, writer: dict[str, Any], members: list[Any], path: str) -> Inclusion:
        relevant = [m for m in members if _admits(m, kind)]
        if not relevant:
            return self._refute(path, writer, f"no anyOf branch of {self.r} accepts {kind} values; {self.w} has them")
        outcomes = [self.includes(writer, m, path) for m in relevant]
        if any(o.holds is True for o in outcomes):
            return YES
        if len(relevant) == 1:
            return outcomes[0]
        message = f"no single anyOf branch of {self.r} covers {self.w}"
        union = _union_outcome(kind, writer, relevant)
        if union is True:
            return YES
        if (
            isinstance(union, Found)
            and accepts(writer, union.value)
            and accepts({"anyOf": members}, union.value) is False
        ):
            return Inclusion(
                False, (Reason(path, f"the anyOf branches of {self.r} leave out values {self.w} has"),), union
            )
        return self._search(writer, {"anyOf": members}, path, message)

    def _one(self, kind: str, writer: dict[str, Any], members: list[Any], path: str) -> Inclusion:
        relevant = [m for m in members if _admits(m, kind)]
        if not relevant:
            return self._refute(path, writer, f"no oneOf branch of {self.r} accepts {kind} values; {self.w} has them")
        outcomes = [self.includes(writer, m, path) for m in relevant]
        for index, outcome in enumerate(outcomes):
            others = [m for j, m in enumerate(relevant) if j != index]
            if outcome.holds is True and all(self.disjoint(writer, other) for other in others):
                return YES
        if len(relevant) == 1:
            return outcomes[0]
        message = f"kvlog cannot prove each {self.w} value matches one oneOf branch"
        overlaps = {"anyOf": [merge(writer, member) for member in relevant]}  # where two branches may both match
        return self._search(writer, {"oneOf": members}, path, message, around=overlaps)

    def _not(self, writer: dict[str, Any], negated: Any, path: str) -> Inclusion:
        if self.disjoint(writer, negated):
            return YES
        return self._search(
            writer, {"not": negated}, path, f"{self.r} forbids values matching a 'not' schema that {self.w} may hold"
        )

    def _conditional(self, writer: dict[str, Any], reader: dict[str, Any], path: str) -> Inclusion:
        condition, then, otherwise = reader.get("if", True), reader.get("then", True), reader.get("else", True)
        if self.includes(writer, condition, path).holds is True:
            return self.includes(writer, then, path)
        if self.disjoint(writer, condition):
            return self.includes(writer, otherwise, path)
        if (
            self.includes(merge(writer, condition), then, path).holds is True
            and self.includes(writer, otherwise, path).holds is True
        ):
            return YES
        message = f"{self.r} adds an if/then/else that {self.w} may not satisfy"
        return self._search(writer, reader, path, message, around=merge(writer, condition))

    def _dependent_schemas(self, kind: str, writer: dict[str, Any], needed: dict[str, Any], path: str) -> Inclusion:
        if kind != "object":
            return YES
        outcomes = []
        for name, schema in needed.items():
            if self._member_schema(writer, name) is False:
                continue
            present = merge(writer, {"required": [name, *writer.get("dependentRequired", {}).get(name, [])]})
            own = writer.get("dependentSchemas", {}).get(name, True)  # the writer's own condition on it
            outcomes.append(self.includes(merge(present, own), schema, path))
        return conjoin(outcomes)

    # -- typed keywords ----------------------------------------------------------------------------

    def _typed(self, kind: str, writer: dict[str, Any], reader: dict[str, Any], path: str) -> Inclusion:
        finite = _finite(writer)
        if finite is not None:
            return self._values(finite, writer, reader, path)
        if not _covers(reader, kind):
            if kind == "number" and _admits(reader, "integer"):
                return self._search(
                    writer, reader, path, f"{self.r} accepts only integers; {self.w} accepts any number"
                )
            allowed = reader.get("type")
            return self._refute(path, writer, f"{self.r} accepts only {_names(allowed)}; {self.w} has {kind} values")
        if "enum" in reader or "const" in reader:
            listed = reader["enum"] if "enum" in reader else [reader["const"]]
            return self._search(writer, reader, path, f"{self.r} allows only {show(listed)}; {self.w} allows more")
        if kind in _NUMERIC:
            return self._numbers(kind, writer, reader, path)
        if kind == "string":
            return self._strings(writer, reader, path)
        if kind == "array":
            return self._arrays(writer, reader, path)
        if kind == "object":
            return self._objects(writer, reader, path)
        return YES

    def _values(self, values: list[Any], writer: dict[str, Any], reader: dict[str, Any], path: str) -> Inclusion:
        undecided = False
        for value in values:
            mine = accepts(writer, value)
            if mine is False:
                continue
            verdict = accepts(reader, value)
            if verdict is False and mine is True:
                message = f"{self.r} rejects {show(value)}, which {self.w} allows"
                return Inclusion(False, (Reason(path, message),), Found(value))
            undecided = undecided or verdict is not True
        return self._undecided(path, f"kvlog cannot check {self.r}'s values exactly") if undecided else YES

    def _numbers(self, kind: str, writer: dict[str, Any], reader: dict[str, Any], path: str) -> Inclusion:
        integral = kind == "integer" or _integral_step(writer)
        w_low, w_high = _interval(writer, integral)
        r_low, r_high = _interval(reader, integral)
        within = _le(r_low, w_low, lower=True) and _le(w_high, r_high, lower=False)
        step_ok = _divides(reader.get("multipleOf"), writer.get("multipleOf"), integral)
        if within and step_ok:
            return YES
        what = []
        if not _le(r_low, w_low, lower=True):
            what.append(f"lower bound raised from {_bound(w_low, '>')} ({self.w}) to {_bound(r_low, '>')} ({self.r})")
        if not _le(w_high, r_high, lower=False):
            what.append(
                f"upper bound lowered from {_bound(w_high, '<')} ({self.w}) to {_bound(r_high, '<')} ({self.r})"
            )
        if not step_ok:
            what.append(f"{self.r} requires multiples of {reader.get('multipleOf')}")
        return self._search(writer, reader, path, "; ".join(what))

    def _strings(self, writer: dict[str, Any], reader: dict[str, Any], path: str) -> Inclusion:
        w_min, r_min = writer.get("minLength", 0), reader.get("minLength", 0)
        w_max, r_max = writer.get("maxLength"), reader.get("maxLength")
        lengths_ok = w_min >= r_min and (r_max is None or (w_max is not None and w_max <= r_max))
        w_pattern, r_pattern = writer.get("pattern"), reader.get("pattern")
        if lengths_ok and (r_pattern is None or r_pattern == w_pattern):
            return YES
        mine, theirs = regular.of(w_pattern, w_min, w_max), regular.of(r_pattern, r_min, r_max)
        if mine is None or theirs is None:
            mine, theirs = regular.of(w_pattern), regular.of(r_pattern)
            if mine is not None and theirs is not None and lengths_ok and mine.minus(theirs).empty():
                return YES
            reason = f"{self.r} requires pattern {show(r_pattern)}" if r_pattern != w_pattern else "length changed"
            return self._search(writer, reader, path, reason + "; kvlog cannot compare these patterns exactly")
        extra = mine.minus(theirs)
        if extra.empty():
            return YES
        detail = []
        if not lengths_ok:
            detail.append(f"length {_show_range(w_min, w_max)} ({self.w}) is not inside {_show_range(r_min, r_max)}")
        if r_pattern != w_pattern and r_pattern is not None:
            detail.append(f"{self.r} requires pattern {show(r_pattern)}")
        message = "; ".join(detail) or f"{self.r} rejects strings {self.w} accepts"
        for sample in extra.sample():
            if accepts(writer, sample) and accepts(reader, sample) is False:
                return Inclusion(False, (Reason(path, message),), Found(sample))
        return self._search(writer, reader, path, message)

    def _arrays(self, writer: dict[str, Any], reader: dict[str, Any], path: str) -> Inclusion:
        if "unevaluatedItems" in reader and "contains" in reader:
            return self._search(writer, reader, path, "unevaluatedItems beside contains")
        w_prefix, r_prefix = writer.get("prefixItems", []), reader.get("prefixItems", [])
        w_low, w_high = writer.get("minItems", 0), writer.get("maxItems", math.inf)
        if _item(writer, len(w_prefix)) is False:
            w_high = min(w_high, len(w_prefix))
        for index, member in enumerate(w_prefix):
            if member is False:
                w_high = min(w_high, index)
        if w_low > w_high:
            return YES
        r_low, r_high = reader.get("minItems", 0), reader.get("maxItems", math.inf)
        found: list[Inclusion] = []
        if w_low < r_low or w_high > r_high:
            message = f"item count {_show_range(w_low, w_high)} ({self.w}) is not inside {_show_range(r_low, r_high)}"
            found.append(self._search(writer, reader, path, message))
        if reader.get("uniqueItems") and not writer.get("uniqueItems") and w_high > 1:
            found.append(self._search(writer, reader, path, f"{self.r} requires unique items, {self.w} does not"))
        positions = max(len(w_prefix), len(r_prefix))
        for index in range(positions):
            if index >= w_high:
                break
            outcome = self.includes(_item(writer, index), _item(reader, index), f"{path}[{index}]")
            found.append(self._lift(outcome, writer, reader, index))
        if w_high > positions:
            outcome = self.includes(_item(writer, positions), _item(reader, positions), f"{path}[*]")
            found.append(self._lift(outcome, writer, reader, positions))
        if "contains" in reader:
            found.append(self._contains(writer, reader, path, w_low, w_high))
        return conjoin(found)

    def _contains(
        self, writer: dict[str, Any], reader: dict[str, Any], path: str, w_low: float, w_high: float
    ) -> Inclusion:
        need, limit = reader.get("minContains", 1), reader.get("maxContains", math.inf)
        wanted = reader["contains"]
        enough = need == 0
        if not enough and "contains" in writer and self.includes(writer["contains"], wanted).holds is True:
            enough = writer.get("minContains", 1) >= need
        if not enough:
            sure = sum(1 for i in range(int(min(w_low, 64))) if self.includes(_item(writer, i), wanted).holds is True)
            enough = sure >= need
        bounded = w_high <= limit
        if not bounded and writer.get("maxContains", math.inf) <= limit and "contains" in writer:
            bounded = self.includes(wanted, writer["contains"]).holds is True  # what new counts, old counted
        if not bounded and not writer.get("prefixItems"):
            bounded = self.disjoint(_item(writer, 0), wanted)  # no item of old matches at all
        if enough and bounded:
            return YES
        what = [] if enough else [f"{self.r} requires {need} item(s) matching 'contains' that {self.w} may lack"]
        what += [] if bounded else [f"{self.r} allows at most {limit} item(s) matching 'contains'; {self.w} more"]
        return self._search(writer, reader, path, "; ".join(what))

    def _objects(self, writer: dict[str, Any], reader: dict[str, Any], path: str) -> Inclusion:
        found: list[Inclusion] = []
        names = sorted(
            set(writer.get("properties", {}))
            | set(reader.get("properties", {}))
            | set(writer.get("required", []))
            | set(reader.get("required", []))
            | set(reader.get("dependentRequired", {}))
        )
        w_required = set(writer.get("required", []))
        for name in names:
            mine = self._member_schema(writer, name)
            here = f"{path}.{name}" if _plain(name) else f"{path}[{show(name)}]"
            if name in reader.get("required", []) and name not in w_required and not self._forced(writer, name):
                found.append(self._search(writer, reader, here, f"{self.r} requires {name}; {self.w} may lack it"))
            if mine is False:
                continue
            theirs = self._member_schema(reader, name)
            if theirs is False:
                message = f"{self.w} allows {name}, {self.r} rejects it (closed content model)"
                found.append(self._embed(self._refute(here, mine, message), writer, reader, name))
                continue
            outcome = self.includes(mine, theirs, here)
            if outcome.holds is False and outcome.witness is not None:
                outcome = self._embed(outcome, writer, reader, name)
            found.append(outcome)
        found.append(self._other_members(writer, reader, path, set(names)))
        found.append(self._property_names(writer, reader, path, set(names)))
        found.append(self._property_counts(writer, reader, path))
        for name, needs in reader.get("dependentRequired", {}).items():
            if self._member_schema(writer, name) is False:
                continue
            have = w_required | set(writer.get("dependentRequired", {}).get(name, []))
            missing = [n for n in needs if n not in have]
            if missing:
                message = f"{self.r} requires {', '.join(missing)} whenever {name} is present; {self.w} does not"
                found.append(self._lift_member(Inclusion(False, (Reason(path, message),)), writer, reader, path, name))
        return conjoin(found)

    def _forced(self, writer: dict[str, Any], name: str) -> bool:
        """Whether every object of ``writer`` has ``name``: closed to too few other names for its minProperties."""
        if not _closed(writer):
            return False
        others = [n for n in writer.get("properties", {}) if n != name and self._member_schema(writer, n) is not False]
        return bool(len(others) < writer.get("minProperties", 0))

    def _member_schema(self, schema: dict[str, Any], name: str) -> Any:
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
            applied.append(_leftover(schema, "additionalProperties", "unevaluatedProperties"))
        folded: Any = True
        for sub in applied:
            folded = merge(folded, sub)
        return folded

    def _other_members(self, writer: dict[str, Any], reader: dict[str, Any], path: str, named: set[str]) -> Inclusion:
        """Members no property names: each class of names the patterns carve out, compared as one."""
        patterns = sorted(set(writer.get("patternProperties", {})) | set(reader.get("patternProperties", {})))
        if _closed(writer):
            return YES
        w_rest = _leftover(writer, "additionalProperties", "unevaluatedProperties")
        r_rest = _leftover(reader, "additionalProperties", "unevaluatedProperties")
        if not patterns:
            if same(w_rest, r_rest) or r_rest is True or r_rest == {}:
                return YES
            outcome = self.includes(w_rest, r_rest, f"{path}.*")
            return self._lift_member(outcome, writer, reader, path, _fresh_name(writer, named))
        if len(patterns) > _MAX_PATTERN_CELLS:
            return self._search(writer, reader, path, "too many patternProperties to compare exactly")
        languages = {p: regular.of(p) for p in patterns}
        if any(language is None for language in languages.values()):
            return self._search(writer, reader, path, "a patternProperties pattern kvlog cannot compare exactly")
        everything = regular.of(None)
        assert everything is not None
        found = []
        for chosen in itertools.product((True, False), repeat=len(patterns)):
            cell = everything.fsm
            for pattern, inside in zip(patterns, chosen, strict=True):
                language = languages[pattern]
                assert language is not None
                cell = cell.intersection(language.fsm) if inside else cell.difference(language.fsm)
            names = [n for n in regular.Language(cell).sample(16) if n not in named]
            if not names:
                continue
            member_w = self._member_schema(writer, names[0])
            if member_w is False:
                continue
            outcome = self.includes(member_w, self._member_schema(reader, names[0]), f"{path}[{show(names[0])}]")
            found.append(self._lift_member(outcome, writer, reader, path, names[0]))
        return conjoin(found)

    def _property_names(self, writer: dict[str, Any], reader: dict[str, Any], path: str, named: set[str]) -> Inclusion:
        """Whether every member name the writer allows is one the reader's ``propertyNames`` accepts.

        The reasons are located at ``<path> property names`` whether the writer is closed or open: a
        name's length or pattern is not the object's own, which the bare ``path`` would claim.
        """
        if "propertyNames" not in reader:
            return YES
        wanted = reader["propertyNames"]
        here = f"{path} property names"
        closed = _leftover(writer, "additionalProperties", "unevaluatedProperties") is False
        if closed:
            outcomes = [
                self.includes({"const": n}, wanted, here)
                for n in sorted(writer.get("properties", {}))
                if self._member_schema(writer, n) is not False
            ]
            outcomes += [
                self.includes({"type": "string", "pattern": p}, wanted, here)
                for p in writer.get("patternProperties", {})
            ]
            outcome = conjoin(outcomes)
        else:
            outcome = self.includes(merge({"type": "string"}, writer.get("propertyNames", True)), wanted, here)
        if outcome.holds is False and outcome.witness is not None and isinstance(outcome.witness.value, str):
            return self._lift_member(
                Inclusion(False, outcome.reasons, None), writer, reader, path, outcome.witness.value
            )
        return outcome if outcome.holds is not False else self._search(writer, reader, here, _first(outcome))

    def _property_counts(self, writer: dict[str, Any], reader: dict[str, Any], path: str) -> Inclusion:
        w_low = max(writer.get("minProperties", 0), len(set(writer.get("required", []))))
        w_high = writer.get("maxProperties", math.inf)
        r_low, r_high = reader.get("minProperties", 0), reader.get("maxProperties", math.inf)
        if w_low >= r_low and w_high <= r_high:
            return YES
        if _closed(writer):
            w_high = min(w_high, sum(1 for n in writer.get("properties", {}) if writer["properties"][n] is not False))
            if w_low >= r_low and w_high <= r_high:
                return YES
        message = f"property count {_show_range(w_low, w_high)} ({self.w}) is not inside {_show_range(r_low, r_high)}"
        return self._search(writer, reader, path, message)

    # -- disjointness ------------------------------------------------------------------------------

    def disjoint(self, a: Any, b: Any) -> bool:
        """True only when no instance satisfies both (proven); False when not proven."""
        if a is False or b is False:
            return True
        if isinstance(b, dict) and set(b) == {"not"} and self.includes(a, b["not"]).holds is True:
            return True
        for kind, left in branches(a):
            for other, right in branches(b):
                if not self._disjoint_branches(kind, left, other, right):
                    return False
        return True

    def _disjoint_branches(self, kind: str, a: dict[str, Any], other: str, b: dict[str, Any]) -> bool:
        if kind != other and {kind, other} != {"integer", "number"}:
            return True
        for one, two in ((a, b), (b, a)):
            values = _finite(one)
            if values is not None and all(accepts(one, v) is False or accepts(two, v) is False for v in values):
                return True
        if kind == "object":
            # a member either side requires is in every instance of both, so both its schemas apply to it
            for name in sorted(set(a.get("required", [])) | set(b.get("required", []))):
                if self.disjoint(self._member_schema(a, name), self._member_schema(b, name)):
                    return True
        if kind == "string" and "pattern" in a and "pattern" in b:
            left_language, right_language = regular.of(a["pattern"]), regular.of(b["pattern"])
            if left_language is not None and right_language is not None:
                return bool(left_language.fsm.isdisjoint(right_language.fsm))
        if kind in _NUMERIC:
            a_low, a_high = _interval(a, False)
            b_low, b_high = _interval(b, False)
            return _before(a_high, b_low) or _before(b_high, a_low)
        return False

    # -- instances ---------------------------------------------------------------------------------

    def _search(self, writer: Any, reader: Any, path: str, message: str, around: Any = False) -> Inclusion:
        """Look for an instance of the writer the reader rejects: "no" with it, else undecided.

        ``around`` is a schema whose instances are likely to break (the writer meeting a reader's condition).
        """
        for value in candidates(writer) + candidates(around) + beyond(reader, writer):
            if accepts(writer, value) is True and accepts(reader, value) is False:
                return Inclusion(False, (Reason(path, message),), Found(value))
        return self._undecided(path, message)

    def _refute(self, path: str, writer: Any, message: str) -> Inclusion:
        for value in candidates(writer):
            if accepts(writer, value) is True:
                return Inclusion(False, (Reason(path, message),), Found(value))
        return self._undecided(path, message + " (kvlog found no instance of it)")

    def _undecided(self, path: str, message: str) -> Inclusion:
        return Inclusion(None, (Reason(path, f"{message}: kvlog cannot prove it safe"),))

    def _lift(self, outcome: Inclusion, writer: dict[str, Any], reader: dict[str, Any], index: int) -> Inclusion:
        """A break of the item at ``index`` (or any later one) becomes a break of an array holding it."""
        if outcome.holds is not False:
            return outcome
        values = [outcome.witness.value] if outcome.witness is not None else []
        for base in [b for b in candidates(writer) if isinstance(b, list)][:8]:
            for value in values:
                filler = [candidates(_item(writer, i))[:1] for i in range(len(base), index)]
                if any(not f for f in filler):
                    continue
                padded = base + [f[0] for f in filler]
                instance = [*padded[:index], value, *padded[index + 1 :]]
                if accepts(writer, instance) is True and accepts(reader, instance) is False:
                    return Inclusion(False, outcome.reasons, Found(instance))
        return Inclusion(
            None, tuple(Reason(r.path, f"{r.message}: kvlog cannot prove it safe") for r in outcome.reasons)
        )

    def _embed(self, outcome: Inclusion, writer: dict[str, Any], reader: dict[str, Any], name: str) -> Inclusion:
        return self._lift_member(Inclusion(False, outcome.reasons, outcome.witness), writer, reader, "", name)

    def _lift_member(
        self, outcome: Inclusion, writer: dict[str, Any], reader: dict[str, Any], path: str, name: str | None
    ) -> Inclusion:
        """A break inside member ``name`` becomes a break of an object holding it, validated against both."""
        if outcome.holds is not False or name is None:
            return outcome
        values = [outcome.witness.value] if outcome.witness is not None else []
        values += candidates(self._member_schema(writer, name))
        for base in candidates(writer)[:8]:
            if not isinstance(base, dict):
                continue
            for value in values[:12]:
                instance = {**base, name: value}
                if accepts(writer, instance) is True and accepts(reader, instance) is False:
                    return Inclusion(False, outcome.reasons, Found(instance))
        return Inclusion(
            None, tuple(Reason(r.path, f"{r.message}: kvlog cannot prove it safe") for r in outcome.reasons)
        )


_SCALAR_KEYS = {
    "string": frozenset({"type", "minLength", "maxLength", "pattern"}),
    "integer": frozenset({"type", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}),
    "number": frozenset({"type", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}),
}


def _union_outcome(kind: str, writer: dict[str, Any], members: list[Any]) -> Literal[True] | Found | None:
    """Whether anyOf ``members`` together cover the writer's strings or numbers: True, a value left out, or None.

    Only branches made of lengths and patterns (strings) or bounds (numbers) are joined; any other
    keyword leaves the question to the instance search.
    """
    keys = _SCALAR_KEYS.get(kind)
    if keys is None or not all(isinstance(m, dict) and set(m) <= keys and _covers(m, kind) for m in members):
        return None
    if kind == "string":
        mine = regular.of(writer.get("pattern"), writer.get("minLength", 0), writer.get("maxLength"))
        theirs = [regular.of(m.get("pattern"), m.get("minLength", 0), m.get("maxLength")) for m in members]
        if mine is None or any(t is None for t in theirs):
            return None
        rest = mine
        for language in theirs:
            assert language is not None
            rest = rest.minus(language)
        if rest.empty():
            return True
        left = rest.sample(1)
        return Found(left[0]) if left else None
    if writer.get("multipleOf") is not None:
        return None
    integral = kind == "integer"
    low, high = _interval(writer, integral)
    spans = sorted((_interval(m, integral) for m in members), key=lambda span: _key(span[0]))
    reached = low  # the lowest writer value not yet known to be covered, as a lower bound (None: -inf)
    for span_low, span_high in spans:
        if _empty_above(reached, high):
            return True
        if not _le(span_low, reached, lower=True):
            return Found(_point_between(reached, span_low, integral))  # a gap before this span
        if span_high is None:
            return True
        following = (span_high[0] + 1, True) if integral else (span_high[0], not span_high[1])
        if reached is None or _key(following) > _key(reached):
            reached = following
    return True if _empty_above(reached, high) else Found(_point_between(reached, None, integral))


def _key(bound: Any) -> tuple[int, Fraction, int]:
    """Orders lower bounds: -inf first, then by value, an inclusive bound before an exclusive one."""
    return (0, Fraction(0), 0) if bound is None else (1, bound[0], 0 if bound[1] else 1)


def _empty_above(reached: Any, high: Any) -> bool:
    """Whether nothing lies between lower bound ``reached`` and upper bound ``high``."""
    if reached is None or high is None:
        return False
    return bool(reached[0] > high[0] or (reached[0] == high[0] and not (reached[1] and high[1])))


def _point_between(reached: Any, next_low: Any, integral: bool) -> int | float:
    """A value at or just above ``reached`` and below ``next_low``: a value no span covers."""
    if reached is None:
        value = (next_low[0] - 1) if next_low is not None else Fraction(0)
    elif reached[1]:
        value = reached[0]
    elif next_low is not None and next_low[0] > reached[0]:
        value = (reached[0] + next_low[0]) / 2
    else:
        value = reached[0] + Fraction(1, 2)
    if integral or value.denominator == 1:
        return math.floor(value) if integral else int(value)
    return float(value)


def _conjuncts(schema: Any) -> list[Any]:
    """Subschemas every instance of ``schema`` satisfies as they stand: its allOf members and applicator groups."""
    if not isinstance(schema, dict):
        return []
    found = list(schema.get("allOf", []))
    for group in (("anyOf",), ("oneOf",), ("not",), ("if", "then", "else"), ("dependentSchemas",)):
        taken = {k: schema[k] for k in group if k in schema}
        if taken and not _evaluates(schema):
            found.append(taken)
    return found


def _first(outcome: Inclusion) -> str:
    return outcome.reasons[0].message if outcome.reasons else "the schemas differ"


def _leftover(schema: dict[str, Any], additional: str, unevaluated: str) -> Any:
    """What applies to members (or items) no other keyword names: additional*, else unevaluated*, else anything."""
    if additional in schema:
        return schema[additional]
    return schema.get(unevaluated, True)


def _closed(schema: dict[str, Any]) -> bool:
    """Whether an object of ``schema`` may hold only the members its ``properties`` name."""
    return _leftover(schema, "additionalProperties", "unevaluatedProperties") is False and not schema.get(
        "patternProperties"
    )


def _item(schema: dict[str, Any], index: int) -> Any:
    prefix = schema.get("prefixItems", [])
    if index < len(prefix):
        return prefix[index]
    if "items" in schema:
        return schema["items"]
    return schema.get("unevaluatedItems", True)


def _evaluates(schema: dict[str, Any]) -> bool:
    return "unevaluatedProperties" in schema or "unevaluatedItems" in schema


def _finite(schema: dict[str, Any]) -> list[Any] | None:
    if "const" in schema:
        return [schema["const"]]
    if "enum" in schema:
        return list(schema["enum"])
    kinds = _types(schema)
    if set(kinds) <= {"null", "boolean"}:
        return [v for k in kinds for v in ([None] if k == "null" else [False, True])]
    return None


def _number(value: Any) -> Fraction | None:
    if not json_number(value):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return Fraction(value)


def _interval(schema: dict[str, Any], integral: bool) -> tuple[Any, Any]:
    """(lower, upper) as (value, inclusive) pairs or None; integer bounds made inclusive."""
    low: tuple[Fraction, bool] | None = None
    high: tuple[Fraction, bool] | None = None
    for key, inclusive in (("minimum", True), ("exclusiveMinimum", False)):
        value = _number(schema.get(key))
        if value is not None and (low is None or value > low[0] or (value == low[0] and not inclusive)):
            low = (value, inclusive)
    for key, inclusive in (("maximum", True), ("exclusiveMaximum", False)):
        value = _number(schema.get(key))
        if value is not None and (high is None or value < high[0] or (value == high[0] and not inclusive)):
            high = (value, inclusive)
    if integral:
        if low is not None:
            low = (Fraction(math.ceil(low[0]) if low[1] else math.floor(low[0]) + 1), True)
        if high is not None:
            high = (Fraction(math.floor(high[0]) if high[1] else math.ceil(high[0]) - 1), True)
    return low, high


def _le(a: Any, b: Any, *, lower: bool) -> bool:
    """For lower bounds: reader ``a`` admits everything above writer ``b``; for upper ones the mirror."""
    if lower:
        if a is None:
            return True
        if b is None:
            return False
        return a[0] < b[0] or (a[0] == b[0] and (a[1] or not b[1]))
    if b is None:
        return True
    if a is None:
        return False
    return a[0] < b[0] or (a[0] == b[0] and (b[1] or not a[1]))


def _before(high: Any, low: Any) -> bool:
    if high is None or low is None:
        return False
    return high[0] < low[0] or (high[0] == low[0] and not (high[1] and low[1]))


def _integral_step(schema: dict[str, Any]) -> bool:
    step = _number(schema.get("multipleOf"))
    return step is not None and step.denominator == 1


def _divides(reader_step: Any, writer_step: Any, integral: bool) -> bool:
    r = _number(reader_step)
    if r is None:
        return True
    w = _number(writer_step)
    if w is None:
        return integral and r.numerator == 1 and r > 0
    return w % r == 0


def _bound(bound: Any, sign: str) -> str:
    if bound is None:
        return "none"
    value, inclusive = bound
    text = str(int(value)) if value.denominator == 1 else str(float(value))
    return f"{sign}{'=' if inclusive else ''} {text}"


def _show_range(low: Any, high: Any) -> str:
    """A length or count range, ``[2, 5]`` or ``[0, inf)``: whole, inclusive bounds (numbers' go through ``_bound``)."""

    def one(bound: Any, opening: bool) -> str:
        if bound is None or bound == math.inf:
            return "(-inf" if opening else "inf)"
        return f"[{bound}" if opening else f"{bound}]"

    return f"{one(low, True)}, {one(high, False)}"


def _names(declared: Any) -> str:
    return "|".join(declared) if isinstance(declared, list) else str(declared)


def _plain(name: str) -> bool:
    return name.isidentifier()


def _fresh_name(schema: dict[str, Any], named: set[str]) -> str | None:
    """A member name no property or pattern of ``schema`` claims, and that its propertyNames allow."""
    for name in itertools.chain(["extra", "x", "other"], (f"extra{i}" for i in range(50))):
        claimed = name in named or any(accepts({"pattern": p}, name) for p in schema.get("patternProperties", {}))
        if not claimed and ("propertyNames" not in schema or accepts(schema["propertyNames"], name) is True):
            return name
    return None
