"""Candidate instances of a schema, built from its structure: the raw material of every counterexample.

A breaking change is only shown when an instance proves it, and an instance is most useful when it
looks like a real event: the required fields with plausible values, and the one value that breaks.
``candidates(schema)`` proposes instances from the keywords (bounds and their neighbours, enum values,
strings of the pattern's language, objects with their required properties, arrays of the needed
length); it does not promise they are valid, so callers keep only those a validator accepts.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from fractions import Fraction
from functools import lru_cache
from typing import Any

import jsonschema_rs
import orjson

from kvlog.check import regular
from kvlog.schema.readings import json_number

_TYPES = ("object", "string", "integer", "number", "array", "boolean", "null")
# What string fields usually hold (names, times, ids), tried against a pattern before its automaton is built.
_USUAL_STRINGS = (
    "a",
    "kvlog",
    "x_1",
    "0",
    "A",
    "a-b",
    "2026-01-01T00:00:00Z",
    "2026-01-01T00:00:00.000000+00:00",
    "00000000-0000-0000-0000-000000000000",
    "",
)
_DEPTH = 4
_PER_TYPE = 6
# Instances stay small: a bound beyond this many characters, items or members proposes nothing there.
_MAX_SIZE = 4096
# Fractional candidates stay where floating point arithmetic is exact enough for every validator.
_TINY, _HUGE = Fraction(1, 10**12), Fraction(10**15)


def candidates(schema: Any, depth: int = _DEPTH) -> list[Any]:
    """Instances ``schema`` may accept, most typical first; never raises on odd keyword values.

    The same subschemas come up again and again in one comparison (a property's schema, for each
    object proposed around it), so answers are kept per schema text.
    """
    try:
        key = orjson.dumps(schema, option=orjson.OPT_SORT_KEYS)
    except (TypeError, orjson.JSONEncodeError):
        return _fresh_candidates(schema, depth)
    return list(_cached_candidates(key, depth))


@lru_cache(maxsize=4096)
def _cached_candidates(key: bytes, depth: int) -> tuple[Any, ...]:
    return tuple(_fresh_candidates(orjson.loads(key), depth))


def _fresh_candidates(schema: Any, depth: int) -> list[Any]:
    seen: list[Any] = []
    try:
        for value in _candidates(schema, depth):
            if not any(same(value, known) for known in seen):
                seen.append(value)
            if len(seen) >= 48:
                break
    except (TypeError, ValueError, ArithmeticError, OverflowError, RecursionError):
        pass
    return seen


def beyond(reader: Any, writer: Any) -> list[Any]:
    """Instances shaped by ``writer`` just outside ``reader``'s limits: where a tightened bound breaks."""
    try:
        return _beyond(reader, writer)
    except (TypeError, ValueError, ArithmeticError, RecursionError):  # odd keyword values propose nothing
        return []


def _beyond(reader: Any, writer: Any) -> list[Any]:
    if not isinstance(reader, dict):
        return []
    found: list[Any] = []
    for key, step in (("maximum", 1), ("exclusiveMaximum", 0), ("minimum", -1), ("exclusiveMinimum", 0)):
        bound = reader.get(key)
        if json_number(bound) and math.isfinite(bound):
            near = [bound + step, bound + step / 2, bound]
            found += [v for v in near if isinstance(v, int) or v == 0 or _TINY < abs(Fraction(v)) < _HUGE]
    found += [10**20, -(10**20)]
    longest, shortest = reader.get("maxLength"), reader.get("minLength")
    if isinstance(longest, int) and 0 <= longest < _MAX_SIZE:
        found.append("a" * (longest + 1))
    if isinstance(shortest, int) and 0 < shortest <= _MAX_SIZE:
        found.append("a" * (shortest - 1))
    items = candidates(writer.get("items", True) if isinstance(writer, dict) else True, 2)[:1] or [None]
    for key, step in (("maxItems", 1), ("minItems", -1)):
        count = reader.get(key)
        if isinstance(count, int) and 0 <= count + step <= _MAX_SIZE:
            found.append([items[0]] * (count + step))
    counted = candidates(reader.get("contains", False), 2)[:2]
    for key, step in (("maxContains", 1), ("minContains", -1)):
        count = reader.get(key)
        if isinstance(count, int) and 0 <= count + step <= _MAX_SIZE:
            found += [[value] * (count + step) for value in counted]
    for key, step in (("maxProperties", 1), ("minProperties", -1)):
        count = reader.get(key)
        if isinstance(count, int) and 0 <= count + step <= _MAX_SIZE:
            found += _objects_of_size(writer, count + step)
    return found


def _objects_of_size(writer: Any, size: int) -> list[Any]:
    """Objects of ``writer`` with exactly ``size`` members: its own properties first, then fresh names."""
    out = []
    for base in [c for c in candidates(writer, 2) if isinstance(c, dict)][:3]:
        instance = dict(list(base.items())[:size])
        extra = writer.get("additionalProperties", True) if isinstance(writer, dict) else True
        value = (candidates(extra, 1) or [None])[0]
        index = 0
        while len(instance) < size:
            instance.setdefault(f"extra{index}", value)
            index += 1
        out.append(instance)
    return out


def fragile(schema: Any, value: Any) -> bool:
    """Whether validators may disagree on ``value``: a number over a fractional ``multipleOf`` 2**53 times or more.

    ``0.5 / 6.4e-25`` is a whole float in Python's jsonschema and not a multiple in jsonschema-rs;
    such an instance proves nothing either way.
    """
    try:
        steps = _fractional_steps(orjson.dumps(schema, option=orjson.OPT_SORT_KEYS))
    except (TypeError, orjson.JSONEncodeError):
        return False
    if not steps:
        return False
    numbers = [abs(Fraction(v)) for v in _numbers_in(value)]
    return any(n / step >= 2**53 for n in numbers for step in steps)


@lru_cache(maxsize=2048)
def _fractional_steps(key: bytes) -> tuple[Fraction, ...]:
    if b"multipleOf" not in key:
        return ()
    return tuple(abs(Fraction(m)) for m in _keyword_values(orjson.loads(key), "multipleOf") if _fractional(m))


def _fractional(value: Any) -> bool:
    return isinstance(value, float) and math.isfinite(value) and value > 0 and not value.is_integer()


def _keyword_values(schema: Any, keyword: str) -> Iterator[Any]:
    if isinstance(schema, dict):
        for key, sub in schema.items():
            if key == keyword:
                yield sub
            yield from _keyword_values(sub, keyword)
    elif isinstance(schema, list):
        for sub in schema:
            yield from _keyword_values(sub, keyword)


def _numbers_in(value: Any) -> Iterator[int | float]:
    if json_number(value) and (isinstance(value, int) or math.isfinite(value)):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from _numbers_in(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _numbers_in(item)


def same(a: Any, b: Any) -> bool:
    """JSON equality: ``1 == 1.0`` but ``true != 1``, and containers compared member by member."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def _candidates(schema: Any, depth: int) -> Iterator[Any]:
    if schema is False:
        return
    if schema is True or not isinstance(schema, dict):
        yield from (None, 0, "", {}, [], True)
        return
    if "const" in schema:
        yield schema["const"]
        return
    if isinstance(schema.get("enum"), list):
        yield from schema["enum"]
        return
    for key in ("allOf", "anyOf", "oneOf"):
        members = schema.get(key)
        if isinstance(members, list) and members and depth > 0:
            rest = {k: v for k, v in schema.items() if k != key}
            for member in members if key != "allOf" else [_merged(members)]:
                yield from _candidates(_merged([rest, member]), depth - 1)
    if isinstance(schema.get("then"), dict | bool) and depth > 0:
        rest = {k: v for k, v in schema.items() if k not in ("if", "then", "else")}
        yield from _candidates(_merged([rest, schema.get("if", True), schema["then"]]), depth - 1)
    declared = schema.get("type")
    types = [declared] if isinstance(declared, str) else declared if isinstance(declared, list) else _TYPES
    for kind in types:
        producer = _PRODUCERS.get(kind)
        if producer is not None:
            yield from producer(schema, depth)


def _merged(members: list[Any]) -> dict[str, Any]:
    """A rough conjunction for proposing instances (later members win on clashes; the validator judges)."""
    out: dict[str, Any] = {}
    for member in members:
        if isinstance(member, dict):
            for key, value in member.items():
                if key == "required" and isinstance(value, list):
                    out[key] = list(dict.fromkeys([*out.get(key, []), *value]))
                elif key == "properties" and isinstance(value, dict):
                    out[key] = {**out.get(key, {}), **value}
                else:
                    out[key] = value
    return out


def _numbers(schema: dict[str, Any], integer: bool) -> Iterator[Any]:
    points: list[Fraction] = [Fraction(0), Fraction(1), Fraction(-1), Fraction(1, 2)]
    for key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        bound = schema.get(key)
        if json_number(bound) and math.isfinite(bound):
            value = Fraction(bound)
            points += [value, value + 1, value - 1, value + Fraction(1, 2), value - Fraction(1, 2)]
    step = schema.get("multipleOf")
    if json_number(step) and step > 0 and math.isfinite(step):
        unit = Fraction(step)
        points = [round(p / unit) * unit for p in points] + [unit * k for k in (1, 2, 3, -1, 7)]
    low = _bound(schema, "minimum", "exclusiveMinimum", max)
    high = _bound(schema, "maximum", "exclusiveMaximum", min)
    inside = [p for p in points if (low is None or p >= low) and (high is None or p <= high)]
    ordered = sorted(dict.fromkeys(inside), key=lambda p: (abs(p), p)) + sorted(set(points) - set(inside))
    count = 0
    for point in ordered:
        if integer and point.denominator != 1:
            continue
        if point.denominator != 1 and not _TINY < abs(point) < _HUGE:
            continue  # validators disagree on such floats (5e-324 / 2 underflows to 0 in Python's)
        yield int(point) if point.denominator == 1 else float(point)
        count += 1
        if count >= 2 * _PER_TYPE:
            return


def _bound(schema: dict[str, Any], inclusive: str, exclusive: str, pick: Any) -> Fraction | None:
    found = [Fraction(schema[key]) for key in (inclusive, exclusive) if json_number(schema.get(key))]
    return pick(found) if found else None


def _strings(schema: dict[str, Any], depth: int) -> Iterator[Any]:
    low = schema.get("minLength", 0) if isinstance(schema.get("minLength"), int) else 0
    high = schema.get("maxLength") if isinstance(schema.get("maxLength"), int) else None
    pattern = schema.get("pattern") if isinstance(schema.get("pattern"), str) else None
    if pattern is not None:
        longest = high if high is not None else _MAX_SIZE
        usual = [text for text in _USUAL_STRINGS if low <= len(text) <= longest and _matches(pattern, text)]
        if usual:  # building the pattern's automaton costs far more than trying what strings usually are
            yield from usual
        else:
            language = regular.of(pattern, low, high)
            yield from language.sample(_PER_TYPE) if language is not None else ()
    for length in dict.fromkeys([low, high if high is not None else low + 3, low + 1, 0]):
        if length is not None and 0 <= length <= _MAX_SIZE and (high is None or length <= high):
            yield "a" * length
    yield "kvlog"


@lru_cache(maxsize=256)
def _pattern_check(pattern: str) -> Any:
    try:
        return jsonschema_rs.validator_for({"pattern": pattern}, pattern_options=jsonschema_rs.RegexOptions())
    except (jsonschema_rs.ValidationError, ValueError):
        return None


def _matches(pattern: str, text: str) -> bool:
    check = _pattern_check(pattern)
    return check is not None and bool(check.is_valid(text))


def _arrays(schema: dict[str, Any], depth: int) -> Iterator[Any]:
    if depth <= 0:
        yield []
        return
    prefix: list[Any] = schema["prefixItems"] if isinstance(schema.get("prefixItems"), list) else []
    items = schema.get("items", True)
    low = schema.get("minItems", 0) if isinstance(schema.get("minItems"), int) else 0
    high = schema.get("maxItems") if isinstance(schema.get("maxItems"), int) else None
    contains = schema.get("contains")
    for length in dict.fromkeys([low, max(low, len(prefix)), low + 1, low + 2, high or 0]):
        if (high is not None and length > high) or length > _MAX_SIZE:
            continue
        options = [candidates(prefix[i] if i < len(prefix) else items, depth - 1) for i in range(length)]
        if any(not option for option in options):
            continue
        yield [option[0] for option in options]
        if schema.get("uniqueItems"):
            yield [option[min(i, len(option) - 1)] for i, option in enumerate(options)]
        if contains is not None and length:
            for found in candidates(contains, depth - 1)[:2]:
                yield [found] + [option[0] for option in options[1:]]
    if contains is not None:
        yield from ([found] for found in candidates(contains, depth - 1)[:2])


def _objects(schema: dict[str, Any], depth: int) -> Iterator[Any]:
    if depth <= 0:
        yield {}
        return
    properties: dict[str, Any] = schema["properties"] if isinstance(schema.get("properties"), dict) else {}
    required = [name for name in schema.get("required", []) if isinstance(name, str)]
    base: dict[str, Any] = {}
    for name in required:
        options = candidates(properties.get(name, schema.get("additionalProperties", True)), depth - 1)
        if options:
            base[name] = options[0]
    yield dict(base)
    optional = [name for name in properties if name not in base and properties[name] is not False]
    for name in optional:
        options = candidates(properties[name], depth - 1)
        if options:
            yield {**base, name: options[0]}
    full = dict(base)
    for name in optional:
        options = candidates(properties[name], depth - 1)
        if options:
            full[name] = options[0]
    yield full
    for needs in (schema.get("dependentRequired") or {}).values():
        if isinstance(needs, list):
            yield {**full, **{n: 0 for n in needs if n not in full}}
    low = schema.get("minProperties", 0) if isinstance(schema.get("minProperties"), int) else 0
    if len(full) < low <= _MAX_SIZE:
        yield {**full, **{f"p{i}": 0 for i in range(low - len(full))}}


_PRODUCERS: dict[str, Any] = {
    "null": lambda schema, depth: iter([None]),
    "boolean": lambda schema, depth: iter([True, False]),
    "integer": lambda schema, depth: _numbers(schema, integer=True),
    "number": lambda schema, depth: _numbers(schema, integer=False),
    "string": _strings,
    "array": _arrays,
    "object": _objects,
}
