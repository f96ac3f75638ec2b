"""Walking JSON Schemas by keyword, so that data (``enum`` values, property names) is never taken for schema.

Dereferencing, normalising and the naming rules all need to visit subschemas and only subschemas: a
property called ``description`` or an enum value holding a ``"$ref"`` key is data, not a keyword.
``follow`` is kvlog's only way to follow a ``$ref``: it asks a ``referencing`` registry, so a
reference reaches the document its ``$id`` names. ``dereference`` inlines every reference through the
catalog's registry (what a field may hold is read from its result, ``kvlog.schema.fields``); the
compatibility verdict's draft reader (``kvlog.check.drafts``) follows them through one document's.
The drafts (``Draft``), the one a document names (``declared``) and the keywords each defines
(``KEYWORDS``) are this module's tables too, so that every reader of a schema reads its draft alike.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from kvlog.schema.errors import DerefError

if TYPE_CHECKING:
    from referencing import Registry
    from referencing._core import Resolver

Draft = Literal["draft-04", "draft-06", "draft-07", "2019-09", "2020-12"]

_BY_URI: dict[str, Draft] = {
    "json-schema.org/draft-04/schema": "draft-04",
    "json-schema.org/draft-06/schema": "draft-06",
    "json-schema.org/draft-07/schema": "draft-07",
    "json-schema.org/draft/2019-09/schema": "2019-09",
    "json-schema.org/draft/2020-12/schema": "2020-12",
}

# Drafts whose $ref replaces the whole schema it sits in: its sibling keywords are ignored.
REF_HIDES_SIBLINGS: frozenset[Draft] = frozenset({"draft-04", "draft-06", "draft-07"})

_COMMON = frozenset(
    {
        "type",
        "enum",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "minLength",
        "maxLength",
        "pattern",
        "items",
        "additionalItems",
        "minItems",
        "maxItems",
        "uniqueItems",
        "properties",
        "patternProperties",
        "additionalProperties",
        "required",
        "minProperties",
        "maxProperties",
        "dependencies",
        "allOf",
        "anyOf",
        "oneOf",
        "not",
        "$ref",
    }
)
# The assertions and applicators each draft defines; anything else in a schema is an annotation there.
KEYWORDS: dict[Draft, frozenset[str]] = {
    "draft-04": _COMMON,
    "draft-06": _COMMON | {"const", "contains", "propertyNames"},
    "draft-07": _COMMON | {"const", "contains", "propertyNames", "if", "then", "else"},
}
KEYWORDS["2019-09"] = (KEYWORDS["draft-07"] - {"dependencies"}) | {
    "dependentRequired",
    "dependentSchemas",
    "unevaluatedItems",
    "unevaluatedProperties",
    "minContains",
    "maxContains",
}
KEYWORDS["2020-12"] = (KEYWORDS["2019-09"] - {"additionalItems"}) | {"prefixItems"}

# Keywords only the drafts before 2019-09 define, and keywords only 2019-09 and later define.
EARLIER_ONLY = frozenset({"definitions", "dependencies", "additionalItems"})
LATER_ONLY = frozenset(
    {"$defs", "prefixItems", "unevaluatedItems", "unevaluatedProperties", "dependentRequired", "dependentSchemas"}
    | {"minContains", "maxContains", "$anchor", "$dynamicRef", "$recursiveRef"}
)

# Keywords whose value is one subschema, a list of them, or a name -> subschema map (Draft 2020-12,
# plus the earlier drafts' positions: an ``items`` list, ``additionalItems``, ``definitions`` and
# the schema values of ``dependencies``, so that references inside them are followed too).
SINGLE = frozenset(
    {
        "additionalItems",
        "additionalProperties",
        "propertyNames",
        "items",
        "contains",
        "not",
        "if",
        "then",
        "else",
        "unevaluatedProperties",
        "unevaluatedItems",
        "contentSchema",
    }
)
LISTS = frozenset({"allOf", "anyOf", "oneOf", "prefixItems"})
MAPS = frozenset({"properties", "patternProperties", "dependentSchemas", "$defs", "definitions", "dependencies"})

# Keywords that never change which instances are valid: edits to them are rewording, not a new contract.
ANNOTATIONS = frozenset(
    {
        "title",
        "description",
        "$comment",
        "examples",
        "default",
        "deprecated",
        "readOnly",
        "writeOnly",
        "format",
        "contentMediaType",
        "contentEncoding",
        "$schema",
        "$id",
        "$anchor",
        "$dynamicAnchor",
        "$vocabulary",
        "$defs",
        "definitions",
    }
)

Transform = Callable[[Any, tuple[str, ...]], Any]
_JSON_TYPES = {list: "array", str: "string", int: "number", float: "number", type(None): "null"}


def map_subschemas(schema: Any, transform: Transform, path: tuple[str, ...] = ()) -> Any:
    """A copy of ``schema`` whose direct subschemas are replaced by ``transform(subschema, path)``."""
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in SINGLE and not isinstance(value, list):
            out[key] = transform(value, (*path, key))
        elif (key in LISTS or key == "items") and isinstance(value, list):
            out[key] = [transform(item, (*path, key, str(i))) for i, item in enumerate(value)]
        elif key in MAPS and isinstance(value, dict):
            out[key] = {
                name: sub if isinstance(sub, list) else transform(sub, (*path, key, name))  # dependencies: [names]
                for name, sub in value.items()
            }
        else:
            out[key] = value
    return out


def declared(schema: Any) -> Draft | None:
    """The draft a document's ``$schema`` names, or None when it names none kvlog knows."""
    uri = schema.get("$schema") if isinstance(schema, dict) else None
    if not isinstance(uri, str):
        return None
    return _BY_URI.get(uri.split("://", 1)[-1].rstrip("#"))


@dataclass(frozen=True)
class Followed:
    """The schema a ``$ref`` names, the resolver for references inside it, and the targets followed to it."""

    contents: Any
    resolver: Resolver[Any]
    seen: tuple[int, ...]


def follow(ref: str, resolver: Resolver[Any], path: tuple[str, ...], seen: tuple[int, ...]) -> Followed | None:
    """The schema ``ref`` names, looked up by ``resolver``; None when it leads back into a target in ``seen``.

    ``seen`` holds the targets followed to get here (the registry holds each target once, so identity
    names it). Raises ``DerefError`` when ``ref`` does not resolve or names something that is no schema.
    """
    # imported here: a catalog's fields are usually read back from kvlog.schema.stored, without it
    from referencing.exceptions import Unresolvable  # noqa: PLC0415

    try:
        resolved = resolver.lookup(ref)
    except (Unresolvable, ValueError, TypeError) as exc:  # ValueError: not a URI (urljoin on "http://[")
        raise DerefError(ref, path, f"does not resolve ({type(exc).__name__})") from None
    if not isinstance(resolved.contents, dict | bool):
        kind = _JSON_TYPES.get(type(resolved.contents), "value")
        raise DerefError(ref, path, f"points at a JSON {kind}, not at a schema")
    target_key = id(resolved.contents)
    if target_key in seen:
        return None
    return Followed(resolved.contents, resolved.resolver, (*seen, target_key))


def document_resolver(schema: Any, draft: Draft) -> Resolver[Any]:
    """A resolver of the references inside ``schema`` alone, read as ``draft``: another document is unknown."""
    from referencing import Registry  # noqa: PLC0415 - as in follow
    from referencing.jsonschema import DRAFT4, DRAFT6, DRAFT7, DRAFT201909, DRAFT202012  # noqa: PLC0415

    specifications = {
        "draft-04": DRAFT4,
        "draft-06": DRAFT6,
        "draft-07": DRAFT7,
        "2019-09": DRAFT201909,
        "2020-12": DRAFT202012,
    }
    resource = specifications[draft].create_resource(schema)
    uri = resource.id() or ""
    registry: Registry[Any] = Registry().with_resource(uri, resource)  # crawled at a first miss (an $id, an anchor)
    return registry.resolver(base_uri=uri)


def dereference(schema: Any, registry: Registry[Any], base_uri: str) -> Any:
    """``schema`` with every ``$ref`` replaced by what it points to, so two versions compare field by field.

    A ``$ref`` with sibling keywords keeps them (2019-09 and 2020-12 apply both); when a sibling would
    collide with a keyword of the target, the target goes under ``allOf`` instead of being merged.
    In a schema whose ``$schema`` is draft-04, -06 or -07, the siblings are ignored, as those drafts say.
    """
    alone = declared(schema) in REF_HIDES_SIBLINGS
    return _Dereferencer(registry, alone).resolve(schema, registry.resolver(base_uri=base_uri), (), ())


class _Dereferencer:
    def __init__(self, registry: Registry[Any], siblings_ignored: bool) -> None:
        self.registry = registry
        self.siblings_ignored = siblings_ignored

    def resolve(self, schema: Any, resolver: Any, path: tuple[str, ...], seen: tuple[int, ...]) -> Any:
        if not isinstance(schema, dict):
            return schema
        ref = schema.get("$ref")
        if isinstance(ref, str):
            followed = follow(ref, resolver, path, seen)
            if followed is None:
                raise DerefError(ref, path, "is recursive; kvlog event schemas must be finite")
            target = self.resolve(followed.contents, followed.resolver, path, followed.seen)
            if self.siblings_ignored:
                return target  # up to draft-07, a $ref's sibling keywords are ignored
            siblings = {k: v for k, v in schema.items() if k != "$ref"}
            siblings = self._children(siblings, resolver, path, seen)
            return _merge(target, siblings)
        return self._children(schema, resolver, path, seen)

    def _children(self, schema: dict[str, Any], resolver: Any, path: tuple[str, ...], seen: tuple[int, ...]) -> Any:
        return map_subschemas(schema, lambda sub, sub_path: self.resolve(sub, resolver, sub_path, seen), path)


def _merge(target: Any, siblings: dict[str, Any]) -> Any:
    if not siblings:
        return target
    if not isinstance(target, dict):
        return {"allOf": [target], **siblings}
    clashes = [k for k in siblings if k in target and k not in ANNOTATIONS and siblings[k] != target[k]]
    if clashes:
        return {"allOf": [target], **siblings}
    return {**target, **siblings}


def strip_annotations(schema: Any) -> Any:
    """``schema`` without annotation keywords (extensions ``x-...`` included): what is left decides validity."""
    if not isinstance(schema, dict):
        return schema
    kept = {k: v for k, v in schema.items() if k not in ANNOTATIONS and not k.startswith("x-")}
    return map_subschemas(kept, lambda sub, _path: strip_annotations(sub))
