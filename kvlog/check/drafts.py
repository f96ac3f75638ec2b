"""Reading a schema of any draft as Draft 2020-12, so that one set of inclusion rules serves them all.

Real catalogs are mostly draft-07, kvlog's own are 2020-12, and the same keyword means different
things across drafts: ``items: [...]`` is a tuple before 2020-12, ``exclusiveMaximum: true`` is a
flag in draft-04, ``dependencies`` split into two keywords in 2019-09, a ``$ref`` hides its sibling
keywords up to draft-07, and a keyword a draft does not define is only an annotation there.
``to_2020(schema, draft)`` rewrites a document into the 2020-12 keywords with the same instances, and
inlines its local ``$ref``s (a reference back into itself is kept as ``{"$ref": ...}``, which the
comparison treats as opaque). ``validator(schema, draft)`` checks instances against the schema as
published, so a counterexample is proven by the draft's own semantics, not by this translation.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import jsonschema_rs
import orjson

from kvlog.check.errors import SchemaError
from kvlog.schema import walk
from kvlog.schema.errors import DerefError
from kvlog.schema.walk import Draft, Followed, declared, document_resolver, follow

_VALIDATORS: dict[Draft, Any] = {
    "draft-04": jsonschema_rs.Draft4Validator,
    "draft-06": jsonschema_rs.Draft6Validator,
    "draft-07": jsonschema_rs.Draft7Validator,
    "2019-09": jsonschema_rs.Draft201909Validator,
    "2020-12": jsonschema_rs.Draft202012Validator,
}

# Which keywords each draft defines, where a $ref hides its siblings and where subschemas sit are
# kvlog.schema.walk's tables, and walk.follow follows a $ref; the reader takes ``items``, ``additionalItems`` and
# ``dependencies`` apart (their meaning changed between drafts), and leaves ``$defs``/``definitions``
# (read where a ``$ref`` takes them) and the annotation ``contentSchema`` as they are written.
_SINGLE = walk.SINGLE - {"items", "additionalItems", "contentSchema"}
_LISTS = walk.LISTS
_MAPS = walk.MAPS - {"$defs", "definitions", "dependencies"}
# The reference whose target the dynamic scope may change, in the draft that defines it.
_DYNAMIC: dict[Draft, str] = {"2019-09": "$recursiveRef", "2020-12": "$dynamicRef"}


def detect(schema: Any, default: Draft = "2020-12") -> Draft:
    """The draft a document's ``$schema`` names, else ``default``."""
    return declared(schema) or default


def infer(schema: Any) -> Draft:
    """The draft of a document that may name none: its ``$schema``, else what its keywords say.

    An unlabelled schema is read as 2020-12, unless it uses what only the earlier drafts define (a
    tuple ``items: [...]``, ``additionalItems``, ``dependencies``, ``definitions``) and nothing only the
    later ones do: then as draft-07, as schema registries read unlabelled schemas.
    """
    named = declared(schema)
    if named is not None:
        return named
    keys = set(_keys(schema))
    earlier = bool(keys & walk.EARLIER_ONLY) or "items[]" in keys
    return "draft-07" if earlier and not keys & walk.LATER_ONLY else "2020-12"


def _keys(root: Any) -> Any:
    """Every key in the document (an array ``items`` as ``items[]``), walked without recursion: any depth."""
    stack = [root]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for key, value in node.items():
                yield "items[]" if key == "items" and isinstance(value, list) else key
                stack.append(value)
        elif isinstance(node, list):
            stack.extend(node)


# Lookaround and backreferences need a backtracking engine; this many steps bounds a pathological pattern.
_BACKTRACK_LIMIT = 1_000_000


def validator(schema: Any, draft: Draft) -> Any:
    """A validator of ``schema`` under ``draft``'s semantics, formats as annotations (compiled once per text).

    Patterns match in linear time where the regex-crate engine can compile them; lookaround and
    backreferences fall back to fancy-regex with a backtracking limit. Raises ``SchemaError`` when
    the schema does not compile either way (a bad keyword value, an invalid pattern).
    """
    try:
        key = orjson.dumps(schema, option=orjson.OPT_SORT_KEYS)
    except (TypeError, orjson.JSONEncodeError):
        return _compile(schema, draft)
    return _compiled(key, draft)


@lru_cache(maxsize=1024)
def _compiled(key: bytes, draft: Draft) -> Any:
    return _compile(orjson.loads(key), draft)


def _compile(schema: Any, draft: Draft) -> Any:
    error = ""
    for options in (jsonschema_rs.RegexOptions(), jsonschema_rs.FancyRegexOptions(backtrack_limit=_BACKTRACK_LIMIT)):
        try:
            return _VALIDATORS[draft](schema, validate_formats=False, pattern_options=options)
        except (jsonschema_rs.ValidationError, jsonschema_rs.ReferencingError, ValueError, TypeError) as exc:
            error = str(exc).splitlines()[0]
    raise SchemaError(f"the schema does not compile under {draft}: {error}")


@dataclass
class _Reader:
    root: Any
    draft: Draft
    _top: Followed | None = None  # the document's own scope, made at its first $ref
    _resources: bool | None = None  # whether the document embeds resources, found at its first dynamic reference

    def read(self, node: Any, pointer: str, scope: Followed | None) -> Any:
        """``node`` in 2020-12 keywords; ``scope``: the last reference followed to reach it, if any."""
        if isinstance(node, bool):
            return node
        if not isinstance(node, dict):
            raise SchemaError(f"{pointer or '#'}: a schema must be an object or a boolean, not {type(node).__name__}")
        keywords = walk.KEYWORDS[self.draft]
        if "$ref" in node and self.draft in walk.REF_HIDES_SIBLINGS:
            return self._ref(node["$ref"], pointer, scope)  # its siblings are ignored up to draft-07
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key not in keywords or key == "$ref":
                continue
            here = f"{pointer}/{key}"
            if key in _SINGLE:  # a keyword of another draft was skipped above
                out[key] = self.read(value, here, scope)
            elif key in _LISTS:
                out[key] = [self.read(sub, f"{here}/{i}", scope) for i, sub in enumerate(_list(value, here))]
            elif key in _MAPS:
                out[key] = {name: self.read(sub, f"{here}/{name}", scope) for name, sub in _map(value, here).items()}
            elif key == "items":
                self._items(node, value, here, scope, out)
            elif key == "additionalItems":
                continue  # read with items
            elif key == "dependencies":
                for name, need in _map(value, here).items():
                    if isinstance(need, list):
                        out.setdefault("dependentRequired", {})[name] = need
                    else:
                        out.setdefault("dependentSchemas", {})[name] = self.read(need, f"{here}/{name}", scope)
            elif key in ("exclusiveMinimum", "exclusiveMaximum") and self.draft == "draft-04":
                continue  # a flag on minimum/maximum, read below
            else:
                out[key] = value
        if self.draft == "draft-04":
            for bound, flag in (("minimum", "exclusiveMinimum"), ("maximum", "exclusiveMaximum")):
                if node.get(flag) is True and bound in out:
                    out[flag] = out.pop(bound)
        keys = ("$ref", _DYNAMIC.get(self.draft, ""))
        references = [self._ref(node[key], pointer, scope, key) for key in keys if key and key in node]
        if references:
            return {"allOf": [*references, out]} if out or len(references) > 1 else references[0]
        return out

    def _embeds_resources(self) -> bool:
        """Whether a subschema below the root starts a resource of its own (an ``$id``; ``id`` in draft-04).

        In a document of one resource, a ``$dynamicRef`` (``$recursiveRef``) resolves where a ``$ref`` of
        the same value does: the outermost resource of its dynamic scope is the document itself, whose
        anchors are unique. An embedded resource may carry a dynamic anchor of the same name, and which
        one applies then depends on the path taken; kvlog does not follow that.
        """
        if self._resources is None:
            key = "id" if self.draft == "draft-04" else "$id"
            found: list[Any] = []

            def below(sub: Any, _: tuple[str, ...]) -> Any:
                found.append(sub)
                return sub

            walk.map_subschemas(self.root, below)
            while found and not (isinstance(found[-1], dict) and key in found[-1]):
                walk.map_subschemas(found.pop(), below)
            self._resources = bool(found)
        return self._resources

    def _items(self, node: dict[str, Any], value: Any, here: str, scope: Followed | None, out: dict[str, Any]) -> None:
        if isinstance(value, list) and self.draft != "2020-12":
            out["prefixItems"] = [self.read(sub, f"{here}/{i}", scope) for i, sub in enumerate(value)]
            if "additionalItems" in node:
                out["items"] = self.read(node["additionalItems"], here.rsplit("/", 1)[0] + "/additionalItems", scope)
        else:
            out["items"] = self.read(value, here, scope)

    def _ref(self, ref: Any, pointer: str, scope: Followed | None, keyword: str = "$ref") -> Any:
        if not isinstance(ref, str):
            raise SchemaError(f"{pointer or '#'}/{keyword}: must be a string")
        if not ref.startswith("#"):
            return {"$ref": ref}  # another document: opaque, compared only for equality
        if keyword != "$ref" and self._embeds_resources():
            return {"$ref": ref}  # the dynamic scope may lead to another resource's anchor: opaque
        if scope is None:
            if self._top is None:
                self._top = Followed(self.root, document_resolver(self.root, self.draft), ())
            scope = self._top
        try:
            followed = follow(ref, scope.resolver, (pointer,), scope.seen)
        except DerefError as exc:
            raise SchemaError(f"{pointer or '#'}/{keyword}: {ref} {exc.reason}") from None
        if followed is None:
            return {"$ref": ref}  # recursion: opaque
        return self.read(followed.contents, ref[1:], followed)


def _list(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise SchemaError(f"{where}: must be an array of schemas")
    return value


def _map(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise SchemaError(f"{where}: must be an object")
    return value


def to_2020(schema: Any, draft: Draft) -> Any:
    """``schema`` (of ``draft``) in Draft 2020-12 keywords, local references inlined, annotations dropped."""
    return _Reader(schema, draft).read(schema, "", None)
