"""Duplicate keys in a JSON line: found, never silently resolved.

orjson, like most JSON readers, keeps the last of two equal keys, so ``{"released_bytes": 0,
"released_bytes": -5}`` would validate as whatever the last value says while another reader sees
the first. A line that is exactly what orjson writes for the object it parsed to (every line kvlog
writes) cannot hold a duplicate, which settles almost every line with one ``orjson.dumps``
(measured cheaper than scanning the line for ``":`` and counting keys); only the others are read
again, by the standard library, keeping every key.
"""

from __future__ import annotations

import json

import orjson

_LINE_ENDS = (b"", b"\n", b"\r\n")


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


def duplicate_key(line: bytes, parsed: object) -> str | None:
    """The first key that appears twice in one object of ``line`` (which parsed to ``parsed``), or None.

    Lines the standard library cannot read again (nested deeper than its recursion limit) are not
    second-guessed: orjson read them, and None is returned.
    """
    canonical = orjson.dumps(parsed, option=orjson.OPT_APPEND_NEWLINE)
    if canonical == line or (line.startswith(canonical[:-1]) and line[len(canonical) - 1 :] in _LINE_ENDS):
        return None
    try:
        json.loads(line, object_pairs_hook=_unique_pairs)
    except _Duplicate as duplicate:
        return duplicate.key
    except (ValueError, RecursionError):
        return None
    return None
