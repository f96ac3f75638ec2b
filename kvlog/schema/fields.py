"""What a schema says each field may hold: its JSON types, null, sign, listed values, requiredness.

The typed constructors (``kvlog.schema.codegen``), the text-log grammar (a placeholder captures digits
for an integer, one of the values for an enum) and the naming rules of ``kvlog check`` (a ``*_bytes``
field is a non-negative integer) all need these facts. They are read here, once, from the schema with
every ``$ref`` resolved through the catalog's registry (``kvlog.schema.walk.dereference``): a field
typed through a shared definition, a local ``$defs`` entry or a chain of references reads exactly as
one written inline, and two documents whose ``$id``s end alike are never confused.

The facts over-approximate: keywords that only narrow conditionally (``not``, ``if``/``then``/``else``,
``prefixItems``) are not read, so a value the facts rule out is invalid, while one they allow may
still be refused by the validator. Each consumer relies only on that direction.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from kvlog.schema.readings import json_number
from kvlog.schema.walk import dereference

if TYPE_CHECKING:
    from referencing import Registry

#: JSON Schema's types, in the order their Python counterparts are listed (null last).
JSON_TYPES = ("integer", "number", "string", "boolean", "object", "array", "null")
_NUMERIC = frozenset({"integer", "number"})


@dataclass(frozen=True)
class Facts:
    """What a value valid against one (dereferenced) subschema can be.

    ``types`` is None when the schema does not restrict the type. ``values`` lists the only values
    allowed (``enum``, ``const``, or a null-only type) and is None when they are not listed. ``signed``
    says whether a negative number is allowed. ``items`` describes each element of an array, ``entries``
    each value of a map (an object described only by ``additionalProperties``); None: anything.
    """

    types: frozenset[str] | None = None
    values: tuple[Any, ...] | None = None
    signed: bool = True
    items: Facts | None = None
    entries: Facts | None = None

    @classmethod
    def of(cls, schema: Any) -> Facts:
        """The facts of ``schema``, whose ``$ref``s are already resolved (``kvlog.schema.walk.dereference``)."""
        if schema is False:
            return NOTHING
        if not isinstance(schema, dict):
            return ANYTHING
        facts = _own(schema)
        for conjunct in _subschemas(schema, "allOf"):
            facts = facts.both(cls.of(conjunct))
        for keyword in ("anyOf", "oneOf"):
            branches = [cls.of(branch) for branch in _subschemas(schema, keyword)]
            if branches:
                union = branches[0]
                for branch in branches[1:]:
                    union = union.either(branch)
                facts = facts.both(union)
        return facts

    @property
    def nullable(self) -> bool:
        """Whether the schema names null among the values (an unrestricted schema does not name it)."""
        return self.types is not None and "null" in self.types

    @property
    def choices(self) -> tuple[Any, ...]:
        """The listed values other than null; empty when the values are not listed."""
        return tuple(v for v in self.values or () if v is not None)

    @property
    def kind(self) -> Literal["enum", "integer", "number", "string"]:
        """What a log line prints for the field: one of listed values, a whole number, any number, or text."""
        if self.values is not None:
            return "enum"
        types = self.types or frozenset()
        return "integer" if "integer" in types else "number" if "number" in types else "string"

    def either(self, other: Facts) -> Facts:
        """Facts of a value valid against this schema or ``other`` (``anyOf``, ``oneOf``)."""
        values = None if self.values is None or other.values is None else _merge(self.values, other.values)
        return Facts(
            types=None if self.types is None or other.types is None else self.types | other.types,
            values=values,
            signed=self.signed or other.signed,
            items=None if self.items is None or other.items is None else self.items.either(other.items),
            entries=None if self.entries is None or other.entries is None else self.entries.either(other.entries),
        )

    def both(self, other: Facts) -> Facts:
        """Facts of a value valid against this schema and ``other`` (``allOf``, sibling keywords)."""
        if self.values is not None and other.values is not None:
            values: tuple[Any, ...] | None = tuple(v for v in self.values if _listed(v, other.values))
        elif self.values is not None or other.values is not None:
            listed, typed = (self, other) if self.values is not None else (other, self)
            values = tuple(v for v in listed.values or () if _admits(typed.types, v))
        else:
            values = None
        types = _intersect(self.types, other.types)
        if values is not None:
            types = frozenset(_type_of(v) for v in values)
        return Facts(
            types=types,
            values=values,
            signed=self.signed and other.signed and (values is None or any(_negative(v) for v in values)),
            items=_both(self.items, other.items),
            entries=_both(self.entries, other.entries),
        )


ANYTHING = Facts()
NOTHING = Facts(types=frozenset(), values=(), signed=False)


@dataclass(frozen=True)
class Field:
    """One property of an object schema: its name, whether ``required`` lists it, and its value's facts."""

    name: str
    required: bool
    facts: Facts


def fields(schema: Mapping[str, Any], registry: Registry[Any]) -> dict[str, Field]:
    """Each property of ``schema`` (an event schema with a ``$id`` in ``registry``), in the schema's order.

    ``required`` is the top-level list: a field required only under a condition (``if``/``then``) is
    not required here. Raises ``kvlog.schema.errors.DerefError`` when a ``$ref`` does not resolve.
    """
    resolved = dereference(dict(schema), registry, schema["$id"])
    required = set(resolved.get("required", ()))
    return {name: Field(name, name in required, Facts.of(sub)) for name, sub in resolved.get("properties", {}).items()}


def fields_to_json(fields: Mapping[str, Field]) -> list[Any]:
    """``fields`` as JSON data, for ``kvlog.schema.stored``; ``fields_from_json`` reads them back equal."""
    return [[f.name, f.required, _facts_to_json(f.facts)] for f in fields.values()]


def fields_from_json(data: list[Any]) -> dict[str, Field]:
    """The fields ``fields_to_json`` wrote, in their order (TypeError or ValueError: not what it writes)."""
    return {name: Field(name, required, _facts_from_json(facts)) for name, required, facts in data}


def _facts_to_json(facts: Facts | None) -> Any:
    if facts is None:
        return None
    types = None if facts.types is None else sorted(facts.types)
    values = None if facts.values is None else list(facts.values)
    return [types, values, facts.signed, _facts_to_json(facts.items), _facts_to_json(facts.entries)]


def _facts_from_json(data: list[Any]) -> Facts:
    types, values, signed, items, entries = data
    return Facts(
        types=None if types is None else frozenset(types),
        values=None if values is None else tuple(values),
        signed=signed,
        items=None if items is None else _facts_from_json(items),
        entries=None if entries is None else _facts_from_json(entries),
    )


def _own(schema: Mapping[str, Any]) -> Facts:
    """The facts of ``schema``'s own keywords, its ``allOf``/``anyOf``/``oneOf`` aside."""
    declared = schema.get("type")
    names = [declared] if isinstance(declared, str) else declared if isinstance(declared, list) else None
    types = frozenset(t for t in names if t in JSON_TYPES) if names is not None else None
    facts = Facts(
        types=types,
        values=(None,) if types == frozenset({"null"}) else None,
        signed=_numbers_may_be_negative(schema, types),
        items=Facts.of(schema["items"]) if "items" in schema else None,
        entries=Facts.of(schema["additionalProperties"]) if _is_map(schema) else None,
    )
    for listed in (schema.get("enum"), [schema["const"]] if "const" in schema else None):
        if isinstance(listed, list):
            facts = facts.both(Facts(types=frozenset(_type_of(v) for v in listed), values=tuple(listed)))
    return facts


def _numbers_may_be_negative(schema: Mapping[str, Any], types: frozenset[str] | None) -> bool:
    numeric = _NUMERIC if types is None else types & _NUMERIC
    if not numeric:
        return False
    if _at_least(schema.get("minimum"), 0):
        return False
    # Above -1, an integer is at least 0; a number with fractions is not.
    return not _at_least(schema.get("exclusiveMinimum"), -1 if numeric == {"integer"} else 0)


def _is_map(schema: Mapping[str, Any]) -> bool:
    """An object whose every value ``additionalProperties`` describes: no named or patterned properties."""
    return "additionalProperties" in schema and not schema.get("properties") and not schema.get("patternProperties")


def _subschemas(schema: Mapping[str, Any], keyword: str) -> list[Any]:
    branches = schema.get(keyword)
    return branches if isinstance(branches, list) else []


def _intersect(a: frozenset[str] | None, b: frozenset[str] | None) -> frozenset[str] | None:
    if a is None or b is None:
        return b if a is None else a
    common = set(a & b)
    if ("number" in a and "integer" in b) or ("integer" in a and "number" in b):
        common.add("integer")  # every integer is a number
    return frozenset(common)


def _both(a: Facts | None, b: Facts | None) -> Facts | None:
    if a is None or b is None:
        return b if a is None else a
    return a.both(b)


def _merge(a: Iterable[Any], b: Iterable[Any]) -> tuple[Any, ...]:
    merged: list[Any] = []
    for value in [*a, *b]:
        if not _listed(value, merged):
            merged.append(value)
    return tuple(merged)


def _listed(value: Any, values: Iterable[Any]) -> bool:
    """Whether JSON-equal ``value`` is among ``values`` (``True`` is not ``1``, ``1.0`` is)."""
    return any(_type_of(value) == _type_of(other) and value == other for other in values)


def _admits(types: frozenset[str] | None, value: Any) -> bool:
    if types is None:
        return True
    kind = _type_of(value)
    return kind in types or (kind == "integer" and "number" in types)


def _type_of(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer()):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _at_least(bound: object, floor: int) -> bool:
    """Whether ``bound`` is a number (a JSON one: not a boolean) no lower than ``floor``."""
    return json_number(bound) and bound >= floor


def _negative(value: Any) -> bool:
    return json_number(value) and value < 0
