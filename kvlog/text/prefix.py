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
from functools import lru_cache
from typing import Protocol

from kvlog.schema.readings import rank_text

#: the start of another logger's line, glued after a message that lacked its newline
FOREIGN_START = re.compile(r"\[?[0-9]{4}-[0-9]{2}-[0-9]{2}[ T][0-9]{2}:[0-9]{2}|INFO:|WARNING:|ERROR:")
_TRAILING = " \t\r\n"


@dataclass(frozen=True)
class LinePrefix:
    """What a line's header says, and the message after it (trailing spaces and carriage returns removed).

    The one shape of a header, whoever reads it: a ``ServerPrefix`` splits it off a printed line, and
    the live handler makes it from a log record's own fields (``kvlog.migration.engine.FileRun.messages``),
    so that the engine reads both alike. ``partial`` is what a prefix without a full date prints of the
    time, as the end of an RFC 3339 timestamp (``10:00:05``: the time of day; ``06-01T10:00:05``:
    month, day and time, no year); ``timestamp`` is then None. ``pid`` is the process a prefix names.
    """

    timestamp: str | None
    ranks: dict[str, int]
    level: str | None
    message: str
    partial: str | None = None
    pid: int | None = None
    #: ``timestamp`` is the instant itself, in UTC (a log record's ``created``): nothing about it is inferred,
    #: where a printed time is a naive clock that kvlog reads as UTC
    exact: bool = False


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
            return LinePrefix(None, _tags(tags), None, line[match.end() :].rstrip(_TRAILING), partial=clock)
        match = _SGLANG_MESSAGE_RANK.match(line)
        if match is not None:
            ranks = {_MESSAGE_RANK_TAGS[match.group(1)]: int(match.group(2))}
            return LinePrefix(None, ranks, None, line[match.end() :].rstrip(_TRAILING))
        return LinePrefix(None, {}, None, line.rstrip(_TRAILING))


def _tags(tags: str) -> dict[str, int]:
    return dict(_tag_pairs(tags))


@lru_cache(maxsize=1024)
def _tag_pairs(tags: str) -> tuple[tuple[str, int], ...]:
    """A prefix's rank tags, read once per spelling: a log repeats a handful of them on every line."""
    return tuple((m.group(1).lower(), int(m.group(2))) for m in _SGLANG_TAG.finditer(tags))


def sglang_ranks(tags: str) -> dict[str, int]:
    """The ranks in sglang's rank tags (`` DP1 TP1 EP1``, the ``prefix`` its processes configure logging with)."""
    return _tags(tags)


def rank_tags(ranks: Mapping[str, int] | None) -> str:
    """``{"dp": 0, "tp": 1}`` -> ``" DP0 TP1"``, the way sglang tags a rank's lines."""
    if not ranks:
        return ""
    # a list: half a generator's cost; an int as it is (a live event's), anything else as JSON reads it
    return "".join([f" {tag.upper()}{rank if type(rank) is int else rank_text(rank)}" for tag, rank in ranks.items()])


def sglang_timestamp(timestamp: str | None) -> str:
    """RFC 3339 -> sglang's ``YYYY-mm-dd HH:MM:SS`` (still UTC)."""
    if not timestamp:
        return ""
    return timestamp[:19].replace("T", " ")


#: sglang's prefix: the console renderer's, and the one every sglang text generation is read with
SGLANG: ServerPrefix = SglangPrefix()

_VLLM = re.compile(
    r"(?:\((?P<process>[A-Za-z][\w.-]{0,63})(?: rank=(?P<rank>[0-9]{1,6}))? pid=(?P<pid>[0-9]{1,10})\) )?"
    r"(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) (?P<month>[0-9]{2})-(?P<day>[0-9]{2}) "
    r"(?P<clock>[0-9]{2}:[0-9]{2}:[0-9]{2})(?:[.,](?P<fraction>[0-9]{1,6}))? "
    r"\[?[^\s\]:]{1,256}:[0-9]{1,9}\] "
)
#: the parallelism tags in a vLLM process name: ``EngineCore_DP0``, ``Worker_PP1_TP3``
_VLLM_TAG = re.compile(r"_([A-Z]{2,8})([0-9]{1,6})(?=_|$)")


class VllmPrefix:
    """vLLM's ``LEVEL MM-DD HH:MM:SS file.py:123] `` (the file in brackets from 0.8.0, its path from 0.10).

    Multi-process engines put the process before it, ``(EngineCore_DP0 pid=1234) `` or ``(VllmWorker
    rank=0 pid=1234) `` (in the format itself from 0.34): its tags are ranks and its pid the event's.
    vLLM prints no year, so a line's time is ``partial``; its continuation lines repeat the prefix.
    """

    def build(self, timestamp: str | None, ranks: Mapping[str, int] | None) -> str:
        """``(EngineCore_DP0 pid=0) INFO 01-02 03:04:05 [kvlog:0] ``-like: the process only when there are ranks."""
        when = f"{timestamp[5:10]} {timestamp[11:19]}" if timestamp else "01-01 00:00:00"
        process = ""
        if ranks:
            tags = "".join(f"_{tag.upper()}{rank_text(rank)}" for tag, rank in ranks.items() if tag != "rank")
            worker_rank = f" rank={rank_text(ranks['rank'])}" if "rank" in ranks else ""
            process = f"(Worker{tags}{worker_rank} pid=0) "
        return f"{process}INFO {when} [kvlog:0] "

    def split(self, line: str) -> LinePrefix:
        """A line's prefix fields and its message; a line without a prefix is all message."""
        match = _VLLM.match(line)
        if match is None:
            return LinePrefix(None, {}, None, line.rstrip(_TRAILING))
        ranks: dict[str, int] = {}
        if match.group("process"):
            ranks = vllm_process_ranks(match.group("process"))
        if match.group("rank"):
            ranks["rank"] = int(match.group("rank"))
        fraction = f".{match.group('fraction')}" if match.group("fraction") else ""
        partial = f"{match.group('month')}-{match.group('day')}T{match.group('clock')}{fraction}"
        pid = int(match.group("pid")) if match.group("pid") else None
        message = line[match.end() :].rstrip(_TRAILING)
        return LinePrefix(None, ranks, match.group("level").lower(), message, partial=partial, pid=pid)


def vllm_process_ranks(process: str) -> dict[str, int]:
    """The parallelism tags in a vLLM process name (``EngineCore_DP0``, ``Worker_PP1_TP3``) as ranks."""
    return {m.group(1).lower(): int(m.group(2)) for m in _VLLM_TAG.finditer(process)}


VLLM: ServerPrefix = VllmPrefix()
#: every server kvlog reads, by the name its migrations directory (``<server>-text``) and ``--source`` use
SERVERS: dict[str, ServerPrefix] = {"sglang": SGLANG, "vllm": VLLM}
