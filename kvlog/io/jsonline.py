"""Reading a JSON line faithfully: what orjson reads right for almost every line, and the lines it would not.

orjson reads a log line in one call, and for almost every line its reading is the line. Three kinds
of line it would get silently wrong, or could not write back, are found here:

- duplicate keys: orjson, like most readers, keeps the last of two equal keys, so
  ``{"released_bytes": 0, "released_bytes": -5}`` would validate as whatever the last value says
  while another reader sees the first;
- nesting it cannot write back: orjson reads 1024 levels but writes only ``MAX_DEPTH``, so a line
  nested deeper can be read but neither checked again nor migrated;
- numbers it would change: an integer beyond 64 bits becomes the nearest float
  (``18446744073709551617`` is read as ``1.8446744073709552e+19``), and ``1.0e3``, ``-0`` or
  ``0.10`` would be written back as ``1000.0``, ``0`` and ``0.1``.

A line that is exactly what orjson writes for the value it parsed to has none of these, which
settles almost every line with one ``orjson.dumps`` (measured cheaper than scanning the line for
``":`` and counting keys). Only the others are read again, by the standard library, keeping every
key and the exact value of every integer; ``exact`` also keeps the text of every number orjson would
write differently, in ``int`` and ``float`` subclasses that ``dumps`` writes back as they were read.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import orjson

from kvlog.io.errors import LineError, TooDeep

#: the deepest nesting orjson writes (it reads up to 1024 levels)
MAX_DEPTH = 254
#: the integers orjson (and any reader with 64-bit integers) holds exactly
INT_MIN, INT_MAX = -(2**63), 2**64 - 1
_LINE_ENDS = (b"", b"\n", b"\r", b"\r\n")
_JSON_TYPES: tuple[type[Any], ...] = (str, int, float, dict, list)
#: an integer beyond 64 bits has at least 19 digits: a line without such a run needs no search. Found as
#: a run of zeros once every digit is a zero (ten times faster than the regular expression [0-9]{19})
_DIGITS_AS_ZEROS = bytes.maketrans(b"123456789", b"0" * 9)
_LONG_DIGITS = b"0" * 19


class Problem(NamedTuple):
    """Why a line cannot be read as orjson read it: where (a JSON path) and what."""

    path: str
    message: str
    #: nested deeper than ``MAX_DEPTH``: nothing else about the line can be checked
    too_deep: bool = False


_NO_PROBLEMS: tuple[Problem, ...] = ()


class ExactInt(int):
    """An integer with the text it was written as, where orjson would write it differently (``-0``, beyond 64 bits)."""

    text: bytes


class ExactFloat(float):
    """A number with the text it was written as, where orjson would write it differently (``1.0e3``, ``0.10``)."""

    text: bytes


def problems(line: bytes, parsed: object) -> Sequence[Problem]:
    """What makes ``line`` (which orjson parsed to ``parsed``) unfit to be read as ``parsed``.

    The empty list for almost every line, at the cost of one ``orjson.dumps``. A line nested too deep
    or holding a duplicate key gets that one reason; otherwise each integer beyond 64 bits gets one.
    """
    try:
        if _is_canonical(line, parsed):
            return _NO_PROBLEMS
        value = _read_again(line)
    except LineError as exc:
        return [Problem("$", str(exc), too_deep=isinstance(exc, TooDeep))]
    if line.translate(_DIGITS_AS_ZEROS).find(_LONG_DIGITS) == -1:
        return _NO_PROBLEMS
    return [
        Problem(path, f"{number} is an integer beyond 64 bits: readers round it (orjson reads {float(number)!r})")
        for path, number in _wide_integers(value)
    ]


def exact(line: bytes, parsed: object) -> Any:
    """``parsed``, or where orjson's reading of ``line`` differs from its text, the line read exactly.

    Every number orjson would write differently keeps its text (see ``ExactInt``, ``ExactFloat``), so
    ``dumps`` writes an unchanged value exactly as it was read. Raises LineError for a duplicate key
    or nesting deeper than ``MAX_DEPTH``.
    """
    if _is_canonical(line, parsed):
        return parsed
    return _read_again(line, parse_int=_exact_int, parse_float=_exact_float)


def dumps(value: object) -> bytes:
    """``value`` as orjson writes it, except numbers that ``exact`` kept the text of, written as that text.

    Raises ``orjson.JSONEncodeError`` for what orjson cannot write (nesting deeper than ``MAX_DEPTH``).
    """
    return orjson.dumps(value, default=_as_written, option=orjson.OPT_PASSTHROUGH_SUBCLASS)


def copy(value: Any) -> Any:
    """A deep copy of a JSON value: orjson's round trip, or where it holds numbers that keep their text, a walk."""
    try:
        return orjson.loads(orjson.dumps(value, option=orjson.OPT_PASSTHROUGH_SUBCLASS))
    except orjson.JSONEncodeError:  # a subclass (a number keeping its text): copied by walking, leaves shared
        return _copy(value)


def _copy(value: Any) -> Any:
    if type(value) is dict:
        return {key: _copy(item) for key, item in value.items()}
    if type(value) is list:
        return [_copy(item) for item in value]
    return value


def _is_canonical(line: bytes, parsed: object) -> bool:
    """Whether ``line`` is exactly what orjson writes for ``parsed`` (up to its line ending)."""
    try:
        canonical = orjson.dumps(parsed, option=orjson.OPT_APPEND_NEWLINE)
    except orjson.JSONEncodeError:  # the only value orjson reads but cannot write: nesting too deep
        raise TooDeep(f"nested deeper than {MAX_DEPTH} levels, more than kvlog can check or write") from None
    return canonical == line or (line.startswith(canonical[:-1]) and line[len(canonical) - 1 :] in _LINE_ENDS)


class _Duplicate(Exception):
    def __init__(self, key: str) -> None:
        self.key = key


def _unique_pairs(pairs: list[tuple[str, object]]) -> dict[str, object]:
    seen: dict[str, object] = {}
    for key, value in pairs:
        if key in seen:
            raise _Duplicate(key)
        seen[key] = value
    return seen


def _read_again(
    line: bytes, parse_int: Callable[[str], int] | None = None, parse_float: Callable[[str], float] | None = None
) -> Any:
    """The line read by the standard library, which keeps every key and integer: only lines orjson parsed get here."""
    try:
        return json.loads(line, object_pairs_hook=_unique_pairs, parse_int=parse_int, parse_float=parse_float)
    except _Duplicate as duplicate:
        raise LineError(f"duplicate key {duplicate.key!r}: readers disagree on which value counts") from None
    except (ValueError, RecursionError) as exc:  # readers disagree on whether it is JSON at all
        raise LineError(f"read differently by other JSON readers: {exc}") from None


def _exact_int(text: str) -> int:
    value = int(text)
    if INT_MIN <= value <= INT_MAX and text != "-0":
        return value
    number = ExactInt(value)
    number.text = text.encode()
    return number


def _exact_float(text: str) -> float:
    value = float(text)
    written = text.encode()
    if orjson.dumps(value) == written:
        return value
    number = ExactFloat(value)
    number.text = written
    return number


def _as_written(value: object) -> object:
    """The ``default`` of ``dumps``: numbers as they were read; other subclasses as their JSON type."""
    if isinstance(value, ExactInt | ExactFloat):
        return orjson.Fragment(value.text)
    for kind in _JSON_TYPES:
        if isinstance(value, kind):
            return kind(value)
    raise TypeError(f"Type is not JSON serializable: {type(value).__name__}")


def _wide_integers(value: object) -> list[tuple[str, int]]:
    """The JSON path and value of every integer in ``value`` beyond what 64 bits hold, in document order."""
    found: list[tuple[str, int]] = []
    pending: list[tuple[str, object]] = [("$", value)]
    while pending:
        path, item = pending.pop()
        if isinstance(item, dict):
            pending += reversed([(f"{path}.{key}", child) for key, child in item.items()])
        elif isinstance(item, list):
            pending += reversed([(f"{path}[{index}]", child) for index, child in enumerate(item)])
        elif isinstance(item, int) and not INT_MIN <= item <= INT_MAX:
            found.append((path, item))
    return found
