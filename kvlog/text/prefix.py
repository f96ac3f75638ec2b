"""The part of a server's log line before the message, built and parsed by one object per server.

Every server puts its own prefix before a message: sglang ``[2026-01-02 03:04:05 TP0] ``, other
servers a level, a source location or a process tag. What kvlog writes in a server's prefix must be
what it reads back from it, so each server's prefix is one ``ServerPrefix`` that both builds and
splits lines; a new server gets its own next to ``SGLANG``, and nothing else learns its layout.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

#: the start of another logger's line, glued after a message that lacked its newline
FOREIGN_START = re.compile(r"\[?[0-9]{4}-[0-9]{2}-[0-9]{2}[ T][0-9]{2}:[0-9]{2}|INFO:|WARNING:|ERROR:")
_TRAILING = " \t\r\n"


@dataclass(frozen=True)
class LinePrefix:
    """What the prefix said, and the message after it (trailing spaces and carriage returns removed)."""

    timestamp: str | None
    ranks: dict[str, int]
    level: str | None
    message: str


class ServerPrefix(Protocol):
    """One server's line prefix: what ``build`` writes, ``split`` reads back."""

    def build(self, timestamp: str | None, ranks: Mapping[str, int] | None) -> str:
        """The prefix for an RFC 3339 ``timestamp`` and rank tags, with the separator before the message."""
        ...

    def split(self, line: str) -> LinePrefix:
        """A line's prefix fields and its message; a line without a prefix is all message."""
        ...


_SGLANG = re.compile(
    r"\[([0-9]{4}-[0-9]{2}-[0-9]{2}) ([0-9]{2}:[0-9]{2}:[0-9]{2})(?:[.,]([0-9]{1,6}))?"
    r"((?: [A-Z][A-Z_]{0,31}[0-9]{1,6}){0,16})\] "
    r"(?:(DEBUG|INFO|WARNING|ERROR|CRITICAL) [^\s:]{1,256}:[0-9]{1,9}: )?"
)
_SGLANG_TAG = re.compile(r"([A-Z][A-Z_]{0,31}?)([0-9]{1,6})")


class SglangPrefix:
    """sglang's ``[YYYY-mm-dd HH:MM:SS<ranks>] ``.

    sglang prints local time without a zone; kvlog reads it as UTC and says so in each event's
    provenance. Rank tags (``TP0``, ``DP0 TP0``, ``ATTN_CP5``, ``MOE_DP0``, ``TP10``) are the
    envelope's ``ranks``, whose tags are lower case. A custom logging format may add ``LEVEL file.py:123: ``
    after the bracket, and a fraction of a second after the clock; kvlog reads both and writes neither.
    """

    def build(self, timestamp: str | None, ranks: Mapping[str, int] | None) -> str:
        """``[2026-01-02 03:04:05 DP0 TP1] ``; nothing at all when there is neither time nor rank."""
        inside = f"{sglang_timestamp(timestamp)}{rank_tags(ranks)}"
        return f"[{inside}] " if inside else ""

    def split(self, line: str) -> LinePrefix:
        """A line's prefix fields and its message; a line without a prefix is all message."""
        match = _SGLANG.match(line)
        if match is None:
            return LinePrefix(None, {}, None, line.rstrip(_TRAILING))
        day, clock, fraction, tags, level = match.groups()
        timestamp = f"{day}T{clock}{'.' + fraction if fraction else ''}Z"
        ranks = {m.group(1).lower(): int(m.group(2)) for m in _SGLANG_TAG.finditer(tags)}
        message = line[match.end() :].rstrip(_TRAILING)
        return LinePrefix(timestamp, ranks, level.lower() if level else None, message)


def rank_tags(ranks: Mapping[str, int] | None) -> str:
    """``{"dp": 0, "tp": 1}`` -> ``" DP0 TP1"``, the way sglang tags a rank's lines."""
    if not ranks:
        return ""
    return "".join(f" {tag.upper()}{rank}" for tag, rank in ranks.items())


def sglang_timestamp(timestamp: str | None) -> str:
    """RFC 3339 -> sglang's ``YYYY-mm-dd HH:MM:SS`` (still UTC)."""
    if not timestamp:
        return ""
    return timestamp[:19].replace("T", " ")


#: sglang's prefix: the console renderer's, and the one every sglang text generation is read with
SGLANG: ServerPrefix = SglangPrefix()
