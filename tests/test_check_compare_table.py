"""A table of schema changes, keyword by keyword and draft by draft, that ``kvlog.check.compare`` must classify.

Why the table exists: ``kvlog check`` gates releases on ``compare``'s verdict, so the verdict must be
one users can trust for every draft that real catalogs use (draft-04, -06, -07, 2019-09, 2020-12), and
for a keyword whose meaning changes between drafts (tuples, ``exclusiveMaximum``, ``dependencies``,
``$ref`` siblings, keywords a draft does not define) in each draft's own meaning. Each row was written
from the JSON Schema specification. The truth of a row comes from a witness search, not from any peer
registry: instances of the old schema (a structural candidate list, plus ``hypothesis-jsonschema`` where
it can read the schema) are checked with the reference ``jsonschema`` validators of the row's drafts;
one that the old schema accepts and the new one rejects makes the change breaking, none makes it
compatible. The test checks the written expectation against that truth (a wrong row fails), then
kvlog's verdict against the expectation, and every counterexample kvlog shows against the reference
validators. Rows marked "undecided" are patterns kvlog is documented not to compare (lookahead,
backreferences, more patternProperties than it splits into classes): there kvlog may stay undecided,
but a verdict it does give must match the truth.
"""

from __future__ import annotations

import functools
import itertools
import json
from collections.abc import Callable, Iterator
from typing import Any, Literal

import jsonschema
import jsonschema.validators
import pytest
from hypothesis import HealthCheck, Phase, find, settings
from hypothesis.errors import HypothesisException, NoSuchExample
from hypothesis_jsonschema import from_schema
from hypothesis_jsonschema._canonicalise import HypothesisRefResolutionError
from referencing.exceptions import Unresolvable

from kvlog.check import compare
from kvlog.schema.walk import Draft

Expected = Literal["compatible", "breaking", "undecided"]
Case = tuple[str, Draft, Any, Any, Expected]

DRAFTS: tuple[Draft, ...] = ("draft-04", "draft-06", "draft-07", "2019-09", "2020-12")
FROM_06: tuple[Draft, ...] = DRAFTS[1:]
FROM_07: tuple[Draft, ...] = DRAFTS[2:]
FROM_2019: tuple[Draft, ...] = DRAFTS[3:]
UP_TO_07: tuple[Draft, ...] = DRAFTS[:3]
REFERENCE: dict[Draft, type[jsonschema.protocols.Validator]] = {
    "draft-04": jsonschema.Draft4Validator,
    "draft-06": jsonschema.Draft6Validator,
    "draft-07": jsonschema.Draft7Validator,
    "2019-09": jsonschema.Draft201909Validator,
    "2020-12": jsonschema.Draft202012Validator,
}
URI: dict[Draft, str] = {
    "draft-04": "http://json-schema.org/draft-04/schema#",
    "draft-06": "http://json-schema.org/draft-06/schema#",
    "draft-07": "http://json-schema.org/draft-07/schema#",
    "2019-09": "https://json-schema.org/draft/2019-09/schema",
    "2020-12": "https://json-schema.org/draft/2020-12/schema",
}

S: dict[str, Any] = {"type": "string"}
N: dict[str, Any] = {"type": "number"}
I: dict[str, Any] = {"type": "integer"}  # noqa: E741
B: dict[str, Any] = {"type": "boolean"}


# ---------------------------------------------------------------------------------------------- helpers


def tup(draft: Draft, prefix: list[Any], rest: Any = None) -> dict[str, Any]:
    """An array whose first items follow ``prefix``, the others ``rest`` (anything when None), in ``draft``'s form."""
    if draft == "2020-12":
        schema: dict[str, Any] = {"type": "array", "prefixItems": prefix}
        if rest is not None:
            schema["items"] = rest
        return schema
    schema = {"type": "array", "items": prefix}
    if rest is not None:
        schema["additionalItems"] = rest
    return schema


def defs_key(draft: Draft) -> str:
    """Where a draft keeps reusable subschemas: ``definitions`` up to draft-07, ``$defs`` from 2019-09."""
    return "definitions" if draft in UP_TO_07 else "$defs"


def with_ref(draft: Draft, target: Any, **siblings: Any) -> dict[str, Any]:
    """A schema that is ``$ref`` to ``target`` in the draft's definitions, with sibling keywords."""
    key = defs_key(draft)
    return {key: {"t": target}, "$ref": f"#/{key}/t", **siblings}


def dynamic_ref(target: Any) -> dict[str, Any]:
    """A 2020-12 schema that is ``$dynamicRef`` to a ``$dynamicAnchor`` on ``target``."""
    return {"$defs": {"n": {"$dynamicAnchor": "n", **target}}, "$dynamicRef": "#n"}


def requires_key(draft: Draft) -> str:
    """Where a draft says "if this member is present, these must be too": ``dependencies`` up to draft-07."""
    return "dependencies" if draft in UP_TO_07 else "dependentRequired"


def lt(draft: Draft, bound: float) -> dict[str, Any]:
    """``x < bound`` in the draft's form: a flag on ``maximum`` in draft-04, a number from draft-06."""
    return {"maximum": bound, "exclusiveMaximum": True} if draft == "draft-04" else {"exclusiveMaximum": bound}


def gt(draft: Draft, bound: float) -> dict[str, Any]:
    """``x > bound`` in the draft's form."""
    return {"minimum": bound, "exclusiveMinimum": True} if draft == "draft-04" else {"exclusiveMinimum": bound}


def obj(props: dict[str, Any], required: list[str] | None = None, extra: Any = None) -> dict[str, Any]:
    """An object schema with ``properties``, ``required`` and ``additionalProperties`` (left out when None)."""
    schema: dict[str, Any] = {"type": "object", "properties": props}
    if required:
        schema["required"] = required
    if extra is not None:
        schema["additionalProperties"] = extra
    return schema


def each(drafts: tuple[Draft, ...], name: str, make: Callable[[Draft], tuple[Any, Any, Expected]]) -> Iterator[Case]:
    """The same change written in each of ``drafts``."""
    for draft in drafts:
        old, new, expected = make(draft)
        yield name, draft, old, new, expected


def same_in(drafts: tuple[Draft, ...], name: str, old: Any, new: Any, expected: Expected) -> Iterator[Case]:
    """A change whose schemas read the same in each of ``drafts``."""
    return each(drafts, name, lambda _: (old, new, expected))


def tagged(old: Any, draft: Draft) -> Any:
    """``old`` with ``$schema`` naming ``draft``."""
    return {"$schema": URI[draft], **old}


# ------------------------------------------------------------------------------------------------ cases


def type_cases() -> Iterator[Case]:
    yield from same_in(DRAFTS, "types/integer-to-number", I, N, "compatible")
    yield from same_in(DRAFTS, "types/number-to-integer", N, I, "breaking")
    yield from same_in(DRAFTS, "types/string-to-number", S, N, "breaking")
    yield from same_in(DRAFTS, "types/add-null-to-list", S, {"type": ["string", "null"]}, "compatible")
    yield from same_in(DRAFTS, "types/drop-null-from-list", {"type": ["string", "null"]}, S, "breaking")
    yield from same_in(
        DRAFTS, "types/list-reordered", {"type": ["null", "integer"]}, {"type": ["integer", "null"]}, "compatible"
    )
    yield from same_in(
        DRAFTS,
        "types/integer-into-number-list",
        {"type": ["integer", "string"]},
        {"type": ["number", "string"]},
        "compatible",
    )
    yield from same_in(
        DRAFTS,
        "types/number-list-to-integer-list",
        {"type": ["number", "null"]},
        {"type": ["integer", "null"]},
        "breaking",
    )
    yield from same_in(DRAFTS, "types/any-to-object", {}, {"type": "object"}, "breaking")
    yield from same_in(DRAFTS, "types/object-to-any", {"type": "object"}, {}, "compatible")


def enum_const_cases() -> Iterator[Case]:
    yield from same_in(DRAFTS, "enum/add-value", {"enum": ["a", "b"]}, {"enum": ["a", "b", "c"]}, "compatible")
    yield from same_in(DRAFTS, "enum/remove-value", {"enum": ["a", "b"]}, {"enum": ["a"]}, "breaking")
    yield from same_in(DRAFTS, "enum/to-type", {"enum": [1, 2]}, I, "compatible")
    yield from same_in(DRAFTS, "enum/mixed-to-type", {"enum": ["a", 1]}, S, "breaking")
    yield from same_in(DRAFTS, "enum/boolean-type-to-enum", B, {"enum": [True, False]}, "compatible")
    yield from same_in(DRAFTS, "enum/null-into-enum", {"enum": ["a", None]}, {"enum": ["a"]}, "breaking")
    yield from same_in(
        DRAFTS, "enum/inside-bounds", {"enum": [1, 5]}, {"type": "integer", "minimum": 1, "maximum": 5}, "compatible"
    )
    yield from same_in(FROM_06, "const/to-enum", {"const": "a"}, {"enum": ["a", "b"]}, "compatible")
    yield from same_in(FROM_06, "const/from-enum", {"enum": ["a", "b"]}, {"const": "a"}, "breaking")
    yield from same_in(FROM_06, "const/integer-to-type", {"const": 1}, I, "compatible")
    yield from same_in(FROM_06, "const/fraction-to-integer", {"const": 1.5}, I, "breaking")
    yield from same_in(
        FROM_06, "const/string-vs-maxLength", {"const": "abc"}, {"type": "string", "maxLength": 2}, "breaking"
    )
    yield from same_in(FROM_06, "const/changed", {"const": "a"}, {"const": "b"}, "breaking")
    yield from same_in(
        FROM_06, "const/object-vs-required", {"const": {"a": 1}}, {"type": "object", "required": ["a"]}, "compatible"
    )


def numeric_cases() -> Iterator[Case]:
    yield from same_in(("draft-04",), "const/not-a-draft-04-keyword", N, {"type": "number", "const": 1}, "compatible")
    yield from same_in(
        DRAFTS, "bounds/raise-minimum", {"type": "number", "minimum": 0}, {"type": "number", "minimum": 1}, "breaking"
    )
    yield from same_in(
        DRAFTS, "bounds/lower-minimum", {"type": "number", "minimum": 1}, {"type": "number", "minimum": 0}, "compatible"
    )
    yield from same_in(
        DRAFTS,
        "bounds/lower-maximum",
        {"type": "number", "maximum": 100},
        {"type": "number", "maximum": 10},
        "breaking",
    )
    yield from same_in(
        DRAFTS,
        "bounds/raise-maximum",
        {"type": "number", "maximum": 10},
        {"type": "number", "maximum": 100},
        "compatible",
    )
    yield from same_in(DRAFTS, "bounds/on-untyped", {"maximum": 10}, {"type": "number", "maximum": 10}, "breaking")
    yield from each(
        DRAFTS,
        "bounds/inclusive-to-exclusive-max",
        lambda d: ({"type": "number", "maximum": 10}, {"type": "number", **lt(d, 10)}, "breaking"),
    )
    yield from each(
        DRAFTS,
        "bounds/exclusive-to-inclusive-max",
        lambda d: ({"type": "number", **lt(d, 10)}, {"type": "number", "maximum": 10}, "compatible"),
    )
    yield from each(
        DRAFTS,
        "bounds/inclusive-to-exclusive-min",
        lambda d: ({"type": "number", "minimum": 0}, {"type": "number", **gt(d, 0)}, "breaking"),
    )
    yield from each(
        DRAFTS,
        "bounds/exclusive-to-inclusive-min",
        lambda d: ({"type": "number", **gt(d, 0)}, {"type": "number", "minimum": 0}, "compatible"),
    )
    yield from each(
        DRAFTS,
        "bounds/integer-exclusive-is-inclusive-below",
        lambda d: ({"type": "integer", **lt(d, 10)}, {"type": "integer", "maximum": 9}, "compatible"),
    )
    yield from each(
        DRAFTS,
        "bounds/number-exclusive-is-not-inclusive-below",
        lambda d: ({"type": "number", **lt(d, 10)}, {"type": "number", "maximum": 9}, "breaking"),
    )
    yield from same_in(
        ("draft-04",),
        "bounds/draft-04-exclusive-flag-true-to-false",
        {"type": "number", "minimum": 0, "exclusiveMinimum": True},
        {"type": "number", "minimum": 0, "exclusiveMinimum": False},
        "compatible",
    )
    yield from same_in(
        ("draft-04",),
        "bounds/draft-04-exclusive-flag-false-to-true",
        {"type": "number", "maximum": 5, "exclusiveMaximum": False},
        {"type": "number", "maximum": 5, "exclusiveMaximum": True},
        "breaking",
    )
    yield from same_in(
        DRAFTS,
        "multipleOf/4-to-2",
        {"type": "integer", "multipleOf": 4},
        {"type": "integer", "multipleOf": 2},
        "compatible",
    )
    yield from same_in(
        DRAFTS,
        "multipleOf/2-to-4",
        {"type": "integer", "multipleOf": 2},
        {"type": "integer", "multipleOf": 4},
        "breaking",
    )
    yield from same_in(
        DRAFTS,
        "multipleOf/2-to-3",
        {"type": "integer", "multipleOf": 2},
        {"type": "integer", "multipleOf": 3},
        "breaking",
    )
    yield from same_in(DRAFTS, "multipleOf/add-1-to-number", N, {"type": "number", "multipleOf": 1}, "breaking")
    yield from same_in(
        DRAFTS,
        "multipleOf/halves-to-quarters",
        {"type": "number", "multipleOf": 0.5},
        {"type": "number", "multipleOf": 0.25},
        "compatible",
    )
    yield from same_in(DRAFTS, "multipleOf/removed", {"type": "integer", "multipleOf": 3}, I, "compatible")


def string_cases() -> Iterator[Case]:
    yield from same_in(
        DRAFTS, "minLength/raised", {"type": "string", "minLength": 0}, {"type": "string", "minLength": 1}, "breaking"
    )
    yield from same_in(
        DRAFTS,
        "minLength/lowered",
        {"type": "string", "minLength": 2},
        {"type": "string", "minLength": 1},
        "compatible",
    )
    yield from same_in(
        DRAFTS, "maxLength/lowered", {"type": "string", "maxLength": 4}, {"type": "string", "maxLength": 2}, "breaking"
    )
    yield from same_in(
        DRAFTS, "maxLength/raised", {"type": "string", "maxLength": 2}, {"type": "string", "maxLength": 4}, "compatible"
    )
    yield from same_in(
        DRAFTS,
        "pattern/identical",
        {"type": "string", "pattern": "^[a-z]+$"},
        {"type": "string", "pattern": "^[a-z]+$"},
        "compatible",
    )
    yield from same_in(
        DRAFTS, "pattern/unanchored-star-accepts-all", S, {"type": "string", "pattern": "a*"}, "compatible"
    )
    yield from same_in(DRAFTS, "pattern/added-anchored", S, {"type": "string", "pattern": "^abc$"}, "breaking")
    yield from same_in(
        DRAFTS,
        "pattern/literal-to-prefix",
        {"type": "string", "pattern": "^abc$"},
        {"type": "string", "pattern": "^ab"},
        "compatible",
    )
    yield from same_in(
        DRAFTS,
        "pattern/prefix-to-literal",
        {"type": "string", "pattern": "^ab"},
        {"type": "string", "pattern": "^abc$"},
        "breaking",
    )
    yield from same_in(
        DRAFTS,
        "pattern/prefix-longer",
        {"type": "string", "pattern": "^ab"},
        {"type": "string", "pattern": "^abc"},
        "breaking",
    )
    yield from same_in(
        DRAFTS,
        "pattern/prefix-shorter",
        {"type": "string", "pattern": "^abc"},
        {"type": "string", "pattern": "^ab"},
        "compatible",
    )
    yield from same_in(
        DRAFTS,
        "pattern/class-widened",
        {"type": "string", "pattern": "^[a-z]+$"},
        {"type": "string", "pattern": "^[a-zA-Z]+$"},
        "compatible",
    )
    yield from same_in(
        DRAFTS,
        "pattern/class-narrowed",
        {"type": "string", "pattern": "^[a-zA-Z]+$"},
        {"type": "string", "pattern": "^[a-z]+$"},
        "breaking",
    )
    yield from same_in(
        DRAFTS,
        "pattern/fixed-count-to-plus",
        {"type": "string", "pattern": "^[0-9]{3}$"},
        {"type": "string", "pattern": "^[0-9]+$"},
        "compatible",
    )
    yield from same_in(
        DRAFTS,
        "pattern/plus-to-fixed-count",
        {"type": "string", "pattern": "^[0-9]+$"},
        {"type": "string", "pattern": "^[0-9]{3}$"},
        "breaking",
    )
    yield from same_in(
        DRAFTS,
        "pattern/alternation-dropped",
        {"type": "string", "pattern": "^(ab|x)$"},
        {"type": "string", "pattern": "^ab$"},
        "breaking",
    )
    yield from same_in(
        DRAFTS, "pattern/only-constrains-strings", {"pattern": "^a"}, {"type": "string", "pattern": "^a"}, "breaking"
    )
    yield from same_in(
        DRAFTS,
        "pattern/covers-maxLength",
        {"type": "string", "maxLength": 3, "pattern": "^a+$"},
        {"type": "string", "pattern": "^a{1,3}$"},
        "compatible",
    )
    yield from same_in(
        DRAFTS,
        "pattern/lookahead-widened",
        {"type": "string", "pattern": "^(?=ab)"},
        {"type": "string", "pattern": "^(?=a)"},
        "undecided",
    )
    yield from same_in(
        DRAFTS,
        "pattern/backreference-widened",
        {"type": "string", "pattern": "^(a)\\1b"},
        {"type": "string", "pattern": "^(a)\\1"},
        "undecided",
    )
    yield from same_in(
        DRAFTS,
        "pattern/lookahead-narrowed",
        {"type": "string", "pattern": "^(?=a)"},
        {"type": "string", "pattern": "^(?=ab)"},
        "undecided",
    )
    yield from same_in(
        DRAFTS,
        "pattern/backreference-narrowed",
        {"type": "string", "pattern": "^(a)\\1"},
        {"type": "string", "pattern": "^(a)\\1b"},
        "undecided",
    )
    yield from same_in(DRAFTS, "format/added", S, {"type": "string", "format": "date-time"}, "compatible")
    yield from same_in(
        DRAFTS,
        "format/changed",
        {"type": "string", "format": "email"},
        {"type": "string", "format": "ipv4"},
        "compatible",
    )


def array_cases() -> Iterator[Case]:
    yield from same_in(
        DRAFTS, "items/narrowed", {"type": "array", "items": N}, {"type": "array", "items": I}, "breaking"
    )
    yield from same_in(
        DRAFTS, "items/widened", {"type": "array", "items": I}, {"type": "array", "items": N}, "compatible"
    )
    yield from same_in(DRAFTS, "items/added", {"type": "array"}, {"type": "array", "items": S}, "breaking")
    yield from each(DRAFTS, "tuple/open-gains-position", lambda d: (tup(d, [S]), tup(d, [S, N]), "breaking"))
    yield from each(
        DRAFTS, "tuple/closed-gains-position", lambda d: (tup(d, [S, N], False), tup(d, [S, N, B], False), "compatible")
    )
    yield from each(
        DRAFTS, "tuple/closed-loses-position", lambda d: (tup(d, [S, N, N], False), tup(d, [S, N], False), "breaking")
    )
    yield from each(
        DRAFTS, "tuple/rest-moved-into-position", lambda d: (tup(d, [S], N), tup(d, [S, N], N), "compatible")
    )
    yield from each(DRAFTS, "tuple/rest-narrowed", lambda d: (tup(d, [S], N), tup(d, [S], S), "breaking"))
    yield from each(
        DRAFTS, "tuple/position-widened", lambda d: (tup(d, [I, S], False), tup(d, [N, S], False), "compatible")
    )
    yield from each(
        DRAFTS, "tuple/position-narrowed", lambda d: (tup(d, [N, S], False), tup(d, [I, S], False), "breaking")
    )
    yield from each(
        DRAFTS, "tuple/closed-to-items", lambda d: (tup(d, [S, S], False), {"type": "array", "items": S}, "compatible")
    )
    yield from each(
        DRAFTS, "tuple/items-to-tuple", lambda d: ({"type": "array", "items": S}, tup(d, [S], False), "breaking")
    )
    yield from same_in(
        DRAFTS[:4],
        "tuple/additionalItems-ignored-beside-items-schema",
        {"type": "array", "items": S},
        {"type": "array", "items": S, "additionalItems": False},
        "compatible",
    )
    yield from same_in(
        ("2019-09",),
        "tuple/prefixItems-not-a-2019-keyword",
        {"type": "array"},
        {"type": "array", "prefixItems": [S]},
        "compatible",
    )
    yield from same_in(
        ("2020-12",), "tuple/prefixItems-added", {"type": "array"}, {"type": "array", "prefixItems": [S]}, "breaking"
    )
    yield from same_in(
        ("2020-12",),
        "tuple/additionalItems-not-a-2020-keyword",
        {"type": "array", "prefixItems": [S]},
        {"type": "array", "prefixItems": [S], "additionalItems": False},
        "compatible",
    )
    yield from same_in(
        DRAFTS, "minItems/raised", {"type": "array", "minItems": 0}, {"type": "array", "minItems": 1}, "breaking"
    )
    yield from same_in(
        DRAFTS, "minItems/lowered", {"type": "array", "minItems": 2}, {"type": "array", "minItems": 1}, "compatible"
    )
    yield from same_in(
        DRAFTS, "maxItems/lowered", {"type": "array", "maxItems": 3}, {"type": "array", "maxItems": 2}, "breaking"
    )
    yield from same_in(
        DRAFTS, "maxItems/raised", {"type": "array", "maxItems": 2}, {"type": "array", "maxItems": 3}, "compatible"
    )
    yield from same_in(
        DRAFTS, "uniqueItems/added", {"type": "array"}, {"type": "array", "uniqueItems": True}, "breaking"
    )
    yield from same_in(
        DRAFTS, "uniqueItems/removed", {"type": "array", "uniqueItems": True}, {"type": "array"}, "compatible"
    )
    yield from same_in(
        DRAFTS,
        "uniqueItems/added-under-maxItems-1",
        {"type": "array", "maxItems": 1},
        {"type": "array", "maxItems": 1, "uniqueItems": True},
        "compatible",
    )
    yield from same_in(FROM_06, "contains/added", {"type": "array"}, {"type": "array", "contains": S}, "breaking")
    yield from same_in(FROM_06, "contains/removed", {"type": "array", "contains": S}, {"type": "array"}, "compatible")
    yield from same_in(
        FROM_06, "contains/widened", {"type": "array", "contains": I}, {"type": "array", "contains": N}, "compatible"
    )
    yield from same_in(
        FROM_06, "contains/narrowed", {"type": "array", "contains": N}, {"type": "array", "contains": I}, "breaking"
    )
    yield from same_in(
        FROM_06,
        "contains/implied-by-minItems-and-items",
        {"type": "array", "items": S, "minItems": 1},
        {"type": "array", "contains": S},
        "compatible",
    )
    yield from same_in(
        ("draft-04",),
        "contains/not-a-draft-04-keyword",
        {"type": "array"},
        {"type": "array", "contains": S},
        "compatible",
    )
    yield from same_in(
        FROM_2019,
        "minContains/raised",
        {"type": "array", "contains": S, "minContains": 1},
        {"type": "array", "contains": S, "minContains": 2},
        "breaking",
    )
    yield from same_in(
        FROM_2019,
        "minContains/lowered",
        {"type": "array", "contains": S, "minContains": 2},
        {"type": "array", "contains": S},
        "compatible",
    )
    yield from same_in(
        FROM_2019,
        "minContains/zero-removed",
        {"type": "array", "contains": S, "minContains": 0},
        {"type": "array", "contains": S},
        "breaking",
    )
    yield from same_in(
        FROM_2019,
        "maxContains/lowered",
        {"type": "array", "contains": S, "maxContains": 3},
        {"type": "array", "contains": S, "maxContains": 2},
        "breaking",
    )
    yield from same_in(
        FROM_2019,
        "maxContains/raised",
        {"type": "array", "contains": S, "maxContains": 2},
        {"type": "array", "contains": S, "maxContains": 3},
        "compatible",
    )
    yield from same_in(
        ("draft-07",),
        "minContains/not-a-draft-07-keyword",
        {"type": "array", "contains": S, "minContains": 0},
        {"type": "array", "contains": S},
        "compatible",
    )
    yield from each(
        FROM_2019,
        "unevaluatedItems/position-dropped-into-string-rest",
        lambda d: (tup(d, [S, N, N]), {**tup(d, [S, N]), "unevaluatedItems": S}, "breaking"),
    )
    yield from each(
        FROM_2019,
        "unevaluatedItems/closed-gains-position",
        lambda d: (
            {**tup(d, [S]), "unevaluatedItems": False},
            {**tup(d, [S, N]), "unevaluatedItems": False},
            "compatible",
        ),
    )
    yield from each(
        FROM_2019,
        "unevaluatedItems/false-added",
        lambda d: (tup(d, [S]), {**tup(d, [S]), "unevaluatedItems": False}, "breaking"),
    )
    yield from each(
        FROM_2019,
        "unevaluatedItems/false-removed",
        lambda d: ({**tup(d, [S]), "unevaluatedItems": False}, tup(d, [S]), "compatible"),
    )
    yield from same_in(
        FROM_2019,
        "unevaluatedItems/items-schema-evaluates-all",
        {"type": "array", "items": S},
        {"type": "array", "items": S, "unevaluatedItems": False},
        "compatible",
    )
    yield from same_in(
        ("draft-07",),
        "unevaluatedItems/not-a-draft-07-keyword",
        {"type": "array"},
        {"type": "array", "unevaluatedItems": False},
        "compatible",
    )


def object_cases() -> Iterator[Case]:
    a_str = {"a": S}
    yield from same_in(DRAFTS, "properties/open-gains-property", obj(a_str), obj({**a_str, "b": N}), "breaking")
    yield from same_in(
        DRAFTS,
        "properties/closed-gains-property",
        obj(a_str, extra=False),
        obj({**a_str, "b": N}, extra=False),
        "compatible",
    )
    yield from same_in(
        DRAFTS,
        "properties/closed-loses-property",
        obj({**a_str, "b": N}, extra=False),
        obj(a_str, extra=False),
        "breaking",
    )
    yield from same_in(DRAFTS, "properties/open-loses-property", obj({**a_str, "b": N}), obj(a_str), "compatible")
    yield from same_in(DRAFTS, "properties/narrowed", obj({"a": N}), obj({"a": I}), "breaking")
    yield from same_in(DRAFTS, "properties/widened", obj({"a": I}), obj({"a": N}), "compatible")
    yield from same_in(
        DRAFTS,
        "properties/nested-narrowed",
        obj({"a": obj({"b": S})}),
        obj({"a": obj({"b": {"type": "string", "maxLength": 1}})}),
        "breaking",
    )
    yield from same_in(
        DRAFTS, "additionalProperties/false-to-schema", obj(a_str, extra=False), obj(a_str, extra=N), "compatible"
    )
    yield from same_in(
        DRAFTS, "additionalProperties/true-to-false", obj(a_str, extra=True), obj(a_str, extra=False), "breaking"
    )
    yield from same_in(
        DRAFTS, "additionalProperties/schema-narrowed", obj(a_str, extra=S), obj(a_str, extra=N), "breaking"
    )
    yield from same_in(
        DRAFTS,
        "additionalProperties/schema-widened",
        obj(a_str, extra=S),
        obj(a_str, extra={"type": ["string", "number"]}),
        "compatible",
    )
    yield from same_in(
        DRAFTS,
        "additionalProperties/closed-property-matches-rest",
        obj({"a": S, "b": N}, extra=False),
        obj({"a": S}, extra=N),
        "compatible",
    )
    yield from same_in(DRAFTS, "required/added", obj(a_str), obj(a_str, ["a"]), "breaking")
    yield from same_in(DRAFTS, "required/removed", obj(a_str, ["a"]), obj(a_str), "compatible")
    yield from same_in(
        DRAFTS,
        "required/added-beside-minProperties-closed",
        {**obj(a_str, extra=False), "minProperties": 1},
        obj(a_str, ["a"], extra=False),
        "compatible",
    )
    pp_old = {"type": "object", "properties": {"x_a": S}, "additionalProperties": False}
    pp_new = {"type": "object", "patternProperties": {"^x_": S}, "additionalProperties": False}
    yield from same_in(DRAFTS, "patternProperties/property-moved-into-pattern", pp_old, pp_new, "compatible")
    yield from same_in(DRAFTS, "patternProperties/pattern-narrowed-to-property", pp_new, pp_old, "breaking")
    yield from same_in(
        DRAFTS,
        "patternProperties/added-on-open-object",
        {"type": "object"},
        {"type": "object", "patternProperties": {"^x_": S}},
        "breaking",
    )
    yield from same_in(
        DRAFTS,
        "patternProperties/schema-narrowed",
        {"type": "object", "patternProperties": {"^x_": N}},
        {"type": "object", "patternProperties": {"^x_": I}},
        "breaking",
    )
    yield from same_in(
        DRAFTS,
        "patternProperties/property-and-pattern-both-apply",
        {"type": "object", "properties": {"x_a": N}},
        {"type": "object", "properties": {"x_a": N}, "patternProperties": {"^x_": I}},
        "breaking",
    )
    yield from same_in(
        FROM_06,
        "propertyNames/added",
        {"type": "object"},
        {"type": "object", "propertyNames": {"maxLength": 3}},
        "breaking",
    )
    yield from same_in(
        FROM_06,
        "propertyNames/removed",
        {"type": "object", "propertyNames": {"maxLength": 3}},
        {"type": "object"},
        "compatible",
    )
    yield from same_in(
        FROM_06,
        "propertyNames/pattern-widened",
        {"type": "object", "propertyNames": {"pattern": "^[a-z]+$"}},
        {"type": "object", "propertyNames": {"pattern": "^[a-z_]+$"}},
        "compatible",
    )
    yield from same_in(
        FROM_06,
        "propertyNames/pattern-narrowed",
        {"type": "object", "propertyNames": {"pattern": "^[a-z_]+$"}},
        {"type": "object", "propertyNames": {"pattern": "^[a-z]+$"}},
        "breaking",
    )
    yield from same_in(
        FROM_06,
        "propertyNames/closed-object-already-has-them",
        obj({"a": S, "b": S}, extra=False),
        {"type": "object", "propertyNames": {"enum": ["a", "b"]}},
        "compatible",
    )
    yield from same_in(
        FROM_06,
        "propertyNames/open-writer-names-inside",
        {"type": "object", "propertyNames": {"maxLength": 2}},
        {"type": "object", "propertyNames": {"maxLength": 3}},
        "compatible",
    )
    yield from same_in(
        FROM_06,
        "propertyNames/open-writer-names-outside",
        {"type": "object", "propertyNames": {"maxLength": 3}},
        {"type": "object", "propertyNames": {"maxLength": 2}},
        "breaking",
    )
    yield from same_in(
        FROM_06,
        "propertyNames/added-on-nested-object",
        obj({"a": {"type": "object"}}),
        obj({"a": {"type": "object", "propertyNames": {"pattern": "^x"}}}),
        "breaking",
    )
    closed_pattern = {"type": "object", "patternProperties": {"^x_": S}, "additionalProperties": False}
    yield from same_in(
        FROM_06,
        "propertyNames/closed-pattern-inside",
        closed_pattern,
        {"type": "object", "propertyNames": {"pattern": "^x_"}},
        "compatible",
    )
    yield from same_in(
        FROM_06,
        "propertyNames/closed-pattern-outside",
        closed_pattern,
        {"type": "object", "propertyNames": {"pattern": "^x_a"}},
        "breaking",
    )
    yield from same_in(
        FROM_06,
        "propertyNames/closed-property-outside",
        obj({"a": S, "bb": S}, extra=False),
        {"type": "object", "propertyNames": {"maxLength": 1}},
        "breaking",
    )
    yield from same_in(
        ("draft-04",),
        "propertyNames/not-a-draft-04-keyword",
        {"type": "object"},
        {"type": "object", "propertyNames": {"maxLength": 1}},
        "compatible",
    )
    yield from same_in(
        DRAFTS, "minProperties/raised", {"type": "object"}, {"type": "object", "minProperties": 1}, "breaking"
    )
    yield from same_in(
        DRAFTS,
        "minProperties/lowered",
        {"type": "object", "minProperties": 2},
        {"type": "object", "minProperties": 1},
        "compatible",
    )
    yield from same_in(
        DRAFTS,
        "maxProperties/lowered",
        {"type": "object", "maxProperties": 2},
        {"type": "object", "maxProperties": 1},
        "breaking",
    )
    yield from same_in(
        DRAFTS,
        "maxProperties/raised",
        {"type": "object", "maxProperties": 1},
        {"type": "object", "maxProperties": 2},
        "compatible",
    )
    yield from same_in(
        UP_TO_07,
        "dependencies/array-added",
        {"type": "object"},
        {"type": "object", "dependencies": {"a": ["b"]}},
        "breaking",
    )
    yield from same_in(
        UP_TO_07,
        "dependencies/array-removed",
        {"type": "object", "dependencies": {"a": ["b"]}},
        {"type": "object"},
        "compatible",
    )
    yield from same_in(
        UP_TO_07,
        "dependencies/array-grown",
        {"type": "object", "dependencies": {"a": ["b"]}},
        {"type": "object", "dependencies": {"a": ["b", "x_a"]}},
        "breaking",
    )
    yield from same_in(
        UP_TO_07,
        "dependencies/array-implied-by-required",
        obj({}, ["a", "b"]),
        {"type": "object", "dependencies": {"a": ["b"]}},
        "compatible",
    )
    yield from same_in(
        UP_TO_07,
        "dependencies/schema-added",
        {"type": "object"},
        {"type": "object", "dependencies": {"a": {"required": ["b"]}}},
        "breaking",
    )
    yield from same_in(
        UP_TO_07,
        "dependencies/schema-removed",
        {"type": "object", "dependencies": {"a": {"required": ["b"]}}},
        {"type": "object"},
        "compatible",
    )
    yield from same_in(
        UP_TO_07,
        "dependencies/schema-narrowed",
        {"type": "object", "dependencies": {"a": obj({"b": N})}},
        {"type": "object", "dependencies": {"a": obj({"b": I})}},
        "breaking",
    )
    yield from same_in(
        UP_TO_07,
        "dependencies/schema-widened",
        {"type": "object", "dependencies": {"a": obj({"b": I})}},
        {"type": "object", "dependencies": {"a": obj({"b": N})}},
        "compatible",
    )
    yield from same_in(
        UP_TO_07,
        "dependencies/array-to-schema-form",
        {"type": "object", "dependencies": {"a": ["b"]}},
        {"type": "object", "dependencies": {"a": {"required": ["b"]}}},
        "compatible",
    )
    yield from same_in(
        FROM_2019,
        "dependencies/not-a-2019-keyword",
        {"type": "object"},
        {"type": "object", "dependencies": {"a": ["b"]}},
        "compatible",
    )
    yield from same_in(
        FROM_2019,
        "dependentRequired/added",
        {"type": "object"},
        {"type": "object", "dependentRequired": {"a": ["b"]}},
        "breaking",
    )
    yield from same_in(
        FROM_2019,
        "dependentRequired/removed",
        {"type": "object", "dependentRequired": {"a": ["b"]}},
        {"type": "object"},
        "compatible",
    )
    yield from same_in(
        FROM_2019,
        "dependentRequired/shrunk",
        {"type": "object", "dependentRequired": {"a": ["b", "x_a"]}},
        {"type": "object", "dependentRequired": {"a": ["b"]}},
        "compatible",
    )
    yield from same_in(
        FROM_2019,
        "dependentSchemas/added",
        {"type": "object"},
        {"type": "object", "dependentSchemas": {"a": {"required": ["b"]}}},
        "breaking",
    )
    yield from same_in(
        FROM_2019,
        "dependentSchemas/narrowed",
        {"type": "object", "dependentSchemas": {"a": obj({"b": N})}},
        {"type": "object", "dependentSchemas": {"a": obj({"b": I})}},
        "breaking",
    )
    yield from same_in(
        FROM_2019,
        "dependentSchemas/removed",
        {"type": "object", "dependentSchemas": {"a": obj({"b": I})}},
        {"type": "object"},
        "compatible",
    )
    yield from same_in(
        ("draft-07",),
        "dependentRequired/not-a-draft-07-keyword",
        {"type": "object"},
        {"type": "object", "dependentRequired": {"a": ["b"]}},
        "compatible",
    )

    def closed_by_unevaluated(props: dict[str, Any]) -> dict[str, Any]:
        return {"type": "object", "allOf": [{"properties": props}], "unevaluatedProperties": False}

    yield from same_in(
        FROM_2019,
        "unevaluatedProperties/property-removed",
        closed_by_unevaluated({"a": S, "b": S}),
        closed_by_unevaluated({"a": S}),
        "breaking",
    )
    yield from same_in(
        FROM_2019,
        "unevaluatedProperties/optional-property-added",
        closed_by_unevaluated({"a": S}),
        closed_by_unevaluated({"a": S, "b": S}),
        "compatible",
    )
    yield from same_in(
        FROM_2019,
        "unevaluatedProperties/local-property-removed",
        {**obj({"a": S, "b": S}), "unevaluatedProperties": False},
        {**obj({"a": S}), "unevaluatedProperties": False},
        "breaking",
    )
    yield from same_in(
        FROM_2019,
        "unevaluatedProperties/local-property-added",
        {**obj({"a": S}), "unevaluatedProperties": False},
        {**obj({"a": S, "b": S}), "unevaluatedProperties": False},
        "compatible",
    )
    yield from same_in(
        FROM_2019,
        "unevaluatedProperties/false-added",
        obj({"a": S}),
        {**obj({"a": S}), "unevaluatedProperties": False},
        "breaking",
    )
    yield from same_in(
        FROM_2019,
        "unevaluatedProperties/schema-widened",
        {**obj({"a": S}), "unevaluatedProperties": I},
        {**obj({"a": S}), "unevaluatedProperties": N},
        "compatible",
    )
    yield from same_in(
        ("draft-07",),
        "unevaluatedProperties/not-a-draft-07-keyword",
        obj({"a": S}),
        {**obj({"a": S}), "unevaluatedProperties": False},
        "compatible",
    )


def combinator_cases() -> Iterator[Case]:
    nonneg = {"allOf": [N, {"minimum": 0}]}
    yield from same_in(DRAFTS, "allOf/member-dropped", nonneg, {"allOf": [N]}, "compatible")
    yield from same_in(DRAFTS, "allOf/member-added", {"allOf": [N]}, nonneg, "breaking")
    yield from same_in(DRAFTS, "allOf/unsatisfiable-to-anything", {"allOf": [S, N]}, {"type": "null"}, "compatible")
    yield from same_in(
        DRAFTS,
        "allOf/merged-into-one",
        {"allOf": [obj({"a": S}), {"required": ["a"]}]},
        obj({"a": S}, ["a"]),
        "compatible",
    )
    yield from same_in(DRAFTS, "anyOf/branch-added", {"anyOf": [S, N]}, {"anyOf": [S, N, B]}, "compatible")
    yield from same_in(DRAFTS, "anyOf/branch-removed", {"anyOf": [S, N]}, {"anyOf": [S]}, "breaking")
    yield from same_in(DRAFTS, "anyOf/to-type-list", {"anyOf": [S, N]}, {"type": ["string", "number"]}, "compatible")
    yield from same_in(
        DRAFTS,
        "anyOf/from-type",
        S,
        {"anyOf": [{"type": "string", "maxLength": 1}, {"type": "string", "minLength": 2}]},
        "compatible",
    )
    yield from same_in(
        DRAFTS,
        "anyOf/gap-between-branches",
        S,
        {"anyOf": [{"type": "string", "maxLength": 1}, {"type": "string", "minLength": 3}]},
        "breaking",
    )
    yield from same_in(DRAFTS, "oneOf/disjoint-branch-added", {"oneOf": [S, N]}, {"oneOf": [S, N, B]}, "compatible")
    yield from same_in(DRAFTS, "oneOf/disjoint-branch-removed", {"oneOf": [S, N]}, {"oneOf": [S]}, "breaking")
    yield from same_in(DRAFTS, "oneOf/overlapping-branch-added", N, {"oneOf": [N, I]}, "breaking")
    yield from same_in(DRAFTS, "oneOf/overlapping-writer", {"oneOf": [N, I]}, N, "compatible")
    yield from same_in(DRAFTS, "oneOf/overlapping-writer-to-integer", {"oneOf": [N, I]}, I, "breaking")
    yield from same_in(DRAFTS, "not/reader-disjoint", S, {"not": N}, "compatible")
    yield from same_in(DRAFTS, "not/reader-overlaps", S, {"not": {"type": "string", "maxLength": 1}}, "breaking")
    yield from same_in(
        DRAFTS,
        "not/writer-complement-covered",
        {"not": S},
        {"type": ["null", "boolean", "number", "object", "array"]},
        "compatible",
    )
    yield from same_in(DRAFTS, "not/writer-complement-not-covered", {"not": S}, N, "breaking")
    yield from same_in(DRAFTS, "not/both-narrowed", {"not": {"type": "string", "maxLength": 1}}, {"not": S}, "breaking")
    yield from same_in(
        DRAFTS, "not/both-widened", {"not": S}, {"not": {"type": "string", "maxLength": 1}}, "compatible"
    )
    cond = {"if": {"properties": {"a": {"const": 1}}, "required": ["a"]}, "then": {"required": ["b"]}}
    yield from same_in(FROM_07, "if-then/added", {"type": "object"}, {"type": "object", **cond}, "breaking")
    yield from same_in(FROM_07, "if-then/removed", {"type": "object", **cond}, {"type": "object"}, "compatible")
    yield from same_in(
        FROM_07,
        "if-then/else-added",
        {"type": "object", **cond},
        {"type": "object", **cond, "else": {"required": ["x_a"]}},
        "breaking",
    )
    yield from same_in(
        FROM_07,
        "if-then-else/covered-by-anyOf",
        {"if": S, "then": {"maxLength": 2}, "else": N},
        {"anyOf": [{"type": "string", "maxLength": 2}, N]},
        "compatible",
    )
    yield from same_in(
        FROM_07,
        "if-then-else/then-narrowed",
        {"if": S, "then": {"maxLength": 3}, "else": N},
        {"if": S, "then": {"maxLength": 2}, "else": N},
        "breaking",
    )
    yield from same_in(
        FROM_07, "if/alone-is-no-constraint", S, {"type": "string", "if": {"maxLength": 1}}, "compatible"
    )
    yield from same_in(
        ("draft-06",),
        "if-then/not-a-draft-06-keyword",
        {"type": "object"},
        {"type": "object", "if": True, "then": False},
        "compatible",
    )
    yield from same_in(FROM_06, "boolean/anything-to-true", {"type": "string", "maxLength": 3}, True, "compatible")
    yield from same_in(FROM_06, "boolean/false-to-anything", False, {"type": "null"}, "compatible")
    yield from same_in(FROM_06, "boolean/true-to-false", True, False, "breaking")
    yield from same_in(FROM_06, "boolean/string-to-false", S, False, "breaking")
    yield from same_in(
        FROM_06,
        "boolean/property-true-to-false",
        {"type": "object", "properties": {"a": True}},
        {"type": "object", "properties": {"a": False}},
        "breaking",
    )
    yield from same_in(
        FROM_06,
        "boolean/property-false-to-true",
        {"type": "object", "properties": {"a": False}},
        {"type": "object", "properties": {"a": True}},
        "compatible",
    )
    yield from same_in(
        FROM_06,
        "boolean/items-false-to-schema",
        {"type": "array", "items": False},
        {"type": "array", "items": S},
        "compatible",
    )
    yield from each(
        DRAFTS,
        "ref/target-narrowed",
        lambda d: (
            with_ref(d, {"type": "string", "maxLength": 5}),
            with_ref(d, {"type": "string", "maxLength": 2}),
            "breaking",
        ),
    )
    yield from each(
        DRAFTS,
        "ref/target-widened",
        lambda d: (
            with_ref(d, {"type": "string", "maxLength": 2}),
            with_ref(d, {"type": "string", "maxLength": 5}),
            "compatible",
        ),
    )
    yield from each(
        DRAFTS, "ref/inlined", lambda d: (with_ref(d, obj({"a": S}, ["a"])), obj({"a": S}, ["a"]), "compatible")
    )
    yield from each(
        DRAFTS,
        "ref/in-property-narrowed",
        lambda d: (
            {defs_key(d): {"n": N}, **obj({"a": {"$ref": f"#/{defs_key(d)}/n"}})},
            {defs_key(d): {"n": I}, **obj({"a": {"$ref": f"#/{defs_key(d)}/n"}})},
            "breaking",
        ),
    )
    yield from each(
        DRAFTS,
        "ref/sibling-added",
        lambda d: (with_ref(d, S), with_ref(d, S, maxLength=2), "compatible" if d in UP_TO_07 else "breaking"),
    )
    yield from each(
        DRAFTS, "ref/sibling-removed", lambda d: (with_ref(d, S, maxLength=2), with_ref(d, S), "compatible")
    )
    yield from each(
        DRAFTS,
        "ref/recursive-unchanged",
        lambda d: (
            {"type": "object", "properties": {"c": {"$ref": "#"}, "v": N}},
            {"type": "object", "properties": {"c": {"$ref": "#"}, "v": N}},
            "compatible",
        ),
    )
    # a dynamic reference (2020-12 $dynamicRef, 2019-09 $recursiveRef) in a document of one resource goes
    # where a $ref of the same value goes; with an embedded resource the path may redirect it: undecided
    yield "dynref/target-narrowed", "2020-12", dynamic_ref(N), dynamic_ref(I), "breaking"
    yield "dynref/to-its-target", "2020-12", dynamic_ref(I), I, "compatible"
    yield "dynref/target-of-the-old", "2020-12", I, dynamic_ref(S), "breaking"
    embedded = {**dynamic_ref(I), "$id": "https://example.com/root"}
    embedded["$defs"]["inner"] = {"$id": "inner", "$dynamicAnchor": "n", **S}
    yield "dynref/embedded-resource", "2020-12", I, embedded, "undecided"
    recursive = {"$recursiveAnchor": True, **obj({"a": {"$recursiveRef": "#"}, "v": N})}
    yield "recursiveref/property-made-recursive", "2019-09", obj({"a": I, "v": N}), recursive, "breaking"
    yield "recursiveref/unchanged", "2019-09", recursive, recursive, "compatible"


def mixed_cases() -> Iterator[Case]:
    old07: Draft = "draft-07"
    new20: Draft = "2020-12"

    def pair(name: str, old: Any, new: Any, expected: Expected, old_draft: Draft = old07) -> Case:
        return f"mixed/{name}", "2020-12", tagged(old, old_draft), tagged(new, new20), expected

    yield pair("closed-tuple-same-meaning", tup(old07, [S, N], False), tup(new20, [S, N], False), "compatible")
    yield pair("open-tuple-to-closed", tup(old07, [S, N]), tup(new20, [S, N], False), "breaking")
    yield pair("tuple-read-as-items-schema", {"type": "array", "items": [S]}, {"type": "array", "items": S}, "breaking")
    yield pair(
        "dependencies-to-dependentRequired",
        {"dependencies": {"a": ["b"]}},
        {"dependentRequired": {"a": ["b"]}},
        "compatible",
    )
    yield pair(
        "dependencies-to-dependentSchemas",
        {"dependencies": {"a": obj({"b": I})}},
        {"dependentSchemas": {"a": obj({"b": N})}},
        "compatible",
    )
    yield pair(
        "dependentRequired-added", {"type": "object"}, {"type": "object", "dependentRequired": {"a": ["b"]}}, "breaking"
    )
    yield pair("ref-sibling-now-applies", with_ref(old07, S, maxLength=2), with_ref(new20, S, maxLength=2), "breaking")
    yield pair("definitions-to-defs", with_ref(old07, obj({"a": S})), with_ref(new20, obj({"a": S})), "compatible")
    yield pair(
        "draft-04-exclusive-flag-to-number",
        {"type": "number", **lt("draft-04", 10)},
        {"type": "number", **lt(new20, 10)},
        "compatible",
        "draft-04",
    )
    yield pair(
        "draft-04-inclusive-to-exclusive",
        {"type": "number", "maximum": 10},
        {"type": "number", **lt(new20, 10)},
        "breaking",
        "draft-04",
    )
    yield pair(
        "unevaluatedProperties-now-applies",
        obj({"a": S}, extra=None),
        {**obj({"a": S}), "unevaluatedProperties": False},
        "breaking",
    )
    yield (
        "mixed/2020-tuple-to-draft-07-tuple",
        "draft-07",
        tagged(tup(new20, [S, N], False), new20),
        tagged(tup(old07, [S, N, B], False), old07),
        "compatible",
    )
    yield (
        "mixed/2020-tuple-to-draft-07-items-array-without-rest",
        "draft-07",
        tagged(tup(new20, [S], N), new20),
        tagged(tup(old07, [S]), old07),
        "compatible",
    )
    yield pair(
        "if-then-unchanged", {"if": S, "then": {"maxLength": 2}}, {"if": S, "then": {"maxLength": 2}}, "compatible"
    )


def merge_cases() -> Iterator[Case]:
    """A writer's allOf members folded into one schema: each keyword's own rule, checked from both sides."""

    def counts(keyword: str, low: str, high: str) -> dict[str, Any]:
        return {"type": keyword, "allOf": [{low: 2}, {high: 4}, {high: 3}, {low: 1}]}

    string_or_integer = {"allOf": [{"type": ["string", "integer"]}, {"type": ["number", "string"]}]}
    yield from same_in(
        DRAFTS, "merge/type-lists-intersect", string_or_integer, {"type": ["string", "integer"]}, "compatible"
    )
    yield from same_in(DRAFTS, "merge/type-lists-intersect-narrowed", string_or_integer, S, "breaking")
    yield from same_in(DRAFTS, "merge/number-and-integer", {"allOf": [N, I]}, I, "compatible")
    yield from same_in(
        DRAFTS,
        "merge/highest-minimum",
        {"type": "integer", "allOf": [{"minimum": 1}, {"minimum": 3}]},
        {"type": "integer", "minimum": 3},
        "compatible",
    )
    yield from same_in(
        DRAFTS,
        "merge/highest-minimum-raised",
        {"type": "integer", "allOf": [{"minimum": 3}, {"minimum": 1}]},
        {"type": "integer", "minimum": 4},
        "breaking",
    )
    yield from same_in(
        DRAFTS,
        "merge/lowest-maximum",
        {"type": "integer", "allOf": [{"maximum": 5}, {"maximum": 3}]},
        {"type": "integer", "maximum": 3},
        "compatible",
    )
    yield from same_in(
        DRAFTS,
        "merge/lowest-maximum-lowered",
        {"type": "integer", "allOf": [{"maximum": 3}, {"maximum": 5}]},
        {"type": "integer", "maximum": 2},
        "breaking",
    )
    yield from each(
        DRAFTS,
        "merge/highest-exclusive-minimum",
        lambda d: ({"type": "number", "allOf": [gt(d, 1), gt(d, 3)]}, {"type": "number", **gt(d, 3)}, "compatible"),
    )
    yield from each(
        DRAFTS,
        "merge/highest-exclusive-minimum-raised",
        lambda d: ({"type": "number", "allOf": [gt(d, 3), gt(d, 1)]}, {"type": "number", "minimum": 4}, "breaking"),
    )
    yield from each(
        DRAFTS,
        "merge/lowest-exclusive-maximum",
        lambda d: ({"type": "number", "allOf": [lt(d, 3), lt(d, 5)]}, {"type": "number", **lt(d, 3)}, "compatible"),
    )
    yield from each(
        DRAFTS,
        "merge/lowest-exclusive-maximum-lowered",
        lambda d: ({"type": "number", "allOf": [lt(d, 5), lt(d, 3)]}, {"type": "number", "maximum": 2}, "breaking"),
    )
    yield from same_in(
        DRAFTS,
        "merge/lengths",
        counts("string", "minLength", "maxLength"),
        {"type": "string", "minLength": 2, "maxLength": 3},
        "compatible",
    )
    yield from same_in(
        DRAFTS,
        "merge/lengths-narrowed",
        counts("string", "minLength", "maxLength"),
        {"type": "string", "minLength": 3},
        "breaking",
    )
    yield from same_in(
        DRAFTS,
        "merge/item-counts",
        counts("array", "minItems", "maxItems"),
        {"type": "array", "minItems": 2, "maxItems": 3},
        "compatible",
    )
    yield from same_in(
        DRAFTS,
        "merge/item-counts-narrowed",
        counts("array", "minItems", "maxItems"),
        {"type": "array", "maxItems": 2},
        "breaking",
    )
    yield from same_in(
        DRAFTS,
        "merge/property-counts",
        counts("object", "minProperties", "maxProperties"),
        {"type": "object", "minProperties": 2, "maxProperties": 3},
        "compatible",
    )
    yield from same_in(
        DRAFTS,
        "merge/property-counts-narrowed",
        counts("object", "minProperties", "maxProperties"),
        {"type": "object", "maxProperties": 2},
        "breaking",
    )
    two_contains = {"type": "array", "allOf": [{"contains": S, "minContains": 2}, {"contains": S, "maxContains": 3}]}
    yield from same_in(
        FROM_2019,
        "merge/contains-counts-of-one-contains",
        two_contains,
        {"type": "array", "contains": S, "minContains": 2, "maxContains": 3},
        "compatible",
    )
    yield from same_in(
        FROM_2019,
        "merge/contains-counts-of-one-contains-raised",
        two_contains,
        {"type": "array", "contains": S, "minContains": 3},
        "breaking",
    )
    yield from same_in(
        FROM_2019,
        "merge/contains-counts-of-one-contains-lowered",
        two_contains,
        {"type": "array", "contains": S, "maxContains": 2},
        "breaking",
    )
    # minContains and maxContains count only beside a contains of their own schema; then/else only beside an if
    yield from same_in(
        FROM_2019,
        "merge/contains-counts-without-contains",
        {"type": "array", "contains": S, "allOf": [{"minContains": 2}, {"maxContains": 3}]},
        {"type": "array", "contains": S, "minContains": 2},
        "breaking",
    )
    yield from same_in(
        FROM_07,
        "merge/then-and-else-without-if",
        {"type": "string", "allOf": [{"if": {"maxLength": 1}}, {"then": {"maxLength": 1}, "else": {"maxLength": 1}}]},
        {"type": "string", "maxLength": 1},
        "breaking",
    )
    two_conditions = {"allOf": [{"if": S, "then": {"maxLength": 1}}, {"if": N, "then": {"maximum": 1}}]}
    yield from same_in(
        FROM_07, "merge/two-conditions-kept", two_conditions, {"if": N, "then": {"maximum": 1}}, "compatible"
    )
    yield from same_in(
        FROM_07, "merge/two-conditions-kept-narrowed", two_conditions, {"if": N, "then": {"maximum": 0}}, "breaking"
    )
    yield from same_in(
        DRAFTS,
        "merge/required-union",
        {"type": "object", "allOf": [{"required": ["a"]}, {"required": ["b"]}]},
        {"type": "object", "required": ["a", "b"]},
        "compatible",
    )
    yield from same_in(
        DRAFTS,
        "merge/required-union-grown",
        {"type": "object", "allOf": [{"required": ["a"]}, {"required": ["b"]}]},
        {"type": "object", "required": ["a", "b", "c"]},
        "breaking",
    )
    yield from same_in(
        DRAFTS,
        "merge/enum-intersection",
        {"allOf": [{"enum": [1, 2, 3]}, {"enum": [2, 3, 4]}]},
        {"enum": [2, 3]},
        "compatible",
    )
    yield from same_in(
        DRAFTS,
        "merge/enum-intersection-narrowed",
        {"allOf": [{"enum": [1, 2, 3]}, {"enum": [2, 3, 4]}]},
        {"enum": [2]},
        "breaking",
    )
    yield from same_in(
        DRAFTS,
        "merge/unique-items",
        {"type": "array", "allOf": [{"uniqueItems": True}, {"uniqueItems": False}]},
        {"type": "array", "uniqueItems": True},
        "compatible",
    )
    yield from same_in(
        DRAFTS,
        "merge/unique-items-either",
        {"type": "array", "allOf": [{"uniqueItems": False}, {"uniqueItems": True}]},
        {"type": "array", "uniqueItems": True},
        "compatible",
    )
    a_and_b = {
        "type": "object",
        "allOf": [{"properties": {"a": {"minimum": 0}}}, {"properties": {"a": {"maximum": 5}, "b": I}}],
    }
    yield from same_in(
        DRAFTS,
        "merge/property-schemas",
        a_and_b,
        {"type": "object", "properties": {"a": {"minimum": 0, "maximum": 5}, "b": I}},
        "compatible",
    )
    yield from same_in(
        DRAFTS,
        "merge/property-schemas-narrowed",
        a_and_b,
        {"type": "object", "properties": {"a": {"minimum": 1, "maximum": 5}}},
        "breaking",
    )
    x_both = {
        "type": "object",
        "allOf": [{"patternProperties": {"^x_": {"minimum": 0}}}, {"patternProperties": {"^x_": {"maximum": 5}}}],
    }
    yield from same_in(
        DRAFTS,
        "merge/pattern-property-schemas",
        x_both,
        {"type": "object", "patternProperties": {"^x_": {"minimum": 0, "maximum": 5}}},
        "compatible",
    )
    yield from same_in(
        DRAFTS,
        "merge/pattern-property-schemas-narrowed",
        x_both,
        {"type": "object", "patternProperties": {"^x_": {"maximum": 0}}},
        "breaking",
    )
    yield from each(
        DRAFTS,
        "merge/dependent-required",
        lambda d: (
            {"type": "object", "allOf": [{requires_key(d): {"a": ["b"]}}, {requires_key(d): {"a": ["c"]}}]},
            {"type": "object", requires_key(d): {"a": ["b", "c"]}},
            "compatible",
        ),
    )
    yield from each(
        DRAFTS,
        "merge/dependent-required-grown",
        lambda d: (
            {"type": "object", "allOf": [{requires_key(d): {"a": ["b"]}}, {requires_key(d): {"x_a": ["c"]}}]},
            {"type": "object", requires_key(d): {"a": ["b", "c"]}},
            "breaking",
        ),
    )
    yield from same_in(
        DRAFTS, "merge/negations-narrowed", {"allOf": [{"not": S}, {"not": {"type": "null"}}]}, {"not": B}, "breaking"
    )
    yield from same_in(
        DRAFTS,
        "merge/nested-allOf",
        {"allOf": [{"allOf": [I]}, {"allOf": [{"minimum": 0}]}]},
        {"type": "integer", "minimum": 0},
        "compatible",
    )
    yield from same_in(
        DRAFTS,
        "merge/nested-allOf-narrowed",
        {"allOf": [{"allOf": [I]}, {"allOf": [{"minimum": 0}]}]},
        {"type": "integer", "minimum": 1},
        "breaking",
    )
    yield from same_in(
        DRAFTS,
        "merge/other-keywords-kept-narrowed",
        {"allOf": [{"type": "integer", "multipleOf": 2}, {"multipleOf": 3}]},
        {"type": "integer", "multipleOf": 12},
        "breaking",
    )


def rule_cases() -> Iterator[Case]:
    """Rules only a particular shape reaches: each oneOf disjointness proof, unions, conditions, member classes."""
    short = {"type": "string", "maxLength": 1}
    a_string = obj({"a": S}, ["a"])
    # oneOf: the writer matches one branch, and kvlog must prove it matches no other
    yield from same_in(
        DRAFTS, "oneOf/other-branch-values-outside-writer", short, {"oneOf": [short, {"enum": ["abc"]}]}, "compatible"
    )
    yield from same_in(
        DRAFTS,
        "oneOf/other-branch-values-inside-writer",
        {"type": "string", "maxLength": 3},
        {"oneOf": [{"type": "string", "maxLength": 3}, {"enum": ["abc"]}]},
        "breaking",
    )
    yield from same_in(
        DRAFTS,
        "oneOf/other-branch-member-of-other-type",
        a_string,
        {"oneOf": [a_string, obj({"a": N}, ["a"])]},
        "compatible",
    )
    yield from same_in(
        DRAFTS,
        "oneOf/other-branch-optional-member-of-other-type",
        a_string,
        {"oneOf": [a_string, obj({"a": N})]},
        "compatible",
    )
    yield from same_in(
        DRAFTS,
        "oneOf/other-branch-optional-member-of-same-type",
        a_string,
        {"oneOf": [a_string, obj({"a": short})]},
        "breaking",
    )
    yield from same_in(
        FROM_06,
        "oneOf/other-branch-forbids-member",
        a_string,
        {"oneOf": [a_string, {"type": "object", "properties": {"a": False}}]},
        "compatible",
    )
    yield from same_in(
        DRAFTS,
        "oneOf/other-branch-pattern-disjoint",
        {"type": "string", "pattern": "^a"},
        {"oneOf": [{"type": "string", "pattern": "^a"}, {"type": "string", "pattern": "^b"}]},
        "compatible",
    )
    yield from same_in(
        DRAFTS,
        "oneOf/other-branch-pattern-overlaps",
        {"type": "string", "pattern": "^a"},
        {"oneOf": [{"type": "string", "pattern": "^a"}, {"type": "string", "pattern": "a$"}]},
        "breaking",
    )
    natural = {"type": "integer", "minimum": 0}
    yield from same_in(
        DRAFTS,
        "oneOf/other-branch-range-disjoint",
        natural,
        {"oneOf": [natural, {"type": "number", "maximum": -1}]},
        "compatible",
    )
    yield from same_in(
        DRAFTS,
        "oneOf/other-branch-range-overlaps",
        natural,
        {"oneOf": [natural, {"type": "number", "maximum": 0}]},
        "breaking",
    )
    yield from same_in(DRAFTS, "oneOf/other-branch-negates-writer", S, {"oneOf": [S, {"not": S}]}, "compatible")
    yield from same_in(DRAFTS, "oneOf/other-branch-of-other-type", S, {"oneOf": [S, {"type": "null"}]}, "compatible")
    # not: a negated union rules out each of its members' types
    yield from same_in(
        DRAFTS,
        "not/union-of-types",
        {"allOf": [{"not": S}, {"not": {"type": "null"}}]},
        {"type": ["boolean", "number", "object", "array"]},
        "compatible",
    )
    yield from same_in(
        DRAFTS,
        "not/union-of-types-narrowed",
        {"allOf": [{"not": S}, {"not": {"type": "null"}}]},
        {"type": ["boolean", "number", "object"]},
        "breaking",
    )
    # allOf added on the reader: each member is its own obligation
    yield from same_in(
        DRAFTS,
        "allOf/reader-adds-two-members",
        S,
        {"type": "string", "allOf": [{"maxLength": 3}, {"minLength": 1}]},
        "breaking",
    )
    yield from same_in(DRAFTS, "allOf/reader-nested-member", S, {"allOf": [{"allOf": [{"maxLength": 3}]}]}, "breaking")
    yield from same_in(
        DRAFTS,
        "allOf/reader-member-the-writer-has",
        {"type": "string", "allOf": [{"maxLength": 3}]},
        {"type": "string", "allOf": [{"maxLength": 3}], "minLength": 0},
        "compatible",
    )
    # anyOf branches that cover the writer only together
    yield from same_in(
        DRAFTS,
        "anyOf/integer-ranges-meet",
        I,
        {"anyOf": [{"type": "integer", "maximum": 0}, {"type": "integer", "minimum": 1}]},
        "compatible",
    )
    yield from same_in(
        DRAFTS,
        "anyOf/integer-ranges-gap",
        I,
        {"anyOf": [{"type": "integer", "maximum": 0}, {"type": "integer", "minimum": 2}]},
        "breaking",
    )
    yield from each(
        DRAFTS,
        "anyOf/number-ranges-meet",
        lambda d: (N, {"anyOf": [{"type": "number", "maximum": 0}, {"type": "number", **gt(d, 0)}]}, "compatible"),
    )
    yield from each(
        DRAFTS,
        "anyOf/number-ranges-miss-a-point",
        lambda d: (N, {"anyOf": [{"type": "number", **lt(d, 0)}, {"type": "number", **gt(d, 0)}]}, "breaking"),
    )
    ten = {"type": "integer", "minimum": 0, "maximum": 10}
    yield from same_in(
        DRAFTS,
        "anyOf/bounded-writer-covered",
        ten,
        {"anyOf": [{"type": "integer", "minimum": 0, "maximum": 5}, {"type": "integer", "minimum": 6, "maximum": 10}]},
        "compatible",
    )
    yield from same_in(
        DRAFTS,
        "anyOf/bounded-writer-top-left-out",
        ten,
        {"anyOf": [{"type": "integer", "minimum": 0, "maximum": 5}, {"type": "integer", "minimum": 6, "maximum": 9}]},
        "breaking",
    )
    yield from same_in(
        DRAFTS,
        "anyOf/strings-by-pattern",
        S,
        {
            "anyOf": [
                {"type": "string", "pattern": "^a"},
                {"type": "string", "pattern": "^[^a]"},
                {"type": "string", "maxLength": 0},
            ]
        },
        "compatible",
    )
    yield from same_in(
        DRAFTS,
        "anyOf/strings-by-pattern-gap",
        S,
        {"anyOf": [{"type": "string", "pattern": "^a"}, {"type": "string", "maxLength": 0}]},
        "breaking",
    )
    yield from same_in(
        DRAFTS,
        "anyOf/integer-ranges-leave-out-below",
        I,
        {"anyOf": [{"type": "integer", "minimum": 5}, {"type": "integer", "minimum": 10}]},
        "breaking",
    )
    yield from same_in(
        DRAFTS,
        "anyOf/number-ranges-gap-between",
        N,
        {"anyOf": [{"type": "number", "maximum": 0}, {"type": "number", "minimum": 1}]},
        "breaking",
    )
    yield from same_in(
        DRAFTS,
        "anyOf/number-ranges-leave-out-above",
        {"type": "number", "minimum": 0},
        {"anyOf": [{"type": "number", "minimum": 0, "maximum": 1}, {"type": "number", "minimum": 1, "maximum": 2}]},
        "breaking",
    )
    yield from same_in(
        DRAFTS, "oneOf/one-branch-of-the-writer-type", S, {"oneOf": [{"type": "string", "maxLength": 2}, N]}, "breaking"
    )
    yield from same_in(DRAFTS, "not/integers-out-of-numbers", {"type": ["number", "string"], "not": I}, S, "breaking")
    three_deep = {"anyOf": [{"anyOf": [{"anyOf": [S, N]}]}]}
    yield from same_in(
        DRAFTS, "anyOf/writer-split-three-levels-deep", three_deep, {"type": ["string", "number"]}, "compatible"
    )
    yield from same_in(FROM_06, "anyOf/false-branch-beside-other-type", S, {"anyOf": [False, N]}, "breaking")
    yield from same_in(DRAFTS, "anyOf/one-branch-of-the-writer-type", S, {"anyOf": [short, N]}, "breaking")
    yield from same_in(
        DRAFTS,
        "anyOf/number-ranges-gap-above-two",
        N,
        {"anyOf": [{"type": "number", "maximum": 2}, {"type": "number", "minimum": 4}]},
        "breaking",
    )
    yield from each(
        DRAFTS,
        "oneOf/other-branch-range-touches",
        lambda d: (
            {"type": "number", **gt(d, 0)},
            {"oneOf": [{"type": "number", **gt(d, 0)}, {"type": "number", "maximum": 0}]},
            "compatible",
        ),
    )
    yield from same_in(
        FROM_06,
        "bounds/exclusive-maximum-below-maximum",
        {"type": "number", "maximum": 5, "exclusiveMaximum": 3},
        {"type": "number", "maximum": 3},
        "compatible",
    )
    yield from each(
        DRAFTS,
        "multipleOf/whole-numbers-above-zero-start-at-one",
        lambda d: ({"type": "number", "multipleOf": 1, **gt(d, 0)}, {"type": "number", "minimum": 1}, "compatible"),
    )
    yield from same_in(
        DRAFTS,
        "uniqueItems/added-under-maxItems-2",
        {"type": "array", "maxItems": 2},
        {"type": "array", "maxItems": 2, "uniqueItems": True},
        "breaking",
    )
    yield from same_in(
        FROM_06,
        "bounds/exclusive-and-inclusive-maximum-at-one-value",
        {"type": "number", "maximum": 3, "exclusiveMaximum": 3},
        {"type": "number", "exclusiveMaximum": 3},
        "compatible",
    )
    yield from each(
        DRAFTS,
        "bounds/integer-exclusive-maximum-lowered",
        lambda d: ({"type": "integer", **lt(d, 10)}, {"type": "integer", "maximum": 8}, "breaking"),
    )
    yield from same_in(DRAFTS, "not/writer-negates-everything", {"not": {}}, {"type": "null"}, "compatible")
    one_contains = {"type": "array", "allOf": [{"contains": S}, {"contains": S, "maxContains": 3}]}
    yield from same_in(
        FROM_2019,
        "merge/contains-counts-default-minimum",
        one_contains,
        {"type": "array", "contains": S, "minContains": 2},
        "breaking",
    )
    # if/then/else on the reader, when the writer always or never meets the condition
    yield from same_in(
        FROM_07,
        "if-then/writer-always-meets-if",
        {"type": "string", "minLength": 2},
        {"if": {"minLength": 1}, "then": {"maxLength": 5}},
        "breaking",
    )
    yield from same_in(
        FROM_07,
        "if-then/writer-always-meets-if-then-holds",
        {"type": "string", "minLength": 2, "maxLength": 5},
        {"if": {"minLength": 1}, "then": {"maxLength": 5}},
        "compatible",
    )
    yield from same_in(
        FROM_07, "if-then/writer-never-meets-if", S, {"if": N, "then": False, "else": {"maxLength": 3}}, "breaking"
    )
    yield from same_in(
        FROM_07,
        "if-then/writer-never-meets-if-else-holds",
        {"type": "string", "maxLength": 3},
        {"if": N, "then": False, "else": {"maxLength": 3}},
        "compatible",
    )
    # members no property names: additionalProperties as a schema, beside properties and patterns
    yield from same_in(
        DRAFTS,
        "additionalProperties/schema-narrowed-beside-extra",
        obj({"extra": S}, extra=S),
        obj({"extra": S}, extra=N),
        "breaking",
    )
    x_strings = {"^x_": S}
    yield from same_in(
        DRAFTS,
        "additionalProperties/schema-narrowed-beside-pattern",
        {"type": "object", "patternProperties": x_strings, "additionalProperties": N},
        {"type": "object", "patternProperties": x_strings, "additionalProperties": I},
        "breaking",
    )
    yield from same_in(
        DRAFTS,
        "additionalProperties/pattern-narrowed-beside-schema",
        {"type": "object", "patternProperties": {"^x_": N}, "additionalProperties": S},
        {"type": "object", "patternProperties": {"^x_": I}, "additionalProperties": S},
        "breaking",
    )
    closed_x = {"type": "object", "patternProperties": x_strings, "additionalProperties": False}
    yield from same_in(
        DRAFTS,
        "patternProperties/removed-from-closed",
        closed_x,
        {"type": "object", "additionalProperties": False},
        "breaking",
    )
    yield from same_in(
        DRAFTS,
        "patternProperties/widened-on-closed",
        closed_x,
        {"type": "object", "patternProperties": {"^x": S}, "additionalProperties": False},
        "compatible",
    )
    seven = {f"^{c}": S for c in "abcdefg"}
    yield from same_in(
        DRAFTS,
        "patternProperties/more-than-kvlog-compares",
        {"type": "object", "patternProperties": seven},
        {"type": "object", "patternProperties": seven, "additionalProperties": S},
        "undecided",
    )
    yield from same_in(
        DRAFTS,
        "patternProperties/lookahead",
        {"type": "object", "patternProperties": {"^(?=x)": S}},
        {"type": "object", "patternProperties": {"^(?=x)": S}, "additionalProperties": S},
        "undecided",
    )
    yield from same_in(
        DRAFTS,
        "minItems/above-maxItems",
        {"type": "array", "minItems": 2, "maxItems": 1},
        {"type": "array", "maxItems": 0},
        "compatible",
    )
    yield from same_in(
        FROM_2019,
        "unevaluatedItems/beside-contains",
        {"type": "array", "items": S},
        {"type": "array", "contains": S, "unevaluatedItems": N},
        "breaking",
    )
    yield from same_in(
        DRAFTS,
        "maxProperties/closed-writer-has-few",
        obj({"a": S, "b": S}, extra=False),
        {"type": "object", "maxProperties": 2},
        "compatible",
    )
    yield from same_in(
        DRAFTS,
        "maxProperties/closed-writer-has-more",
        obj({"a": S, "b": S, "c": S}, extra=False),
        {"type": "object", "maxProperties": 2},
        "breaking",
    )
    yield from each(
        FROM_06,
        "dependentSchemas/member-the-writer-forbids",
        lambda d: (
            {"type": "object", "properties": {"a": False}},
            {"type": "object", ("dependencies" if d in UP_TO_07 else "dependentSchemas"): {"a": False}},
            "compatible",
        ),
    )
    # prefixItems (items: [...] before 2020-12) on the reader
    yield from each(
        DRAFTS, "tuple/reader-prefix-beyond-closed-writer", lambda d: (tup(d, [S], False), tup(d, [S, N]), "compatible")
    )
    yield from each(
        DRAFTS,
        "tuple/reader-prefix-beyond-writer-maxItems",
        lambda d: ({"type": "array", "items": S, "maxItems": 1}, tup(d, [S, N], False), "compatible"),
    )
    yield from each(
        DRAFTS,
        "tuple/reader-prefix-within-writer-maxItems",
        lambda d: ({"type": "array", "items": S, "maxItems": 2}, tup(d, [S, N], False), "breaking"),
    )
    yield from each(
        FROM_06,
        "tuple/writer-position-false",
        lambda d: (tup(d, [S, False]), {"type": "array", "maxItems": 1}, "compatible"),
    )
    yield from each(
        DRAFTS,
        "tuple/reader-prefix-on-items-writer",
        lambda d: ({"type": "array", "items": N}, tup(d, [N, I]), "breaking"),
    )


def cases() -> list[Case]:
    groups = (
        type_cases,
        enum_const_cases,
        numeric_cases,
        string_cases,
        array_cases,
        object_cases,
        combinator_cases,
        merge_cases,
        rule_cases,
        mixed_cases,
    )
    return [case for group in groups for case in group()]


# What kvlog says for each row that is not compatible, in the order it says it: (path into the instance,
# message). The message names the rule that fired (a bound, a length, a closed content model, a branch of
# anyOf...), so a rule that stops firing, fires elsewhere or says something else fails here, not only
# one whose verdict flips. A name stands for its row in every draft it is written in.
NOT_FOLLOWED = "(recursive, dynamic or to another document)"
REASONS: dict[str, list[tuple[str, str]]] = {
    "types/number-to-integer": [("$", "new accepts only integers; old accepts any number")],
    "types/string-to-number": [("$", "new accepts only number; old has string values")],
    "types/drop-null-from-list": [("$", "new rejects null, which old allows")],
    "types/number-list-to-integer-list": [("$", "new accepts only integers; old accepts any number")],
    "types/any-to-object": [("$", "new rejects null, which old allows")],
    "enum/remove-value": [("$", 'new rejects "b", which old allows')],
    "enum/mixed-to-type": [("$", "new rejects 1, which old allows")],
    "enum/null-into-enum": [("$", "new rejects null, which old allows")],
    "const/from-enum": [("$", 'new rejects "b", which old allows')],
    "const/fraction-to-integer": [("$", "new rejects 1.5, which old allows")],
    "const/string-vs-maxLength": [("$", 'new rejects "abc", which old allows')],
    "const/changed": [("$", 'new rejects "a", which old allows')],
    "bounds/raise-minimum": [("$", "lower bound raised from >= 0 (old) to >= 1 (new)")],
    "bounds/lower-maximum": [("$", "upper bound lowered from <= 100 (old) to <= 10 (new)")],
    "bounds/on-untyped": [("$", "new rejects null, which old allows")],
    "bounds/inclusive-to-exclusive-max": [("$", "upper bound lowered from <= 10 (old) to < 10 (new)")],
    "bounds/inclusive-to-exclusive-min": [("$", "lower bound raised from >= 0 (old) to > 0 (new)")],
    "bounds/number-exclusive-is-not-inclusive-below": [("$", "upper bound lowered from < 10 (old) to <= 9 (new)")],
    "bounds/draft-04-exclusive-flag-false-to-true": [("$", "upper bound lowered from <= 5 (old) to < 5 (new)")],
    "multipleOf/2-to-4": [("$", "new requires multiples of 4")],
    "multipleOf/2-to-3": [("$", "new requires multiples of 3")],
    "multipleOf/add-1-to-number": [("$", "new requires multiples of 1")],
    "minLength/raised": [("$", "length [0, inf) (old) is not inside [1, inf)")],
    "maxLength/lowered": [("$", "length [0, 4] (old) is not inside [0, 2]")],
    "pattern/added-anchored": [("$", 'new requires pattern "^abc$"')],
    "pattern/prefix-to-literal": [("$", 'new requires pattern "^abc$"')],
    "pattern/prefix-longer": [("$", 'new requires pattern "^abc"')],
    "pattern/class-narrowed": [("$", 'new requires pattern "^[a-z]+$"')],
    "pattern/plus-to-fixed-count": [("$", 'new requires pattern "^[0-9]{3}$"')],
    "pattern/alternation-dropped": [("$", 'new requires pattern "^ab$"')],
    "pattern/only-constrains-strings": [("$", "new rejects null, which old allows")],
    "pattern/lookahead-widened": [
        ("$", 'new requires pattern "^(?=a)"; kvlog cannot compare these patterns exactly: kvlog cannot prove it safe')
    ],
    "pattern/backreference-widened": [
        (
            "$",
            'new requires pattern "^(a)\\\\1"; kvlog cannot compare these patterns exactly: kvlog cannot prove it safe',
        )
    ],
    "pattern/lookahead-narrowed": [
        ("$", 'new requires pattern "^(?=ab)"; kvlog cannot compare these patterns exactly')
    ],
    "pattern/backreference-narrowed": [
        ("$", 'new requires pattern "^(a)\\\\1b"; kvlog cannot compare these patterns exactly')
    ],
    "items/narrowed": [("$[*]", "new accepts only integers; old accepts any number")],
    "items/added": [("$[*]", "new rejects null, which old allows")],
    "tuple/open-gains-position": [("$[1]", "new rejects null, which old allows")],
    "tuple/closed-loses-position": [("$[2]", "new accepts no value here; old does")],
    "tuple/rest-narrowed": [("$[*]", "new accepts only string; old has number values")],
    "tuple/position-narrowed": [("$[0]", "new accepts only integers; old accepts any number")],
    "tuple/items-to-tuple": [("$[*]", "new accepts no value here; old does")],
    "tuple/prefixItems-added": [("$[0]", "new rejects null, which old allows")],
    "minItems/raised": [("$", "item count [0, inf) (old) is not inside [1, inf)")],
    "maxItems/lowered": [("$", "item count [0, 3] (old) is not inside [0, 2]")],
    "uniqueItems/added": [("$", "new requires unique items, old does not")],
    "contains/added": [("$", "new requires 1 item(s) matching 'contains' that old may lack")],
    "contains/narrowed": [("$", "new requires 1 item(s) matching 'contains' that old may lack")],
    "minContains/raised": [("$", "new requires 2 item(s) matching 'contains' that old may lack")],
    "minContains/zero-removed": [("$", "new requires 1 item(s) matching 'contains' that old may lack")],
    "maxContains/lowered": [("$", "new allows at most 2 item(s) matching 'contains'; old more")],
    "unevaluatedItems/position-dropped-into-string-rest": [
        ("$[2]", "new accepts only string; old has number values"),
        ("$[*]", "new rejects null, which old allows"),
    ],
    "unevaluatedItems/false-added": [("$[*]", "new accepts no value here; old does")],
    "properties/open-gains-property": [("$.b", "new rejects null, which old allows")],
    "properties/closed-loses-property": [("$.b", "old allows b, new rejects it (closed content model)")],
    "properties/narrowed": [("$.a", "new accepts only integers; old accepts any number")],
    "properties/nested-narrowed": [("$.a.b", "length [0, inf) (old) is not inside [0, 1]")],
    "additionalProperties/true-to-false": [("$.*", "new accepts no value here; old does")],
    "additionalProperties/schema-narrowed": [("$.*", "new accepts only number; old has string values")],
    "required/added": [("$.a", "new requires a; old may lack it")],
    "patternProperties/pattern-narrowed-to-property": [('$["x_"]', "new accepts no value here; old does")],
    "patternProperties/added-on-open-object": [('$["x_"]', "new rejects null, which old allows")],
    "patternProperties/schema-narrowed": [('$["x_"]', "new accepts only integers; old accepts any number")],
    "patternProperties/property-and-pattern-both-apply": [
        ("$.x_a", "new accepts only integers; old accepts any number"),  # the pattern's integer applies to x_a too
        ('$["x_"]', "new rejects null, which old allows"),
    ],
    "propertyNames/added": [("$ property names", "length [0, inf) (old) is not inside [0, 3]")],
    "propertyNames/pattern-narrowed": [("$ property names", 'new requires pattern "^[a-z]+$"')],
    "propertyNames/open-writer-names-outside": [("$ property names", "length [0, 3] (old) is not inside [0, 2]")],
    "propertyNames/added-on-nested-object": [("$.a property names", 'new requires pattern "^x"')],
    "propertyNames/closed-pattern-outside": [
        ('$["x_"]', "new accepts no value here; old does"),
        ("$ property names", 'new requires pattern "^x_a"'),
    ],
    "propertyNames/closed-property-outside": [
        ("$.bb", "old allows bb, new rejects it (closed content model)"),
        ("$ property names", 'new rejects "bb", which old allows'),
    ],
    "minProperties/raised": [("$", "property count [0, inf) (old) is not inside [1, inf)")],
    "maxProperties/lowered": [("$", "property count [0, 2] (old) is not inside [0, 1]")],
    "dependencies/array-added": [("$", "new requires b whenever a is present; old does not")],
    "dependencies/array-grown": [("$", "new requires x_a whenever a is present; old does not")],
    "dependencies/schema-added": [("$.b", "new requires b; old may lack it")],
    "dependencies/schema-narrowed": [("$.b", "new accepts only integers; old accepts any number")],
    "dependentRequired/added": [("$", "new requires b whenever a is present; old does not")],
    "dependentSchemas/added": [("$.b", "new requires b; old may lack it")],
    "dependentSchemas/narrowed": [("$.b", "new accepts only integers; old accepts any number")],
    "unevaluatedProperties/property-removed": [("$.b", "old allows b, new rejects it (closed content model)")],
    "unevaluatedProperties/local-property-removed": [("$.b", "old allows b, new rejects it (closed content model)")],
    "unevaluatedProperties/false-added": [("$.*", "new accepts no value here; old does")],
    "allOf/member-added": [("$", "lower bound raised from none (old) to >= 0 (new)")],
    "anyOf/branch-removed": [("$", "no anyOf branch of new accepts number values; old has them")],
    "anyOf/gap-between-branches": [("$", "the anyOf branches of new leave out values old has")],
    "oneOf/disjoint-branch-removed": [("$", "no oneOf branch of new accepts number values; old has them")],
    "oneOf/overlapping-branch-added": [("$", "kvlog cannot prove each old value matches one oneOf branch")],
    "oneOf/overlapping-writer-to-integer": [("$", "new accepts only integers; old accepts any number")],
    "not/reader-overlaps": [("$", "new forbids values matching a 'not' schema that old may hold")],
    "not/writer-complement-not-covered": [("$", "new rejects null, which old allows")],
    "not/both-narrowed": [("$", "new forbids values matching a 'not' schema that old may hold")],
    "if-then/added": [("$", "new adds an if/then/else that old may not satisfy")],
    "if-then/else-added": [("$", "new adds an if/then/else that old may not satisfy")],
    "if-then-else/then-narrowed": [("$", "length [0, 3] (old) is not inside [0, 2]")],
    "boolean/true-to-false": [("$", "new accepts no value here; old does")],
    "boolean/string-to-false": [("$", "new accepts no value here; old does")],
    "boolean/property-true-to-false": [("$.a", "old allows a, new rejects it (closed content model)")],
    "ref/target-narrowed": [("$", "length [0, 5] (old) is not inside [0, 2]")],
    "ref/in-property-narrowed": [("$.a", "new accepts only integers; old accepts any number")],
    "ref/sibling-added": [("$", "length [0, inf) (old) is not inside [0, 2]")],
    "dynref/target-narrowed": [("$", "new accepts only integers; old accepts any number")],
    "dynref/target-of-the-old": [("$", "new accepts only string; old has integer values")],
    "dynref/embedded-resource": [
        (
            "$",
            "a reference kvlog does not follow (recursive, dynamic or to another document): kvlog cannot prove it safe",
        )
    ],
    "recursiveref/property-made-recursive": [("$.a", "new accepts only object; old has integer values")],
    "mixed/open-tuple-to-closed": [("$[*]", "new accepts no value here; old does")],
    "mixed/tuple-read-as-items-schema": [("$[*]", "new rejects null, which old allows")],
    "mixed/dependentRequired-added": [("$", "new requires b whenever a is present; old does not")],
    "mixed/ref-sibling-now-applies": [("$", "length [0, inf) (old) is not inside [0, 2]")],
    "mixed/draft-04-inclusive-to-exclusive": [("$", "upper bound lowered from <= 10 (old) to < 10 (new)")],
    "mixed/unevaluatedProperties-now-applies": [("$.*", "new accepts no value here; old does")],
    "merge/type-lists-intersect-narrowed": [("$", "new accepts only string; old has integer values")],
    "merge/highest-minimum-raised": [("$", "lower bound raised from >= 3 (old) to >= 4 (new)")],
    "merge/lowest-maximum-lowered": [("$", "upper bound lowered from <= 3 (old) to <= 2 (new)")],
    "merge/highest-exclusive-minimum-raised": [("$", "lower bound raised from > 3 (old) to >= 4 (new)")],
    "merge/lowest-exclusive-maximum-lowered": [("$", "upper bound lowered from < 3 (old) to <= 2 (new)")],
    "merge/lengths-narrowed": [("$", "length [2, 3] (old) is not inside [3, inf)")],
    "merge/item-counts-narrowed": [("$", "item count [2, 3] (old) is not inside [0, 2]")],
    "merge/property-counts-narrowed": [("$", "property count [2, 3] (old) is not inside [0, 2]")],
    "merge/contains-counts-of-one-contains-raised": [
        ("$", "new requires 3 item(s) matching 'contains' that old may lack")
    ],
    "merge/contains-counts-of-one-contains-lowered": [
        ("$", "new allows at most 2 item(s) matching 'contains'; old more")
    ],
    "merge/contains-counts-without-contains": [("$", "new requires 2 item(s) matching 'contains' that old may lack")],
    "merge/then-and-else-without-if": [("$", "length [0, inf) (old) is not inside [0, 1]")],
    "merge/two-conditions-kept-narrowed": [("$", "upper bound lowered from <= 1 (old) to <= 0 (new)")],
    "merge/required-union-grown": [("$.c", "new requires c; old may lack it")],
    "merge/enum-intersection-narrowed": [("$", "new rejects 3, which old allows")],
    "merge/property-schemas-narrowed": [("$.a", "lower bound raised from >= 0 (old) to >= 1 (new)")],
    "merge/pattern-property-schemas-narrowed": [('$["x_"]', "upper bound lowered from <= 5 (old) to <= 0 (new)")],
    "merge/dependent-required-grown": [("$", "new requires c whenever a is present; old does not")],
    "merge/negations-narrowed": [("$", "new forbids values matching a 'not' schema that old may hold")],
    "merge/nested-allOf-narrowed": [("$", "lower bound raised from >= 0 (old) to >= 1 (new)")],
    "merge/other-keywords-kept-narrowed": [("$", "new requires multiples of 12")],
    "oneOf/other-branch-values-inside-writer": [("$", "kvlog cannot prove each old value matches one oneOf branch")],
    "oneOf/other-branch-optional-member-of-same-type": [
        ("$", "kvlog cannot prove each old value matches one oneOf branch")
    ],
    "oneOf/other-branch-pattern-overlaps": [("$", "kvlog cannot prove each old value matches one oneOf branch")],
    "oneOf/other-branch-range-overlaps": [("$", "kvlog cannot prove each old value matches one oneOf branch")],
    "not/union-of-types-narrowed": [("$", "new accepts only boolean|number|object; old has array values")],
    "allOf/reader-adds-two-members": [("$", "length [0, inf) (old) is not inside [0, 3]")],
    "allOf/reader-nested-member": [("$", "length [0, inf) (old) is not inside [0, 3]")],
    "anyOf/integer-ranges-gap": [("$", "the anyOf branches of new leave out values old has")],
    "anyOf/number-ranges-miss-a-point": [("$", "the anyOf branches of new leave out values old has")],
    "anyOf/bounded-writer-top-left-out": [("$", "the anyOf branches of new leave out values old has")],
    "anyOf/strings-by-pattern-gap": [("$", "the anyOf branches of new leave out values old has")],
    "if-then/writer-always-meets-if": [("$", "length [2, inf) (old) is not inside [0, 5]")],
    "if-then/writer-never-meets-if": [("$", "length [0, inf) (old) is not inside [0, 3]")],
    "additionalProperties/schema-narrowed-beside-extra": [("$.*", "new accepts only number; old has string values")],
    "additionalProperties/schema-narrowed-beside-pattern": [
        ('$[""]', "new accepts only integers; old accepts any number")
    ],
    "additionalProperties/pattern-narrowed-beside-schema": [
        ('$["x_"]', "new accepts only integers; old accepts any number")
    ],
    "patternProperties/removed-from-closed": [('$["x_"]', "new accepts no value here; old does")],
    "patternProperties/more-than-kvlog-compares": [
        ("$", "too many patternProperties to compare exactly: kvlog cannot prove it safe")
    ],
    "patternProperties/lookahead": [
        ("$", "a patternProperties pattern kvlog cannot compare exactly: kvlog cannot prove it safe")
    ],
    "tuple/reader-prefix-within-writer-maxItems": [("$[1]", "new accepts only number; old has string values")],
    "tuple/reader-prefix-on-items-writer": [("$[1]", "new accepts only integers; old accepts any number")],
    "anyOf/integer-ranges-leave-out-below": [("$", "the anyOf branches of new leave out values old has")],
    "anyOf/number-ranges-gap-between": [("$", "the anyOf branches of new leave out values old has")],
    "anyOf/number-ranges-leave-out-above": [("$", "the anyOf branches of new leave out values old has")],
    "oneOf/one-branch-of-the-writer-type": [("$", "length [0, inf) (old) is not inside [0, 2]")],
    "not/integers-out-of-numbers": [("$", "new accepts only string; old has number values")],
    "unevaluatedItems/beside-contains": [("$", "unevaluatedItems beside contains")],
    "maxProperties/closed-writer-has-more": [("$", "property count [0, 3] (old) is not inside [0, 2]")],
    "anyOf/false-branch-beside-other-type": [("$", "no anyOf branch of new accepts string values; old has them")],
    "anyOf/one-branch-of-the-writer-type": [("$", "length [0, inf) (old) is not inside [0, 1]")],
    "anyOf/number-ranges-gap-above-two": [("$", "the anyOf branches of new leave out values old has")],
    "uniqueItems/added-under-maxItems-2": [("$", "new requires unique items, old does not")],
    "bounds/integer-exclusive-maximum-lowered": [("$", "upper bound lowered from <= 9 (old) to <= 8 (new)")],
    "merge/contains-counts-default-minimum": [("$", "new requires 2 item(s) matching 'contains' that old may lack")],
}


# Where the rule itself builds the instance, which one kvlog shows: the first value the anyOf branches
# leave out (below, between or above them), the member name no property claims, the string no pattern covers.
EXAMPLES: dict[str, Any] = {
    "anyOf/integer-ranges-gap": 1,
    "anyOf/integer-ranges-leave-out-below": 4,
    "anyOf/number-ranges-miss-a-point": 0,
    "anyOf/number-ranges-gap-between": 0.5,
    "anyOf/number-ranges-leave-out-above": 2.5,
    "anyOf/number-ranges-gap-above-two": 3,
    "anyOf/bounded-writer-top-left-out": 10,
    "anyOf/strings-by-pattern-gap": "z",
    "additionalProperties/schema-narrowed-beside-extra": {"x": ""},
    "additionalProperties/schema-narrowed-beside-pattern": {"": 0.5},
}

# --------------------------------------------------------------------------------------------- the truth


def reference(schema: Any, draft: Draft) -> jsonschema.protocols.Validator:
    """The reference validator of ``schema``: the draft its ``$schema`` names, else ``draft``; formats not asserted."""
    cls = jsonschema.validators.validator_for(schema, default=REFERENCE[draft])
    return cls(schema)


def names_in(schema: Any) -> set[str]:
    """Every property name a schema mentions (properties, required, dependencies), at any depth."""
    found: set[str] = set()
    if isinstance(schema, dict):
        for key, value in schema.items():
            if key in ("properties", "dependencies", "dependentRequired", "dependentSchemas") and isinstance(
                value, dict
            ):
                found |= set(value)
                for need in value.values():
                    if isinstance(need, list):
                        found |= {n for n in need if isinstance(n, str)}
            if key == "required" and isinstance(value, list):
                found |= {n for n in value if isinstance(n, str)}
            found |= names_in(value)
    elif isinstance(schema, list):
        for sub in schema:
            found |= names_in(sub)
    return found


SCALARS: list[Any] = [
    None, True, False, 0, 1, -1, 2, 3, 4, 5, 6, 8, 9, 10, 11, 12, 100, 101, 0.5, 1.5, 2.5, 9.5, 10.5, -0.5, 0.25,
    1e6, -1e6, 2**53 + 1, 10**20, 1e300,
    "", "a", "b", "A", "x", "1", "12", "123", "1234", "ab", "abc", "abcd", "abd", "abcx", "aa", "aaa", "aaaa",
    "aab", "aA", "Ab", "x_a", "a_b", "abcdefghijk", "é",
]  # fmt: skip
VALUES: list[Any] = [None, True, 0, 1, -1, 0.5, 1.5, "", "a", "abc", [], {}, [1], ["a"]]
ITEMS: list[Any] = [1, 0, "a", None, 0.5, True]
FIXED_NAMES = ("a", "b", "c", "v", "x_a", "x_b", "zz", "abcd", "A")


PAIR_VALUES: list[Any] = [None, 1, 0.5, "a", "abc"]


@functools.cache
def structural(mentioned: frozenset[str]) -> tuple[Any, ...]:
    """Instances of every type, and objects built from the property names the two schemas mention."""
    found: list[Any] = [*SCALARS]
    for size in range(4):
        found += [list(items) for items in itertools.product(ITEMS, repeat=size)]
    found += [["a", "a", "a"], ["a", "a", "a", "a"], [1, 1, 1, 1], ["a", 1, 1, 1], [[]], [{}], ["abc"], [2**53 + 1]]
    nested = [{n: v} for n in sorted(mentioned) for v in ("a", "abc", 1, 0.5, None)]
    found.append({})
    found += [{name: value} for name in sorted(mentioned | set(FIXED_NAMES)) for value in [*VALUES, *nested]]
    few = sorted(mentioned | {"x_a", "zz"})
    for first, second in itertools.combinations(few, 2):
        found += [{first: one, second: two} for one, two in itertools.product(PAIR_VALUES, repeat=2)]
    for size in (3, 4):
        for chosen in itertools.combinations(few, size):
            found += [dict.fromkeys(chosen, value) for value in ("a", 1, 0.5, None)]
    found.append({"a": {"a": {"a": 1}}, "c": {"c": {"v": "a"}}, "v": 1})
    return tuple(found)


HYPOTHESIS = settings(
    max_examples=30,
    derandomize=True,
    deadline=None,
    database=None,
    phases=[Phase.generate],
    suppress_health_check=list(HealthCheck),
)


@functools.cache
def generated(old_text: str) -> tuple[Any, ...]:
    """What hypothesis-jsonschema draws from a schema (it reads every draft alike; the validators judge)."""
    drawn: list[Any] = []

    def keep(value: Any) -> bool:
        drawn.append(value)
        return False

    try:
        find(from_schema(json.loads(old_text)), keep, settings=HYPOTHESIS)
    except NoSuchExample:
        pass
    except (HypothesisException, HypothesisRefResolutionError, jsonschema.exceptions.SchemaError, Unresolvable):
        pass  # hypothesis-jsonschema cannot read this schema (a keyword of a newer draft): structure only
    except AttributeError:
        # hypothesis-jsonschema 0.23.1 calls a Hypothesis internal (``many.more``) that Hypothesis 6.170
        # no longer has, whenever it draws an object: objects come from the structural list alone.
        pass
    return tuple(drawn)


@functools.cache
def witness(old_text: str, new_text: str, draft: Draft) -> tuple[Any, ...]:
    """An instance ``old`` accepts and ``new`` rejects, boxed in a 1-tuple; ``()`` when the search finds none."""
    old, new = json.loads(old_text), json.loads(new_text)
    accepts, also = reference(old, draft), reference(new, draft)
    for value in itertools.chain(structural(frozenset(names_in(old) | names_in(new))), generated(old_text)):
        if accepts.is_valid(value) and not also.is_valid(value):
            return (value,)
    return ()


def truth(old: Any, new: Any, draft: Draft) -> tuple[Expected, tuple[Any, ...]]:
    found = witness(json.dumps(old, sort_keys=True), json.dumps(new, sort_keys=True), draft)
    return ("breaking" if found else "compatible"), found


def proven(instance: Any, accepted_by: Any, rejected_by: Any, draft: Draft) -> bool:
    return bool(reference(accepted_by, draft).is_valid(instance)) and not reference(rejected_by, draft).is_valid(
        instance
    )


# ------------------------------------------------------------------------------------------------- tests

TABLE = cases()


def param(case: Case) -> Any:
    name, draft, old, new, expected = case
    return pytest.param(name, draft, old, new, expected, id=f"{name}[{draft}]")


def test_the_table_covers_every_draft_and_is_big_enough() -> None:
    assert len(TABLE) >= 150
    ids = [f"{name}[{draft}]" for name, draft, *_ in TABLE]
    assert len(ids) == len(set(ids)), [i for i in ids if ids.count(i) > 1]
    assert {draft for _, draft, *_ in TABLE} == set(DRAFTS)
    for draft in DRAFTS:
        verdicts = {expected for _, d, _, _, expected in TABLE if d == draft}
        assert {"compatible", "breaking"} <= verdicts, draft


def test_every_row_that_is_not_compatible_says_why_and_no_other_does() -> None:
    named = {name for name, _, _, _, expected in TABLE if expected != "compatible"}
    assert set(REASONS) == named
    assert all(REASONS.values())


@pytest.mark.parametrize(("name", "draft", "old", "new", "expected"), [param(case) for case in TABLE])
def test_compare_agrees_with_the_witness_search(
    name: str, draft: Draft, old: Any, new: Any, expected: Expected
) -> None:
    actual, found = truth(old, new, draft)
    if expected != "undecided":
        assert expected == actual, f"the table says {expected}, the witness search says {actual}: {found}"

    verdict = compare(old, new, draft=draft)
    if verdict.compatible is False:
        assert verdict.direction == "backward"
        assert proven(verdict.counterexample, old, new, draft), f"counterexample {verdict.counterexample!r} is no proof"
    if expected == "undecided":
        # kvlog is documented to stay undecided here; should it decide, it must be right
        assert verdict.compatible in (None, actual == "compatible"), (verdict, found)
    elif expected == "compatible":
        assert verdict.compatible is True, (verdict, found)
    else:
        assert verdict.compatible is False, (verdict, found)
    said = [(reason.path, reason.message) for reason in verdict.reasons]
    assert said == ([] if expected == "compatible" else REASONS[name])
    if name in EXAMPLES:
        assert verdict.counterexample == EXAMPLES[name]
        assert type(verdict.counterexample) is type(EXAMPLES[name])

    full = compare(old, new, mode="full", draft=draft)
    if full.compatible is False:
        accepted_by, rejected_by = (old, new) if full.direction == "backward" else (new, old)
        assert proven(full.counterexample, accepted_by, rejected_by, draft), (
            f"full: {full.direction} counterexample {full.counterexample!r} is no proof"
        )
    if expected == "breaking":
        assert full.compatible is False
