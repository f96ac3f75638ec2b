"""KV008: every ``pattern`` of a catalog can be matched without catastrophic backtracking.

kvlog check itself matches patterns in linear time (``kvlog.check.linear_validator``), but the schemas are
published: anyone validating events with a backtracking engine (Python ``re``, JavaScript, PCRE,
kvlog's own reference explanations) can spend exponential time on one field when a pattern nests a
loop inside a loop, or repeats an alternation, so that one string splits in many ways. The rule
reports those, and patterns the linear engine cannot compile (lookaround, backreferences), where
they are written: ``pattern`` in any subschema, ``propertyNames`` included, and each
``patternProperties`` name.

The analysis looks at each loop (``*``, ``+``, ``{n,m}`` with m > 1) inside another loop: when an
iteration of the inner one can begin with a character that what follows it can also begin with,
a backtracking engine tries both, at every such point. Alternatives under a loop whose first
characters overlap are reported for the same reason. It is conservative: a pattern it reports may
be safe, never the other way round for these shapes.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

from kvlog.check.findings import Finding
from kvlog.check.linear_validator import linear
from kvlog.check.snapshot import Snapshot, locate
from kvlog.schema.walk import map_subschemas

Char = Callable[[str], bool]
Chars = list[Char]  # a set of characters, as the predicates of its parts
# The tree of a pattern: ("seq", [node]), ("alt", [node]), ("repeat", low, high, node) with high
# None for no limit, ("chars", predicate) for one character, ("empty",) for anchors and assertions.
Node = tuple[Any, ...]
_SAMPLES = [chr(c) for c in range(128)] + ["é", "\u00a0", "\u2028", "\u3000", "Ω", "中", "\U0001f600"]
_LINE_ENDS = "\n\r\u2028\u2029"
_CLASSES: dict[str, Char] = {
    "d": lambda c: "0" <= c <= "9",
    "D": lambda c: not "0" <= c <= "9",
    "s": str.isspace,
    "S": lambda c: not c.isspace(),
    "w": lambda c: c.isascii() and (c.isalnum() or c == "_"),
    "W": lambda c: not (c.isascii() and (c.isalnum() or c == "_")),
}
_CONTROL = {"n": "\n", "r": "\r", "t": "\t", "v": "\v", "f": "\f", "0": "\0"}
_QUANTIFIER = re.compile(r"\{([0-9]+)(,([0-9]*))?\}")


def _anything(_c: str) -> bool:
    return True


def check_patterns(snapshot: Snapshot) -> list[Finding]:
    """A finding for every pattern that backtracks or needs a backtracking engine, where it is written."""
    findings: list[Finding] = []
    for file in snapshot.all_files():
        for pattern, pointer in _patterns(file.document):
            problem = pattern_problem(pattern)
            if problem is not None:
                where = "/".join(pointer)
                message = f"pattern {pattern!r} at {where} {problem}"
                findings.append(Finding("KV008", message, file.display, locate(file.text, pointer)))
    return findings


def _patterns(schema: Any) -> Iterator[tuple[str, tuple[str, ...]]]:
    found: list[tuple[str, tuple[str, ...]]] = []

    def visit(sub: Any, path: tuple[str, ...]) -> Any:
        if isinstance(sub, dict):
            if isinstance(sub.get("pattern"), str):
                found.append((sub["pattern"], (*path, "pattern")))
            if isinstance(sub.get("patternProperties"), dict):
                found.extend((name, (*path, "patternProperties", name)) for name in sub["patternProperties"])
        map_subschemas(sub, visit, path)
        return sub

    visit(schema, ())
    yield from found


def pattern_problem(pattern: str) -> str | None:
    """Why ``pattern`` is unsafe for a backtracking engine, or None."""
    try:
        linear({"pattern": pattern})
    except ValueError:
        return "needs a backtracking engine (lookaround, a backreference) or is not an ECMA-262 regex"
    parser = _Parser(pattern)
    try:
        tree = parser.alternation()
        shape = _Scan(sorted({*_SAMPLES, *parser.named})).node(tree, 0, loops=0)
    except (IndexError, ValueError, RecursionError):
        return None  # the linear engine reads it and this parser does not: nothing to analyse
    if shape is None:
        return None
    return f"can backtrack exponentially: {shape}; rewrite it so that each string matches it one way only"


class _Parser:
    """ECMA-262 pattern syntax, as far as backtracking needs it (the linear engine has checked it is valid)."""

    def __init__(self, pattern: str) -> None:
        self.p, self.i = pattern, 0
        self.named: set[str] = set()  # every character the pattern names: two of its sets overlap on one

    def alternation(self) -> Node:
        branches = [self.sequence()]
        while self.i < len(self.p) and self.p[self.i] == "|":
            self.i += 1
            branches.append(self.sequence())
        return branches[0] if len(branches) == 1 else ("alt", branches)

    def sequence(self) -> Node:
        items = []
        while self.i < len(self.p) and self.p[self.i] not in "|)":
            items.append(self.quantified(self.atom()))
        return ("seq", items)

    def quantified(self, atom: Node) -> Node:
        while self.i < len(self.p):
            c = self.p[self.i]
            if c in "*+?":
                low, high, self.i = (0 if c != "+" else 1), (None if c != "?" else 1), self.i + 1
            elif (bound := _QUANTIFIER.match(self.p, self.i)) is not None:
                low = int(bound.group(1))
                high = low if bound.group(2) is None else (int(bound.group(3)) if bound.group(3) else None)
                self.i = bound.end()
            else:
                return atom
            if self.i < len(self.p) and self.p[self.i] == "?":
                self.i += 1  # lazy: the same choices, tried in another order
            atom = ("repeat", low, high, atom)
        return atom

    def atom(self) -> Node:
        c = self.p[self.i]
        self.i += 1
        if c in "^$":
            return ("empty",)
        if c == ".":
            return ("chars", lambda x: x not in _LINE_ENDS)
        if c == "(":
            look = self.p.startswith(("?=", "?!", "?<=", "?<!"), self.i)
            if look:
                self.i += 3 if self.p[self.i + 1] == "<" else 2
            elif self.p.startswith("?<", self.i):
                self.i = self.p.index(">", self.i) + 1  # a named group
            elif self.p.startswith("?:", self.i):
                self.i += 2
            inner = self.alternation()
            if self.p[self.i] != ")":
                raise ValueError(self.p)
            self.i += 1
            return ("empty",) if look else inner
        if c == "[":
            return ("chars", self.char_class())
        if c == "\\":
            return self.escape()
        return ("chars", self.literal(c))

    def literal(self, c: str) -> Char:
        self.named.add(c)
        return lambda x: x == c

    def escape(self) -> Node:
        c = self.p[self.i]
        self.i += 1
        if c in "bB":
            return ("empty",)
        if c in _CLASSES:
            return ("chars", _CLASSES[c])
        if c in "pPk" or c in "123456789":  # a property class, or a backreference: could be anything
            if self.p.startswith(("{", "<"), self.i):
                self.i = self.p.index("}" if self.p[self.i] == "{" else ">", self.i) + 1
            return ("chars", _anything)
        return ("chars", self.literal(self.escaped(c)))

    def escaped(self, c: str) -> str:
        if c in _CONTROL:
            return _CONTROL[c]
        if c == "c":
            self.i += 1
            return chr(ord(self.p[self.i - 1]) % 32)
        if c == "x":
            self.i += 2
            return chr(int(self.p[self.i - 2 : self.i], 16))
        if c == "u" and self.p.startswith("{", self.i):
            end = self.p.index("}", self.i)
            code, self.i = self.p[self.i + 1 : end], end + 1
            return chr(int(code, 16))
        if c == "u":
            self.i += 4
            return chr(int(self.p[self.i - 4 : self.i], 16))
        return c

    def char_class(self) -> Char:
        negated = self.p[self.i] == "^"
        self.i += negated
        parts: Chars = []
        while self.p[self.i] != "]":
            parts.append(self.class_item())
        self.i += 1
        return lambda x: any(part(x) for part in parts) != negated

    def class_item(self) -> Char:
        low = self.class_char()
        if isinstance(low, str) and self.p[self.i] == "-" and self.p[self.i + 1] != "]":
            self.i += 1
            high = self.class_char()
            if isinstance(high, str):
                self.named.update((low, high))
                return lambda x: low <= x <= high
            return lambda x: x in {low, "-"} or high(x)
        return low if not isinstance(low, str) else self.literal(low)

    def class_char(self) -> str | Char:
        c = self.p[self.i]
        self.i += 1
        if c != "\\":
            return c
        c = self.p[self.i]
        self.i += 1
        if c in _CLASSES:
            return _CLASSES[c]
        if c in "pP" and self.p.startswith("{", self.i):
            self.i = self.p.index("}", self.i) + 1
            return _anything
        return "\b" if c == "b" else self.escaped(c)


class _Scan:
    """Finds a loop inside a loop whose iterations can end where the next begins, or overlapping alternatives.

    Sets of characters are bit masks over the alphabet (each predicate is asked once per character),
    and a sequence is scanned from its end, so the cost grows with the pattern's length, not its square.
    """

    def __init__(self, alphabet: list[str]) -> None:
        self.alphabet = alphabet
        self.masks: dict[int, int] = {}
        self.firsts: dict[int, tuple[int, bool]] = {}

    def mask(self, predicate: Char) -> int:
        key = id(predicate)
        if key not in self.masks:
            self.masks[key] = sum(1 << i for i, c in enumerate(self.alphabet) if predicate(c))
        return self.masks[key]

    def node(self, node: Node, follow: int, loops: int) -> str | None:
        """The first unsafe shape in ``node``, followed by what begins with ``follow``, inside ``loops`` loops."""
        kind = node[0]
        if kind == "seq":
            after = [follow]  # after[k]: what can begin once items[-k:] are behind
            for item in reversed(node[1][1:]):
                begins, nullable = self.first(item)
                after.append(begins | after[-1] if nullable else begins)
            for item, follows in zip(node[1], reversed(after), strict=False):
                found = self.node(item, follows, loops)
                if found is not None:
                    return found
            return None
        if kind == "alt":
            starts = [self.first(branch)[0] for branch in node[1]]
            seen = 0
            for begins in starts:
                if loops and seen & begins:
                    return "alternatives inside a repeat can begin with the same character"
                seen |= begins
            return next((f for b in node[1] if (f := self.node(b, follow, loops)) is not None), None)
        if kind == "repeat":
            _low, high, body = node[1:]
            looping = high is None or high > 1
            begins, _ = self.first(body)
            if looping and loops and begins & follow:
                return "a repeat inside a repeat can end where the next round begins"
            return self.node(body, begins | follow if looping else follow, loops + looping)
        return None

    def first(self, node: Node) -> tuple[int, bool]:
        """What a match of ``node`` can begin with, and whether it can be empty."""
        key = id(node)
        if key not in self.firsts:
            self.firsts[key] = self._first(node)
        return self.firsts[key]

    def _first(self, node: Node) -> tuple[int, bool]:
        kind = node[0]
        if kind == "chars":
            return self.mask(node[1]), False
        if kind == "empty":
            return 0, True
        if kind == "repeat":
            begins, nullable = self.first(node[3])
            return begins, nullable or node[1] == 0
        parts = [self.first(child) for child in node[1]]
        if kind == "alt":
            return _union(begins for begins, _ in parts), any(n for _, n in parts)
        begins = 0
        for chars, nullable in parts:
            begins |= chars
            if not nullable:
                return begins, False
        return begins, True


def _union(masks: Iterator[int]) -> int:
    out = 0
    for mask in masks:
        out |= mask
    return out
