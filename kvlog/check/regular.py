r"""String languages of ``pattern`` and length bounds, as finite automata, so inclusion is decided, not guessed.

A JSON Schema ``pattern`` is an ECMA-262 regular expression that matches anywhere in the string.
greenery (a well-kept regular-language library) builds automata and decides inclusion and emptiness
exactly, and gives a string of a difference: the counterexample. It reads a smaller dialect than
ECMA-262, so a pattern is first rewritten into it: ``.`` excludes line terminators, ``\\uXXXX`` is a
character, a leading ``^`` and a trailing ``$`` are anchors and the rest is wrapped to match anywhere.
What the dialect cannot say exactly (lookaround, backreferences, ``\\b``, ``\\s``, Unicode
properties, flags, anchors inside the pattern) makes the language unknown: the caller stays undecided.
"""

from __future__ import annotations

from collections import deque
from functools import lru_cache
from typing import Any

_ANY_EXCEPT_NEWLINE = "[^\\n\\r\u2028\u2029]"
_UNSUPPORTED_ESCAPES = frozenset("sSbBpPckdD0123456789")
_SPECIAL = frozenset("\\^$.|?*+()[]{}-/")
# Bounds above this are compared as numbers, not unrolled into automata.
_MAX_UNROLLED = 64


class Language:
    """The strings a (pattern, minLength, maxLength) triple accepts; ``None`` from ``of`` when not expressible."""

    def __init__(self, fsm: Any) -> None:
        self.fsm = fsm

    def minus(self, other: Language) -> Language:
        """The strings of this language that ``other`` lacks."""
        return Language(self.fsm.difference(other.fsm))

    def empty(self) -> bool:
        """Whether no string is in the language."""
        return bool(self.fsm.empty())

    @lru_cache(maxsize=1024)  # noqa: B019 - languages are few and cached themselves (``of``)
    def sample(self, limit: int = 8) -> list[str]:
        """A few of the shortest strings of the language, found by a search over states, not over strings."""
        fsm = self.fsm
        live = {state for state in fsm.states if fsm.islive(state)}
        if fsm.initial not in live:
            return []
        found: list[str] = []
        visits: dict[Any, int] = {}
        queue: deque[tuple[Any, str]] = deque([(fsm.initial, "")])
        while queue and len(found) < limit:
            state, text = queue.popleft()
            if visits.get(state, 0) >= limit:
                continue
            visits[state] = visits.get(state, 0) + 1
            if state in fsm.finals:
                found.append(text)
            for charclass, target in fsm.map.get(state, {}).items():
                if target in live:
                    char = _member(charclass)
                    if char is not None:
                        queue.append((target, text + char))
        return found


def _member(charclass: Any) -> str | None:
    """A readable character of a greenery character class."""
    for char in "azAZ09_-. ":
        if charclass.accepts(char):
            return char
    if not charclass.negated and charclass.ord_ranges:
        return chr(charclass.ord_ranges[0][0])
    for code in range(0x20, 0x3000):
        if charclass.accepts(chr(code)):
            return chr(code)
    return None


@lru_cache(maxsize=1024)
def of(pattern: str | None, min_length: int = 0, max_length: int | None = None) -> Language | None:
    """The language, or ``None`` when the pattern or the bounds cannot be expressed exactly."""
    if min_length > _MAX_UNROLLED or (max_length is not None and max_length > _MAX_UNROLLED):
        return None
    fsm = _pattern(pattern or "")
    if fsm is None:
        return None
    if min_length or max_length is not None:
        lengths = _parse(f".{{{min_length},{'' if max_length is None else max_length}}}")
        if lengths is None:
            return None
        fsm = fsm.intersection(lengths)
    return Language(fsm)


@lru_cache(maxsize=512)
def _pattern(pattern: str) -> Any:
    body = _rewrite(pattern)
    if body is None:
        return None
    text, start, end = body
    return _parse(f"{'' if start else '.*'}(?:{text}){'' if end else '.*'}")


def _parse(text: str) -> Any:
    from greenery import parse  # noqa: PLC0415 - only checks that compare patterns pay for it

    try:
        return parse(text).to_fsm()
    except Exception:  # noqa: BLE001 - greenery raises its own parse errors; the language is then unknown
        return None


def _rewrite(pattern: str) -> tuple[str, bool, bool] | None:
    """(body in greenery's dialect, anchored at start, anchored at end), or ``None``."""
    start = pattern.startswith("^")
    end = pattern.endswith("$") and not pattern.endswith("\\$")
    core = pattern[1 if start else 0 : len(pattern) - 1 if end else len(pattern)]
    out: list[str] = []
    in_class = False
    depth = 0
    i = 0
    while i < len(core):
        char = core[i]
        if char == "\\":
            if i + 1 >= len(core):
                return None
            nxt = core[i + 1]
            if nxt == "u":
                code = core[i + 2 : i + 6]
                if len(code) != 4 or any(c not in "0123456789abcdefABCDEF" for c in code):
                    return None
                literal = chr(int(code, 16))
                out.append("\\" + literal if literal in _SPECIAL else literal)
                i += 6
                continue
            if nxt in _UNSUPPORTED_ESCAPES and not (nxt in "dD" and not in_class):
                return None
            out.append(core[i : i + 2])
            i += 2
            continue
        if in_class:
            in_class = char != "]"
            out.append(char)
        elif char == "[":
            in_class = True
            out.append(char)
            if core[i + 1 : i + 2] == "]":  # "[]" is the empty class in ECMA-262, not a literal "]"
                return None
        elif char == "(":
            if core[i + 1 : i + 2] == "?" and core[i + 2 : i + 3] != ":":
                return None  # lookaround, named groups, flags
            depth += 1
            out.append(char)
        elif char == ")":
            depth -= 1
            out.append(char)
        elif char in "^$":
            return None  # an anchor inside the pattern
        elif char == "|" and depth == 0 and (start or end):
            return None  # "^a|b$" anchors each alternative, not the whole
        elif char == ".":
            out.append(_ANY_EXCEPT_NEWLINE)
        else:
            out.append(char)
        i += 1
    if in_class:
        return None
    return "".join(out), start, end
