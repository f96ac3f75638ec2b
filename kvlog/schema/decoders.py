r"""The decoder table: what ``kvlog._native``'s validator checks of each event version, derived from ``schemas/``.

``kvlog validate``'s native path (``native/src/validate.rs``) reads a block of lines and accepts a
line only where it is sure the Python path would find it a valid event; every other line goes to
the Python validator, which alone words findings. What it checks comes from here, so that no schema
rule is written twice: each event version's schema, its ``$ref``s inlined, becomes a tree of nodes
(types, ``const``/``enum`` scalars, integer bounds, lengths, patterns, properties and ``required``,
``additionalProperties``, ``propertyNames``, ``items``, ``allOf``/``anyOf``/``oneOf``/``not``/``if``).
A schema that uses anything else (a keyword, a float bound, a pattern outside the simple subset
below) is *undecided*: the table says so and why, and the native side leaves all its lines to Python.

Patterns are compiled here, to a DFA over code points, from a subset of ECMA-262 that every engine
reads alike: literals, escaped punctuation, classes of ranges (negated too), groups, alternation,
``? * + {n} {n,} {n,m}``, and ``^``/``$`` only at the ends. ``.``, ``\d``, ``\w``, lookaround and the
rest are undecided, as a class's meaning there differs between engines.

The table is committed as ``kvlog/schema/decoders.json``, written by ``python -m kvlog.schema.codegen``
with ``kvlog/events.py`` (a test regenerates and compares both). It names a digest of the catalog it
was derived from: a run whose catalog differs (a schema edited and not regenerated, another catalog)
derives its own table instead of trusting the file (``for_catalog``).
"""

from __future__ import annotations

import hashlib
import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import orjson

from kvlog.schema.catalog import Catalog
from kvlog.schema.errors import DerefError, Undecided
from kvlog.schema.walk import ANNOTATIONS, declared, dereference

#: the table's layout, which ``native/src/validate.rs`` reads; a change to it is a change there
FORMAT = 1
PATH = Path(__file__).resolve().with_name("decoders.json")
_TYPES = ("null", "boolean", "integer", "number", "string", "array", "object")
_COUNTS = ("minLength", "maxLength", "minItems", "maxItems")
_BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
_LISTS = ("allOf", "anyOf", "oneOf")
_SINGLE = {"additionalProperties": "additional", "propertyNames": "names", "items": "items"}
_SINGLE |= {"not": "not", "if": "if", "then": "then", "else": "else"}
#: the types a keyword says something of (it holds of any other value): what lets ``anyOf`` branches fold
_APPLIES_TO = {
    **dict.fromkeys(_BOUNDS, frozenset({"integer", "number"})),
    **dict.fromkeys(("minLength", "maxLength", "pattern"), frozenset({"string"})),
    **dict.fromkeys(("minItems", "maxItems", "items"), frozenset({"array"})),
    **dict.fromkeys(("keys", "additional", "names"), frozenset({"object"})),
}
#: the most required keys one object node may hold (the native side keeps them in a 64-bit mask)
_MAX_REQUIRED = 64
#: the most states a pattern's DFA may have; a longer repeat count than this is undecided too
_MAX_STATES = 512
_MAX_CODE_POINT = 0x10FFFF
#: the largest repeat count a pattern may give (each repeat is written out in the automaton)
_MAX_REPEAT = 64
_REPEAT = re.compile(r"\{([0-9]+)(,([0-9]*))?\}")
#: escapes that stand for their punctuation character in ECMA-262 and every engine
_PUNCTUATION = frozenset("\\/^$.|?*+()[]{}-")


def catalog_digest(catalog: Catalog) -> str:
    """A digest of every document of ``catalog``: the table derived from it names it."""
    documents = [
        sorted(catalog.shared.items()),
        [
            [event, version, catalog.schemas[event][version]]
            for event in catalog.events()
            for version in catalog.versions(event)
        ],
    ]
    return hashlib.sha256(orjson.dumps(documents, option=orjson.OPT_SORT_KEYS)).hexdigest()


def table(catalog: Catalog) -> dict[str, Any]:
    """The decoder table of every event version of ``catalog``: nodes, patterns, and each version's root node."""
    builder = _Builder()
    events: list[list[Any]] = []
    for event in catalog.events():
        for version in catalog.versions(event):
            schema = catalog.schema(event, version)
            try:
                if declared(schema) != "2020-12":
                    raise Undecided("the schema is not Draft 2020-12")
                resolved = dereference(schema, catalog.registry, schema["$id"])
                events.append([event, version, builder.node(resolved)])
            except (Undecided, DerefError) as exc:
                events.append([event, version, None, str(exc)])
    return {
        "format": FORMAT,
        "catalog": catalog_digest(catalog),
        "events": events,
        "nodes": builder.nodes,
        "patterns": builder.patterns,
    }


def render(catalog: Catalog) -> str:
    """The table as committed: JSON, one event, node or pattern a line, so that a schema change reads as a diff."""
    data = table(catalog)
    lists = [
        f'"{key}": [\n' + ",\n".join(json.dumps(item, sort_keys=True, ensure_ascii=False) for item in data[key]) + "\n]"
        for key in ("events", "nodes", "patterns")
    ]
    head = f'{{\n"format": {data["format"]},\n"catalog": "{data["catalog"]}",\n'
    return head + ",\n".join(lists) + "\n}\n"


@cache
def for_catalog(catalog: Catalog) -> bytes:
    """The table of ``catalog``, as the native validator takes it: the committed file where it is that catalog's."""
    try:
        committed = PATH.read_bytes()
        if orjson.loads(committed).get("catalog") == catalog_digest(catalog):
            return committed
    except (OSError, orjson.JSONDecodeError, AttributeError):
        pass
    return render(catalog).encode()


class _Builder:
    """Nodes and patterns, each kept once (events share the envelope's nodes), referred to by index."""

    def __init__(self) -> None:
        self.nodes: list[dict[str, Any]] = []
        self.patterns: list[dict[str, Any]] = []
        self._node_index: dict[str, int] = {}
        self._pattern_index: dict[str, int] = {}

    def node(self, schema: Any) -> int:
        if schema is True:
            return self._keep({})
        if schema is False:
            return self._keep({"never": True})
        if not isinstance(schema, dict):
            raise Undecided(f"a subschema that is not an object: {schema!r}")
        node: dict[str, Any] = {}
        keys: dict[str, list[Any]] = {}
        for keyword, value in schema.items():
            if keyword in ANNOTATIONS or keyword.startswith("x-"):
                continue
            if keyword == "type":
                node["types"] = self._types(value)
            elif keyword == "const":
                node["const"] = _scalar(value)
            elif keyword == "enum" and isinstance(value, list):
                node["enum"] = [_scalar(item) for item in value]
            elif type(value) is int and (keyword in _BOUNDS or (keyword in _COUNTS and value >= 0)):
                node[keyword] = value
            elif keyword == "pattern" and isinstance(value, str):
                node["pattern"] = self._pattern(value)
            elif keyword == "properties" and isinstance(value, dict):
                for name, sub in value.items():
                    keys.setdefault(name, [name, None, False])[1] = self.node(sub)
            elif keyword == "required" and isinstance(value, list) and all(isinstance(name, str) for name in value):
                for name in value:
                    keys.setdefault(name, [name, None, False])[2] = True
            elif keyword in _SINGLE and (isinstance(value, dict | bool)):
                node[_SINGLE[keyword]] = self.node(value)
            elif keyword in _LISTS and isinstance(value, list) and value:
                node[keyword] = [self.node(sub) for sub in value]
            else:
                raise Undecided(f"keyword {keyword!r} ({json.dumps(value)[:60]}) is not in the native table")
        if keys:
            if sum(required for _, _, required in keys.values()) > _MAX_REQUIRED:
                raise Undecided(f"more than {_MAX_REQUIRED} required keys")
            node["keys"] = sorted(keys.values())
        return self._keep(self._merged(node))

    def _merged(self, node: dict[str, Any]) -> dict[str, Any]:
        """``node`` with an ``anyOf`` of branches for disjoint types folded into it, as one check.

        ``anyOf: [{bytes}, {type: null}]`` (a nullable byte count, 69 of them in the catalog) means
        ``type: [integer, null], minimum: 0``: each branch's keywords apply only to its own types, so
        the union is exact, and a line costs one node where it cost three.
        """
        branches = [self.nodes[index] for index in node.get("anyOf", [])]
        if node.keys() - {"anyOf"} or len(branches) < 2 or not all("types" in branch for branch in branches):
            return node
        kinds = [set(branch["types"]) for branch in branches]
        values = [kind | ({"integer"} if "number" in kind else set()) for kind in kinds]  # 1 is a number too
        if sum(map(len, values)) != len(set().union(*values)):
            return node
        merged: dict[str, Any] = {"types": sorted(set().union(*kinds), key=_TYPES.index)}
        for branch, types in zip(branches, kinds, strict=True):
            for keyword, value in branch.items():
                if keyword == "types":
                    continue
                if keyword in merged or not types <= _APPLIES_TO.get(keyword, frozenset()):
                    return node
                merged[keyword] = value
        return merged

    @staticmethod
    def _types(value: Any) -> list[str]:
        names = [value] if isinstance(value, str) else value
        if not isinstance(names, list) or not names or any(name not in _TYPES for name in names):
            raise Undecided(f"type {value!r}")
        return sorted(set(names), key=_TYPES.index)

    def _keep(self, node: dict[str, Any]) -> int:
        text = json.dumps(node, sort_keys=True)
        if text not in self._node_index:
            self._node_index[text] = len(self.nodes)
            self.nodes.append(node)
        return self._node_index[text]

    def _pattern(self, pattern: str) -> int:
        if pattern not in self._pattern_index:
            self._pattern_index[pattern] = len(self.patterns)
            self.patterns.append(compile_pattern(pattern))
        return self._pattern_index[pattern]


def _scalar(value: Any) -> Any:
    """A ``const``/``enum`` value the native side compares exactly: null, a boolean, an integer or a string."""
    if value is None or type(value) in {bool, int, str}:
        return value
    raise Undecided(f"const or enum value {json.dumps(value)[:60]} (only null, booleans, integers and strings)")


# A pattern's tree: ("chars", ranges), ("seq", [tree]), ("alt", [tree]), ("repeat", tree, low, high or None)
Tree = tuple[Any, ...]
Ranges = list[tuple[int, int]]


def compile_pattern(pattern: str) -> dict[str, Any]:
    """``pattern`` as a DFA over code points: ``states`` (each ``[accepting, [[low, high, next], ...]]``, 0 first).

    ``anchored`` says whether the pattern ends in ``$``: without it a match is found as soon as an
    accepting state is reached; a pattern without ``^`` may start anywhere (its first state loops).
    """
    body, start, end = pattern, pattern.startswith("^"), False
    if start:
        body = body[1:]
    if body.endswith("$") and not _escaped_at(body, len(body) - 1):
        body, end = body[:-1], True
    parser = _PatternParser(body)
    tree = parser.alternation()
    if parser.at < len(body):
        raise Undecided(f"pattern {pattern!r}: cannot read {body[parser.at :]!r}")
    if (start or end) and tree[0] == "alt":
        raise Undecided(f"pattern {pattern!r}: an anchor beside a top-level alternation")
    return {"pattern": pattern, "anchored": end, "states": _dfa(tree, searched=not start)}


def _escaped_at(text: str, index: int) -> bool:
    backslashes = len(text[:index]) - len(text[:index].rstrip("\\"))
    return backslashes % 2 == 1


class _PatternParser:
    """Reads the pattern subset the module docstring names; anything else raises Undecided."""

    def __init__(self, text: str) -> None:
        self.text, self.at = text, 0

    def _peek(self) -> str | None:
        return self.text[self.at] if self.at < len(self.text) else None

    def _fail(self, what: str) -> Undecided:
        return Undecided(f"pattern {self.text!r}: {what} at {self.at} is not in the native subset")

    def alternation(self) -> Tree:
        branches = [self._sequence()]
        while self._peek() == "|":
            self.at += 1
            branches.append(self._sequence())
        return branches[0] if len(branches) == 1 else ("alt", branches)

    def _sequence(self) -> Tree:
        items: list[Tree] = []
        while (char := self._peek()) is not None and char not in "|)":
            items.append(self._quantified(self._atom()))
        return ("seq", items)

    def _atom(self) -> Tree:
        char = self.text[self.at]
        self.at += 1
        if char == "(":
            if self.text.startswith("?:", self.at):
                self.at += 2
            elif self._peek() == "?":
                raise self._fail("a group with ?")
            inner = self.alternation()
            if self._peek() != ")":
                raise self._fail("an unclosed group")
            self.at += 1
            return inner
        if char == "[":
            return ("chars", self._class())
        if char == "\\":
            return ("chars", [(ord(self._escape()),) * 2])
        if char in ".^$*+?{}]":
            raise self._fail(repr(char))
        return ("chars", [(ord(char),) * 2])

    def _escape(self) -> str:
        char = self._peek()
        if char is None or char not in _PUNCTUATION:
            raise self._fail(f"the escape \\{char or ''}")
        self.at += 1
        return char

    def _class(self) -> Ranges:
        negated = self._peek() == "^"
        self.at += negated
        ranges: Ranges = []
        while self._peek() != "]":
            low = self._class_char()
            if self._peek() == "-" and self.text[self.at + 1 : self.at + 2] not in {"]", ""}:
                self.at += 1
                high = self._class_char()
                if high < low:
                    raise self._fail("a reversed range")
                ranges.append((low, high))
            else:
                ranges.append((low, low))
        self.at += 1
        if not ranges:
            raise self._fail("an empty class")
        return _complement(ranges) if negated else _normalised(ranges)

    def _class_char(self) -> int:
        char = self._peek()
        if char is None:
            raise self._fail("an unclosed class")
        self.at += 1
        if char == "\\":
            return ord(self._escape())
        if char == "[":
            raise self._fail("'[' in a class")
        return ord(char)

    def _quantified(self, atom: Tree) -> Tree:
        char = self._peek()
        if char in {"?", "*", "+"}:
            self.at += 1
            low, high = {"?": (0, 1), "*": (0, None), "+": (1, None)}[char]
        elif char == "{":
            repeat = _REPEAT.match(self.text, self.at)
            if repeat is None:
                raise self._fail("a '{' that is no repeat count")
            low = int(repeat.group(1))
            high = low if repeat.group(2) is None else (int(repeat.group(3)) if repeat.group(3) else None)
            if (high is not None and high < low) or max(low, high or 0) > _MAX_REPEAT:
                raise self._fail(f"a repeat count over {_MAX_REPEAT} or reversed")
            self.at = repeat.end()
        else:
            return atom
        if self._peek() == "?":  # lazy: the same strings match
            self.at += 1
        if self._peek() in {"?", "*", "+", "{"}:
            raise self._fail("a repeat of a repeat")
        return ("repeat", atom, low, high)


def _normalised(ranges: Ranges) -> Ranges:
    merged: Ranges = []
    for low, high in sorted(ranges):
        if merged and low <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], high))
        else:
            merged.append((low, high))
    return merged


def _complement(ranges: Ranges) -> Ranges:
    out: Ranges = []
    next_low = 0
    for low, high in _normalised(ranges):
        if low > next_low:
            out.append((next_low, low - 1))
        next_low = high + 1
    if next_low <= _MAX_CODE_POINT:
        out.append((next_low, _MAX_CODE_POINT))
    return out


class _Nfa:
    """Thompson's construction: states with epsilon moves and moves on ranges of code points."""

    def __init__(self) -> None:
        self.epsilon: list[list[int]] = []
        self.moves: list[list[tuple[int, int, int]]] = []

    def state(self) -> int:
        self.epsilon.append([])
        self.moves.append([])
        return len(self.epsilon) - 1

    def build(self, tree: Tree, start: int) -> int:
        """States for ``tree`` from ``start``; returns the state it ends in."""
        kind = tree[0]
        if kind == "chars":
            end = self.state()
            self.moves[start] += [(low, high, end) for low, high in tree[1]]
            return end
        if kind == "seq":
            for item in tree[1]:
                start = self.build(item, start)
            return start
        if kind == "alt":
            end = self.state()
            for branch in tree[1]:
                entry = self.state()
                self.epsilon[start].append(entry)
                self.epsilon[self.build(branch, entry)].append(end)
            return end
        _, item, low, high = tree
        for _ in range(low):
            start = self.build(item, start)
        if high is None:
            loop = self.state()
            self.epsilon[start].append(loop)
            self.epsilon[self.build(item, loop)].append(loop)
            return loop
        end = self.state()
        self.epsilon[start].append(end)
        for _ in range(high - low):
            start = self.build(item, start)
            self.epsilon[start].append(end)
        return end

    def closure(self, states: set[int]) -> frozenset[int]:
        pending, seen = list(states), set(states)
        while pending:
            for target in self.epsilon[pending.pop()]:
                if target not in seen:
                    seen.add(target)
                    pending.append(target)
        return frozenset(seen)


def _dfa(tree: Tree, *, searched: bool) -> list[list[Any]]:
    nfa = _Nfa()
    first = nfa.state()
    if searched:  # no ^: the match may start at any character
        nfa.moves[first].append((0, _MAX_CODE_POINT, first))
    accept = nfa.build(tree, first)
    bounds = sorted({b for moves in nfa.moves for low, high, _ in moves for b in (low, high + 1)})
    pieces = list(zip(bounds, [b - 1 for b in bounds[1:]], strict=False))
    start = nfa.closure({first})
    index, order = {start: 0}, [start]
    states: list[list[Any]] = []
    while len(states) < len(order):
        current = order[len(states)]
        moves: list[list[int]] = []
        for low, high in pieces:
            targets = {t for s in current for lo, hi, t in nfa.moves[s] if lo <= low and high <= hi}
            if not targets:
                continue
            target = nfa.closure(targets)
            if target not in index:
                if len(order) >= _MAX_STATES:
                    raise Undecided(f"a pattern of more than {_MAX_STATES} states")
                index[target] = len(order)
                order.append(target)
            if moves and moves[-1][2] == index[target] and moves[-1][1] + 1 == low:
                moves[-1][1] = high
            else:
                moves.append([low, high, index[target]])
        states.append([accept in current, moves])
    return states
