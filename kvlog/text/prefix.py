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
    """What the prefix said, and the message after it (trailing spaces and carriage returns removed).

    ``clock`` is the time of day of a prefix that prints no date (``timestamp`` is then None).
    """

    timestamp: str | None
    ranks: dict[str, int]
    level: str | None
    message: str
    clock: str | None = None


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
#: sglang 0.2.14 to 0.3.3.post1: the time of day only, ``[10:00:05 TP0] ``
_SGLANG_CLOCK = re.compile(r"\[([0-9]{2}:[0-9]{2}:[0-9]{2})((?: [A-Z][A-Z_]{0,31}[0-9]{1,6}){0,16})\] ")
#: sglang up to 0.2.13 logged bare messages, the rank inside them: ``[gpu_id=0] ``, ``[gpu=0] ``, ``[rank=0] ``
_SGLANG_MESSAGE_RANK = re.compile(r"\[(gpu_id|gpu|rank)=([0-9]{1,6})\] ")
_MESSAGE_RANK_TAGS = {"gpu_id": "gpu", "gpu": "gpu", "rank": "tp"}


class SglangPrefix:
    """sglang's ``[YYYY-mm-dd HH:MM:SS<ranks>] ``.

    sglang prints local time without a zone; kvlog reads it as UTC and says so in each event's
    provenance. Rank tags (``TP0``, ``DP0 TP0``, ``ATTN_CP5``, ``MOE_DP0``, ``TP10``) are the
    envelope's ``ranks``, whose tags are lower case. A custom logging format may add ``LEVEL file.py:123: ``
    after the bracket, and a fraction of a second after the clock; kvlog reads both and writes neither.
    Older eras are read too: the time of day alone (0.2.14 to 0.3.3.post1, ``clock``), and before that
    no prefix but a rank tag opening the message (``[gpu_id=0]``, ``[gpu=0]``: rank ``gpu``; ``[rank=0]``: ``tp``).
    """

    def build(self, timestamp: str | None, ranks: Mapping[str, int] | None) -> str:
        """``[2026-01-02 03:04:05 DP0 TP1] ``; nothing at all when there is neither time nor rank."""
        inside = f"{sglang_timestamp(timestamp)}{rank_tags(ranks)}"
        return f"[{inside}] " if inside else ""

    def split(self, line: str) -> LinePrefix:
        """A line's prefix fields and its message; a line without a prefix is all message."""
        match = _SGLANG.match(line)
        if match is not None:
            day, clock, fraction, tags, level = match.groups()
            timestamp = f"{day}T{clock}{'.' + fraction if fraction else ''}Z"
            message = line[match.end() :].rstrip(_TRAILING)
            return LinePrefix(timestamp, _tags(tags), level.lower() if level else None, message)
        match = _SGLANG_CLOCK.match(line)
        if match is not None:
            clock, tags = match.groups()
            return LinePrefix(None, _tags(tags), None, line[match.end() :].rstrip(_TRAILING), clock)
        match = _SGLANG_MESSAGE_RANK.match(line)
        if match is not None:
            ranks = {_MESSAGE_RANK_TAGS[match.group(1)]: int(match.group(2))}
            return LinePrefix(None, ranks, None, line[match.end() :].rstrip(_TRAILING))
        return LinePrefix(None, {}, None, line.rstrip(_TRAILING))


def _tags(tags: str) -> dict[str, int]:
    return {m.group(1).lower(): int(m.group(2)) for m in _SGLANG_TAG.finditer(tags)}


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
