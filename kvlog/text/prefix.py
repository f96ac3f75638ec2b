"""The part of a server's log line before the message, built and parsed by one object per server.

Every server puts its own prefix before a message: sglang ``[2026-01-02 03:04:05 TP0] ``, other
servers a level, a source location or a process tag. What kvlog writes in a server's prefix must be
what it reads back from it, so each server's prefix is one ``ServerPrefix`` that both builds and
splits lines; a new server gets its own next to ``SGLANG``, and nothing else learns its layout.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache
from typing import NamedTuple, Protocol

from kvlog.schema.readings import rank_text

#: the start of another logger's line, glued after a message that lacked its newline
FOREIGN_START = re.compile(r"\[?[0-9]{4}-[0-9]{2}-[0-9]{2}[ T][0-9]{2}:[0-9]{2}|INFO:|WARNING:|ERROR:")
_TRAILING = " \t\r\n"


class LinePrefix(NamedTuple):
    """What a line's header says, and the message after it (trailing spaces and carriage returns removed).

    The one shape of a header, whoever reads it: a ``ServerPrefix`` splits it off a printed line, and
    the live handler makes it from a log record's own fields (``kvlog.migration.engine.FileRun.messages``),
    so that the engine reads both alike. ``partial`` is what a prefix without a full date prints of the
    time, as the end of an RFC 3339 timestamp (``10:00:05``: the time of day; ``06-01T10:00:05``:
    month, day and time, no year); ``timestamp`` is then None. ``pid`` is the process a prefix names.

    A named tuple, not a frozen dataclass: every candidate line builds one, and a frozen dataclass's
    ``__init__`` (an ``object.__setattr__`` per field) cost four times a tuple's on the dense benchmark.
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


_SGLANG_HEAD = r"\[([0-9]{4}-[0-9]{2}-[0-9]{2}) ([0-9]{2}:[0-9]{2}:[0-9]{2})(?:[.,]([0-9]{1,6}))?"
_SGLANG_LEVEL = r"(?:(DEBUG|INFO|WARNING|ERROR|CRITICAL) [^\s:]{1,256}:[0-9]{1,9}: )?"
_SGLANG_RANK_TAGS = r"((?: [A-Z][A-Z_]{0,31}[0-9]{1,6}){0,16})"
#: rank tags (``TP0``, ``ATTN_CP5``) with the repr of an enum some releases and forks put among them
#: (``DisaggregationMode.DECODE``), which names no rank: tried only where the plain tags fail
_SGLANG_ANY_TAGS = r"((?: (?:[A-Z][A-Z_]{0,31}[0-9]{1,6}|[A-Z][A-Za-z]{0,63}\.[A-Za-z_][A-Za-z0-9_]{0,31})){0,16})"
_SGLANG = re.compile(rf"{_SGLANG_HEAD}{_SGLANG_RANK_TAGS}\] {_SGLANG_LEVEL}")
_SGLANG_ENUM = re.compile(rf"{_SGLANG_HEAD}{_SGLANG_ANY_TAGS}\] {_SGLANG_LEVEL}")
_SGLANG_TAG = re.compile(r"([A-Z][A-Z_]{0,31}?)([0-9]{1,6})")
#: sglang 0.2.14 to 0.3.3.post1: the time of day only, ``[10:00:05 TP0] ``
_SGLANG_CLOCK = re.compile(rf"\[([0-9]{{2}}:[0-9]{{2}}:[0-9]{{2}}){_SGLANG_ANY_TAGS}\] ")
#: a prefix cut to its ranks (``[TP0] ``, ``[DP0 TP0] ``): a paste that kept only them
_SGLANG_RANKS_ONLY = re.compile(r"\[((?:[A-Z][A-Z_]{0,31}[0-9]{1,6})(?: [A-Z][A-Z_]{0,31}[0-9]{1,6}){0,15})\] ")
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
    An enum's repr among the tags (``[… DisaggregationMode.DECODE TP1]``) names no rank and is passed
    over; a prefix cut to its ranks (``[TP0] ``) gives the ranks and no time.
    """

    def build(self, timestamp: str | None, ranks: Mapping[str, int] | None) -> str:
        """``[2026-01-02 03:04:05 DP0 TP1] ``; nothing at all when there is neither time nor rank."""
        inside = f"{sglang_timestamp(timestamp)}{rank_tags(ranks)}"
        return f"[{inside}] " if inside else ""

    def split(self, line: str) -> LinePrefix:
        """A line's prefix fields and its message; a line without a prefix is all message."""
        match = _SGLANG.match(line) or _SGLANG_ENUM.match(line)
        if match is not None:
            day, clock, fraction, tags, level = match.groups()
            timestamp = f"{day}T{clock}{'.' + fraction if fraction else ''}Z"
            message = line[match.end() :].rstrip(_TRAILING)
            return LinePrefix(timestamp, _tags(tags), level.lower() if level else None, message)
        match = _SGLANG_CLOCK.match(line)
        if match is not None:
            clock, tags = match.groups()
            return LinePrefix(None, _tags(tags), None, line[match.end() :].rstrip(_TRAILING), partial=clock)
        match = _SGLANG_RANKS_ONLY.match(line)
        if match is not None:
            return LinePrefix(None, _tags(" " + match.group(1)), None, line[match.end() :].rstrip(_TRAILING))
        match = _SGLANG_MESSAGE_RANK.match(line)
        if match is not None:
            ranks = {_MESSAGE_RANK_TAGS[match.group(1)]: int(match.group(2))}
            return LinePrefix(None, ranks, None, line[match.end() :].rstrip(_TRAILING))
        return LinePrefix(None, {}, None, line.rstrip(_TRAILING))


def _tags(tags: str) -> dict[str, int]:
    return dict(_tag_pairs(tags))


@lru_cache(maxsize=1024)
def _tag_pairs(tags: str) -> tuple[tuple[str, int], ...]:
    """A prefix's rank tags, read once per spelling: a log repeats a handful of them on every line.

    A tag with a dot is an enum's repr, no rank.
    """
    matches = (_SGLANG_TAG.fullmatch(tag) for tag in tags.split() if "." not in tag)
    return tuple((m.group(1).lower(), int(m.group(2))) for m in matches if m is not None)


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

#: one process tag: vLLM's own (``(VllmWorker TP0 pid=1430) ``, ``(EngineCore_DP0 pid=7) ``, ``(VllmWorker
#: rank=0 pid=7) ``) or Ray's for its actors and tasks (``(RayWorkerWrapper pid=7, ip=10.0.0.1) ``, ``(pid=7) ``);
#: a name may hold spaces, colons and one level of parentheses (``(ServeReplica:app:LLM pid=7)``, ``(Map(f) pid=7)``)
_VLLM_WORD = r"[^()\s]{0,64}(?:\([^()\n]{0,64}\)[^()\s]{0,64})?"
_VLLM_PROCESS = rf"\((?:{_VLLM_WORD} ){{0,8}}pid=[0-9]{{1,10}}(?:, ip=[^()\s]{{1,64}})?\) "
_VLLM = re.compile(
    rf"(?P<processes>(?:{_VLLM_PROCESS}){{0,8}})"
    r"(?:\[Stage-(?P<stage>[0-9]{1,4})\] )?"
    r"(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) (?P<month>[0-9]{2})-(?P<day>[0-9]{2}) "
    r"(?P<clock>[0-9]{2}:[0-9]{2}:[0-9]{2})(?:[.,](?P<fraction>[0-9]{1,6}))? "
    r"\[?[^\s\]:]{1,256}:[0-9]{1,9}\] "
)
#: a prefix cut to its source location by whoever pasted it (``[kv_cache_utils.py:868] ``): no time, no ranks
_VLLM_CUT = re.compile(r"\[[\w./-]{1,256}\.py:[0-9]{1,9}\] ")
_VLLM_PROCESS_PARTS = re.compile(rf"\((?P<name>(?:{_VLLM_WORD} ){{0,8}})pid=(?P<pid>[0-9]{{1,10}})")
#: the parallelism tags in a vLLM process name: ``EngineCore_DP0``, ``Worker_PP1_TP3``, ``VllmWorker PP0_TP1``
_VLLM_TAG = re.compile(r"(?:^|[_ ])([A-Z]{2,8})([0-9]{1,6})(?=[_ ]|$)")
#: ``EngineCore_N``: vLLM 0.9 to 0.10 named an engine process by its data-parallel rank alone
_VLLM_ENGINE_INDEX = re.compile(r"EngineCore_([0-9]{1,6})")
_VLLM_WORKER_RANK = re.compile(r" rank=([0-9]{1,6})$")


class VllmPrefix:
    """vLLM's ``LEVEL MM-DD HH:MM:SS file.py:123] `` (the file in brackets from 0.8.0, its path from 0.10).

    Multi-process engines put the process before it, ``(EngineCore_DP0 pid=1234) ``, ``(VllmWorker TP0
    pid=1234) `` or ``(VllmWorker rank=0 pid=1234) `` (in the format itself from 0.34), and Ray its
    actors' (``(RayWorkerWrapper pid=1234, ip=10.0.0.1) ``), several deep where one relays another's
    lines: their tags are ranks and the innermost pid the event's. A fork's stage (vllm-omni's
    ``[Stage-1] ``, before the level) is the rank ``stage``.
    vLLM prints no year, so a line's time is ``partial``; its continuation lines repeat the prefix.
    A prefix cut to its source location (``[kv_cache_utils.py:868] ``, as pasted) gives neither time nor ranks.
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
            cut = _VLLM_CUT.match(line) if line.startswith("[") else None
            return LinePrefix(None, {}, None, line[cut.end() if cut else 0 :].rstrip(_TRAILING))
        ranks: dict[str, int] = {}
        pid = None
        if match.group("processes"):
            read = _processes(match.group("processes"))
            if read is None:  # two tags give one rank two values: which is the line's is not known
                return LinePrefix(None, {}, None, line.rstrip(_TRAILING))
            ranks, pid = read
        if match.group("stage"):
            ranks["stage"] = int(match.group("stage"))
        fraction = f".{match.group('fraction')}" if match.group("fraction") else ""
        partial = f"{match.group('month')}-{match.group('day')}T{match.group('clock')}{fraction}"
        message = line[match.end() :].rstrip(_TRAILING)
        return LinePrefix(None, ranks, match.group("level").lower(), message, partial=partial, pid=pid)


def _processes(tags: str) -> tuple[dict[str, int], int | None] | None:
    """The ranks all of a line's process tags name, and the pid of the innermost (the process that logged).

    Ray prints a worker's lines through its driver, which may be a vLLM process that tags them again:
    ``(EngineCore_DP0 pid=1) (RayWorkerWrapper pid=2, ip=10.0.0.1) ``. Each tag is a process the line
    passed through, so the ranks of all of them are the line's; None where two disagree.
    """
    read = _process_tags(tags)
    return None if read is None else (dict(read[0]), read[1])


@lru_cache(maxsize=1024)
def _process_tags(tags: str) -> tuple[tuple[tuple[str, int], ...], int | None] | None:
    """``_processes``, read once per spelling: a log's lines repeat the tags of a handful of processes."""
    ranks: dict[str, int] = {}
    pid = None
    for tag in _VLLM_PROCESS_PARTS.finditer(tags):
        pid = int(tag.group("pid"))
        for name, rank in vllm_process_ranks(tag.group("name").rstrip()).items():
            if ranks.setdefault(name, rank) != rank:
                return None
    return tuple(ranks.items()), pid


def vllm_process_ranks(process: str) -> dict[str, int]:
    """The ranks in a vLLM process name (``EngineCore_DP0``, ``Worker_PP1_TP3``, ``VllmWorker TP0``).

    ``VllmWorker rank=0``'s worker rank is ``rank``; an engine named by its index alone (``EngineCore_0``,
    vLLM 0.9 to 0.10) is named by its data-parallel rank (``dp_rank=global_index`` where it is started).
    """
    worker = _VLLM_WORKER_RANK.search(process)
    name = process if worker is None else process[: worker.start()]
    ranks = {m.group(1).lower(): int(m.group(2)) for m in _VLLM_TAG.finditer(name)}
    engine = _VLLM_ENGINE_INDEX.fullmatch(name)
    if engine is not None:
        ranks["dp"] = int(engine.group(1))
    if worker is not None:
        ranks["rank"] = int(worker.group(1))
    return ranks


VLLM: ServerPrefix = VllmPrefix()
#: every server kvlog reads, by the name its migrations directory (``<server>-text``) and ``--source`` use
SERVERS: dict[str, ServerPrefix] = {"sglang": SGLANG, "vllm": VLLM}
