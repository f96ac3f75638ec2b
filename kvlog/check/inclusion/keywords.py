"""The keyword table: which rule judges each reader keyword.

The table plays the part of python-jsonschema's validators, which map keywords to the functions
of its ``_keywords.py``.

A reader part made of one applicator's keywords goes to that applicator's rule (``APPLICATORS``);
any other part is judged for each type of the writer by ``typed``, which ends in the type's own rule
(``TYPES``). ``KEYWORDS`` names the rule that reads every keyword the reader may hold (the keywords
``kvlog.check.drafts`` reads every draft into): a keyword outside it has no rule, and the judge
will not call a schema that holds one compatible.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kvlog.check.inclusion import applicators, arrays, objects, scalars
from kvlog.check.inclusion.kinds import admits, covers, finite, names
from kvlog.check.inclusion.outcome import YES, Inclusion
from kvlog.check.inclusion.witnesses import refute, search, undecided
from kvlog.check.jsondiff import show

if TYPE_CHECKING:
    from kvlog.check.inclusion.judge import Judge

Rule = Callable[["Judge", str, dict[str, Any], dict[str, Any], str], Inclusion]


def typed(judge: Judge, kind: str, writer: dict[str, Any], reader: dict[str, Any], path: str) -> Inclusion:
    """``type``, ``enum`` and ``const``, then the rule of the writer branch's type (none for null, boolean)."""
    listed = finite(writer)
    if listed is not None:
        return scalars.values(judge, listed, writer, reader, path)
    if not covers(reader, kind):
        if kind == "number" and admits(reader, "integer"):
            return search(writer, reader, path, f"{judge.r} accepts only integers; {judge.w} accepts any number")
        allowed = reader.get("type")
        return refute(path, writer, f"{judge.r} accepts only {names(allowed)}; {judge.w} has {kind} values")
    if "enum" in reader or "const" in reader:
        listed = reader["enum"] if "enum" in reader else [reader["const"]]
        return search(writer, reader, path, f"{judge.r} allows only {show(listed)}; {judge.w} allows more")
    rule = TYPES.get(kind)
    return rule(judge, kind, writer, reader, path) if rule is not None else YES


def reference(judge: Judge, kind: str, writer: dict[str, Any], reader: dict[str, Any], path: str) -> Inclusion:
    """A reference left in a schema after reading: recursive, to another document, or dynamic; never followed here."""
    return undecided(path, "a reference kvlog does not follow (recursive, dynamic or to another document)")


APPLICATORS: dict[str, Rule] = {
    "allOf": applicators.all_of,
    "anyOf": applicators.any_of,
    "oneOf": applicators.one_of,
    "not": applicators.not_,
    "if": applicators.conditional,
    "then": applicators.conditional,
    "else": applicators.conditional,
    "dependentSchemas": applicators.dependent_schemas,
}

TYPES: dict[str, Rule] = {
    "integer": scalars.numbers,
    "number": scalars.numbers,
    "string": scalars.strings,
    "array": arrays.arrays,
    "object": objects.objects,
}

KEYWORDS: dict[str, Callable[..., Inclusion]] = {
    **APPLICATORS,
    "$ref": reference,
    **dict.fromkeys(("type", "enum", "const"), typed),
    **dict.fromkeys(("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"), scalars.numbers),
    **dict.fromkeys(("minLength", "maxLength", "pattern"), scalars.strings),
    **dict.fromkeys(("minItems", "maxItems"), arrays.item_count),
    "uniqueItems": arrays.unique_items,
    **dict.fromkeys(("prefixItems", "items", "unevaluatedItems"), arrays.positions),
    **dict.fromkeys(("contains", "minContains", "maxContains"), arrays.contains),
    **dict.fromkeys(("properties", "required"), objects.members),
    **dict.fromkeys(("patternProperties", "additionalProperties", "unevaluatedProperties"), objects.other_members),
    "propertyNames": objects.property_names,
    **dict.fromkeys(("minProperties", "maxProperties"), objects.property_counts),
    "dependentRequired": objects.dependent_required,
}
