"""The part of an sglang log line before the message: ``[YYYY-mm-dd HH:MM:SS<ranks>] ``.

sglang prints local time without a zone; kvlog reads it as UTC and says so in each event's
provenance. Rank tags (``TP0``, ``DP0 TP0``, ``ATTN_CP5``, ``MOE_DP0``, ``TP10``) become the
envelope's ``ranks`` with lower-case tags. A custom logging format may add ``LEVEL file.py:123: ``
after the bracket; bare messages have no prefix at all.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_PREFIX = re.compile(
    r"\[([0-9]{4}-[0-9]{2}-[0-9]{2}) ([0-9]{2}:[0-9]{2}:[0-9]{2})(?:[.,]([0-9]{1,6}))?"
    r"((?: [A-Z][A-Z_]{0,31}[0-9]{1,6}){0,16})\] "
    r"(?:(DEBUG|INFO|WARNING|ERROR|CRITICAL) [^\s:]{1,256}:[0-9]{1,9}: )?"
)
#: the start of another logger's line, glued after a message that lacked its newline
FOREIGN_START = re.compile(r"\[?[0-9]{4}-[0-9]{2}-[0-9]{2}[ T][0-9]{2}:[0-9]{2}|INFO:|WARNING:|ERROR:")
_TAG = re.compile(r"([A-Z][A-Z_]{0,31}?)([0-9]{1,6})")
_TRAILING = " \t\r\n"


@dataclass(frozen=True)
class LinePrefix:
    """What the prefix said, and the message after it (trailing spaces and carriage returns removed)."""

    timestamp: str | None
    ranks: dict[str, int]
    level: str | None
    message: str


def split_prefix(line: str) -> LinePrefix:
    """Split a line into its prefix fields and its message; a line without a prefix is all message."""
    match = _PREFIX.match(line)
    if match is None:
        return LinePrefix(None, {}, None, line.rstrip(_TRAILING))
    day, clock, fraction, tags, level = match.groups()
    timestamp = f"{day}T{clock}{'.' + fraction if fraction else ''}Z"
    ranks = {m.group(1).lower(): int(m.group(2)) for m in _TAG.finditer(tags)}
    return LinePrefix(timestamp, ranks, level.lower() if level else None, line[match.end() :].rstrip(_TRAILING))
