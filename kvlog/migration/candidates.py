"""Finding the lines a migration rule might read, at memchr speed: the byte-probe prefilter.

A server log is mostly request lines that no rule reads, and ``kvlog migrate`` is meant to cost
about what ``sed`` costs on it. Splitting every line and asking every wording would cost far
more, so a block is searched for the keywords every wording contains instead, each through a byte
of it that is rare in request logs (a single-byte ``bytes.find`` runs at memchr speed, several
times faster than a word search), and checked in place where that byte turns up. Only the lines
with a keyword (and the JSON lines that name a ``"schema_version"``) are handed to the engine;
everything between them is copied through as one range of the block.

A keyword alone would let a memory line in a wording nobody foresaw pass unseen, neither migrated nor
reported. So a second probe follows the first: a line that carries a memory *figure* (a number with a
unit of bytes, or ``mem``/``memory``/``bytes`` beside a number, ``carries_memory_figure``) is a
candidate too, whatever its other words, and the engine reports it when no rule reads it. The
keywords stay, for the lines a rule reads that carry no figure (``server_args=``, the server's ready
line, ``Mamba Cache`` sizes glued to a word); ``tests/test_migration_parsing.py`` checks that every
wording is found.

The search itself has two engines (``kvlog.native``): the compiled ``kvlog._native`` where it is built,
and the Python one below, the reference it is held to (``tests/test_native_differential.py``). This
module owns the tables either searches with and hands them to the native one as it is built, so that no
word is listed twice; both give the sorted starts of a block's candidate lines (``Prefilter``), and
what is made of them (``split``, ``segments``: runs, lines over the cap) is the same code for both.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from functools import cache, partial
from typing import Protocol

from kvlog import native

BLOCK_BYTES = 1 << 16
#: longer lines are copied without being parsed (sglang's memory lines are a few hundred bytes)
MAX_LINE_BYTES = 1 << 16
#: after this many probe bytes that start no keyword in a block, search for the keywords themselves
_PROBE_MISSES = 64
#: Every line a rule reads contains one of these words. Each is found through a byte of it that is rare
#: in request logs (a single-byte search runs at memchr speed, several times faster than a word search),
#: then checked in place: (probe byte, offset of the byte in the words, words).
_PROBES: tuple[tuple[bytes, int, tuple[bytes, ...]], ...] = (
    (
        b"V",
        1,
        (
            b"KV Cache",
            b"KV cache dtype",
            b"KV cache is",
            b"KV cache.",
            b"KVPool",
            b"KV sizing",
            b"KV host",
            b"KV pool",
            # vLLM: ``GPU KV cache size: N tokens`` (no figure), the extensible cache's ``Extended KV cache to``
            b"KV cache size",
            b"KV cache capacity",
            b"KV cache to",
            b"KV cache extended",
            # vLLM's check of the first engine: ``… tokens that can be stored in KV cache (M).`` (no figure of bytes)
            b"KV cache (",
        ),
    ),
    # not through its V: the other V probe's misses (every ``KV``) would be this one's too
    (b"A", 5, (b"KvVmmArena",)),
    (b"M", 0, (b"Memory pool", b"Mamba", b"Maximum concurrency", b"Memory profiling", b"Memory after warmup")),
    # vLLM: ``# GPU blocks: N, # CPU blocks: M`` (and the other platforms' ``# TPU blocks``, ``# cuda blocks: N, #
    # CPU blocks: M``, the CPU backend's ``# CPU blocks: N``), the CUDA-graph capture and sleep mode (whose
    # figures may be absent)
    (b"U", 4, (b"# GPU blocks", b"# CPU blocks", b"# TPU blocks", b"# HPU blocks", b"# XPU blocks", b"# NPU blocks")),
    (b"_", 5, (b"cache_config_info",)),
    (b"G", 0, (b"Graph capturing",)),
    (b"m", 6, (b"Sleep mode",)),  # not through its S: every uvicorn line's POST has one
    # and vLLM's version lines (``vLLM API server version``, ``… LLM engine (v0.10.1) with config``)
    (b"L", 0, (b"Load weight", b"LLM API server version", b"LLM server version", b"LLM engine (v")),
    (b"_", 3, (b"max_total_num_token",)),
    (b"_", 6, (b"server_args=",)),
    (b"C", 2, (b"HiCache",)),
    # the server's ready line, which ends every rank's start-up (``!`` is rare in request logs)
    (b"!", 13, (b"ready to roll!",)),
    (b"U", 0, (b"Use sliding window",)),
    (b"{", 0, (b"{",)),
)
#: What makes a line a candidate only when usage is read (``kvlog migrate --usage``): the periodic statistics
#: lines (vLLM's ``GPU KV cache usage: X%``, sglang's ``token usage: 0.xx``), which are many in a server's log.
#: Without ``--usage`` they are not searched for at all: the default path costs what it cost before.
_USAGE_PROBES: tuple[tuple[bytes, int, tuple[bytes, ...]], ...] = (
    (b"V", 1, (b"KV cache usage",)),
    (b"k", 2, (b"token usage",)),
)
#: A figure of memory: a number with a unit of bytes, or one of the words beside a number somewhere in
#: the message. The byte form probes whole lines (a timestamp's digits count there, so it finds more
#: lines than the message alone would); ``carries_memory_figure`` decides on the message.
_UNIT = r"[0-9] ?(?:[KMGTP]i?B|kB)\b"
#: the words that, standing alone in any case beside a number somewhere in the message, make a figure
_FIGURE_WORDS = ("memory", "mem", "bytes")
_WORD = r"(?i:(?<![a-z])(?:" + "|".join(_FIGURE_WORDS) + r")(?![a-z]))"
_UNIT_TEXT, _WORD_TEXT, _DIGIT_TEXT = re.compile(_UNIT), re.compile(_WORD), re.compile(r"[0-9]")
_UNIT_BYTES, _WORD_BYTES, _DIGIT_BYTES = re.compile(_UNIT.encode()), re.compile(_WORD.encode()), re.compile(rb"[0-9]")
#: where a figure can start to be seen, as ``_PROBES``: the B of a unit, and the words through a rare byte
#: of each (``m`` and ``y`` are rare in request logs; a log where they are not is searched word by word)
_FIGURE_PROBES: tuple[tuple[bytes, int, tuple[bytes, ...]], ...] = (
    (b"B", 0, (b"B",)),
    (b"m", 0, (b"mem",)),
    (b"M", 0, (b"Mem", b"MEM")),
    (b"y", 1, (b"bytes", b"Bytes", b"BYTES")),
)
#: what marks a JSON line as a kvlog event (a candidate), and a line that fails to read as a broken one
JSON_EVENT = b'"schema_version"'


class Readable(Protocol):
    """Anything with ``read(size) -> bytes``: a file, a decompressing stream, standard input."""

    def read(self, size: int = -1, /) -> bytes:
        """Up to ``size`` bytes; empty at the end."""
        ...


def segments(stream: Readable, *, usage: bool = False) -> Iterator[tuple[bool | None, bytes, int, int]]:
    """``data[start:end]``: runs of lines no rule can read (False) and single candidate lines (True).

    Blocks are not sliced into copies: a segment is a range of the block it lies in, so a log is
    copied once on the way in and once on the way out. A line longer than ``MAX_LINE_BYTES`` is never
    read as a memory line, and never passes unseen: one that fits in twice the cap comes alone as a
    candidate (the engine says it is too long to read); a longer one is passed on in pieces as they
    arrive, so that neither memory nor the cost per byte grows with its length, and then stands as
    ``(None, head, 0, length)``: its first ``MAX_LINE_BYTES`` bytes and its length, newline included.
    With ``usage``, the periodic usage lines are candidates too (``_USAGE_PROBES``).
    """
    found = chosen(usage=usage)
    pending: list[bytes] = []
    pending_bytes = 0
    streaming: tuple[bytes, int] | None = None  # inside a line over the cap: its head, and its bytes so far
    while True:
        block = stream.read(BLOCK_BYTES)
        if not block:
            if streaming is not None:
                yield None, streaming[0], 0, streaming[1]
            elif pending:
                yield from _joined(b"".join(pending), found)
            return
        if streaming is not None:
            end = block.find(b"\n") + 1
            if end == 0:
                yield False, block, 0, len(block)
                streaming = (streaming[0], streaming[1] + len(block))
                continue
            yield False, block, 0, end
            yield None, streaming[0], 0, streaming[1] + end
            streaming = None
            block = block[end:]
            if not block:
                continue
        cut = block.rfind(b"\n") + 1
        if cut == 0:
            pending.append(block)  # a line longer than a block: joined once its end arrives
            pending_bytes += len(block)
            if pending_bytes > MAX_LINE_BYTES + 1:  # too long to be read: pass it on as it comes
                data = b"".join(pending)
                yield False, data, 0, len(data)
                pending, pending_bytes, streaming = [], 0, (data[:MAX_LINE_BYTES], len(data))
            continue
        begin = 0
        if pending:  # only the line the block cut is joined: the rest is read in place, not copied
            begin = block.find(b"\n") + 1
            yield from _joined(b"".join([*pending, block[:begin]]), found)
        if begin < cut:
            yield from split(block, cut, begin, prefilter=found)
        pending = [block[cut:]] if cut < len(block) else []
        pending_bytes = len(block) - cut


def _joined(line: bytes, found: Prefilter) -> Iterator[tuple[bool | None, bytes, int, int]]:
    """``split`` for one line joined across blocks, the only kind that can be longer than a block.

    One over the cap comes alone as a candidate, whatever its words, for the engine to count and
    report it as a line too long to read.
    """
    if len(line) - line.endswith(b"\n") <= MAX_LINE_BYTES:
        yield from split(line, len(line), prefilter=found)
    else:
        yield True, line, 0, len(line)


#: The sorted starts of the candidate lines of ``data[begin:size]`` (whole lines), as ``(data, begin, size)``.
Prefilter = Callable[[bytes, int, int], list[int]]


def split(
    data: bytes, size: int, begin: int = 0, *, prefilter: Prefilter | None = None
) -> Iterator[tuple[bool | None, bytes, int, int]]:
    """``data[begin:size]`` (whole lines) as ``segments`` gives it: runs of other lines, and each candidate alone.

    ``prefilter``: the one in use, without the usage lines, by default (``chosen()``).
    """
    position = begin
    for start in (prefilter or chosen())(data, begin, size):
        if start > position:
            yield False, data, position, start
        end = data.find(b"\n", start, size)
        end = size if end == -1 else end + 1
        yield True, data, start, end
        position = end
    if position < size:
        yield False, data, position, size


#: what a probe word found in a line makes of it: a candidate at once, one if the line also names
#: ``"schema_version"`` (a JSON event), or one if the line carries a memory figure
_KEYWORD, _JSON, _FIGURE = 0, 1, 2
#: The probes merged by byte, keywords before figure words: each distinct byte is searched for once per
#: block, and where it turns up every word it can be part of is checked at once. A line once found is
#: skipped whole by every later scan, so that in a dense log a memory line costs a scan or two, not one
#: per probe byte and miss it holds. (byte, ((offset of the byte in the words, words, what a hit means), ...))
_Check = tuple[int, tuple[bytes, ...], int]
_Scan = tuple[bytes, tuple[_Check, ...]]


def _scans(keywords: tuple[tuple[bytes, int, tuple[bytes, ...]], ...]) -> tuple[_Scan, ...]:
    probes = [
        *((byte, offset, words, _JSON if byte == b"{" else _KEYWORD) for byte, offset, words in keywords),
        *((byte, offset, words, _FIGURE) for byte, offset, words in _FIGURE_PROBES),
    ]
    return tuple(
        (byte, tuple((offset, words, kind) for probe, offset, words, kind in probes if probe == byte))
        for byte in dict.fromkeys(probe for probe, _, _, _ in probes)
    )


#: each scan as ``_scan`` takes it: the byte, its first check apart (most finds fail that one test and
#: stop there), the other checks, every check, whether the byte starts only words of figures, and
#: whether a find is first looked up among the lines found (not in the first scan: none are yet)
_Plan = tuple[bytes, int, tuple[bytes, ...], tuple[_Check, ...], tuple[_Check, ...], bool, bool]


def _plans(scans: tuple[_Scan, ...]) -> tuple[_Plan, ...]:
    return tuple(
        (
            byte,
            checks[0][0],
            checks[0][1],
            checks[1:],
            checks,
            all(kind == _FIGURE for _, _, kind in checks),
            number > 0,
        )
        for number, (byte, checks) in enumerate(scans)
    )


_SCANS = _scans(_PROBES)
#: the same with the usage lines' words: ``segments(..., usage=True)``
_USAGE_SCANS = _scans((*_PROBES, *_USAGE_PROBES))


def chosen(*, usage: bool = False) -> Prefilter:
    """The prefilter a run uses: the native one where ``kvlog._native`` is built and not ruled out (``kvlog.native``).

    Asked at each ``segments`` call, not at import, so that ``KVLOG_NATIVE`` set in-process (a test) is obeyed.
    """
    return (native_prefilter(usage=usage) if native.selected() is not None else None) or python_prefilter(usage=usage)


@cache
def python_prefilter(*, usage: bool = False) -> Prefilter:
    """The reference prefilter, in Python: each probe byte's ``_scan`` over the block."""
    return partial(_python_starts, _plans(_USAGE_SCANS if usage else _SCANS))


@cache
def native_prefilter(*, usage: bool = False) -> Prefilter | None:
    """The same search compiled (``kvlog._native.Prefilter``, over this module's tables), or None where not built."""
    compiled = native.compiled()
    if compiled is None:
        return None
    scans = _USAGE_SCANS if usage else _SCANS
    starts: Prefilter = compiled.Prefilter(scans, JSON_EVENT, _FIGURE_WORDS, _PROBE_MISSES).starts
    return starts


#: The newlines of ``data[start:end]``, as ``(data, start, end)``: what the passthrough counts its runs' lines with.
LineCounter = Callable[[bytes, int, int], int]


def line_counter() -> LineCounter:
    """The line count of the passthrough's runs: ``kvlog._native.count_lines`` where it runs, else ``bytes.count``.

    Asked when an input's run starts (``FileRun``), as ``chosen`` is, so that ``KVLOG_NATIVE`` set in-process
    is obeyed. A run is nearly all of a request log, and ``bytes.count`` looks at one byte at a time.
    """
    compiled = native.selected()
    return _python_count if compiled is None else compiled.count_lines


def _python_count(data: bytes, start: int, end: int) -> int:
    return data.count(b"\n", start, end)


def _python_starts(plans: tuple[_Plan, ...], data: bytes, begin: int, size: int) -> list[int]:
    starts: set[int] = set()
    for plan in plans:
        position = data.find(plan[0], begin, size)
        if position != -1:  # most probe bytes never occur in a block of request lines: no call for them
            _scan(data, size, plan, starts, position)
    return sorted(starts)


def _scan(
    data: bytes,
    size: int,
    plan: _Plan,
    starts: set[int],
    position: int,
) -> None:
    """Add to ``starts`` each line of ``data[:size]`` that a word of the ``plan``'s checks makes a candidate.

    ``position`` is the first place of the plan's byte in the block.

    A memchr probe while the byte is rare; after ``_PROBE_MISSES`` finds of it that start none of the
    words, the words themselves are searched for in the rest of the block (``_word_positions``). A line
    already found is skipped whole: in a dense log most lines a later scan meets are.
    """
    byte, first_offset, first_words, others, checks, figures_only, known_first = plan
    misses = 0
    figure_checked = -1  # the line whose figure was looked for in vain (the answer is the whole line's)
    while position != -1:
        if known_first:
            start = data.rfind(b"\n", 0, position) + 1
            if start in starts:
                end = data.find(b"\n", position, size)
                if end == -1:
                    return
                position = data.find(byte, end, size)
                continue
        at = position - first_offset
        if (at < 0 or not data.startswith(first_words, at, size)) and not (
            others
            and any(
                position >= offset and data.startswith(words, position - offset, size) for offset, words, _ in others
            )
        ):  # the byte starts none of the words here
            misses += 1
            if misses > _PROBE_MISSES:
                start = data.rfind(b"\n", 0, position) + 1
                for _, words, kind in checks:
                    _search_words(data, size, start, words, kind=kind, starts=starts)
                return
            position = data.find(byte, position + 1, size)
            continue
        start = data.rfind(b"\n", 0, position) + 1
        if start not in starts:  # else a line already found: the rest of it can add nothing
            decided = False
            for offset, words, kind in checks:  # every word the byte starts here, in order
                at = position - offset
                if at < 0 or not data.startswith(words, at, size):
                    continue
                if kind != _FIGURE:  # a keyword; or ``{``, the line naming ``"schema_version"`` or being no event
                    if kind == _KEYWORD or _holds(data, JSON_EVENT, start, size):
                        starts.add(start)
                    decided = True
                    break
                if start != figure_checked:
                    if _has_figure(data, start, size):
                        starts.add(start)
                        decided = True
                        break
                    figure_checked = start
            if not decided and not figures_only:  # the rest of the line may still hold a keyword
                position = data.find(byte, position + 1, size)
                continue
        end = data.find(b"\n", position, size)
        if end == -1:
            return
        position = data.find(byte, end, size)


def _search_words(
    data: bytes, size: int, position: int, words: tuple[bytes, ...], *, kind: int, starts: set[int]
) -> None:
    """``_scan`` for the rest of a block where its byte is common: each line holding one of ``words``, word by word."""
    for at in _word_positions(data, size, position, words):
        start = data.rfind(b"\n", 0, at) + 1
        if start not in starts and _makes_candidate(data, start, size, kind):
            starts.add(start)


def _makes_candidate(data: bytes, start: int, size: int, kind: int) -> bool:
    """Whether a word of ``kind`` found in the line that starts at ``start`` makes it a candidate."""
    if kind == _KEYWORD:
        return True
    if kind == _JSON:
        return _holds(data, JSON_EVENT, start, size)
    return _has_figure(data, start, size)


def _holds(data: bytes, word: bytes, start: int, size: int) -> bool:
    """Whether the line of ``data[:size]`` that starts at ``start`` holds ``word``."""
    end = data.find(b"\n", start, size)
    return data.find(word, start, size if end == -1 else end) != -1


def _has_figure(data: bytes, start: int, size: int) -> bool:
    """Whether the line of ``data[:size]`` at ``start`` carries a memory figure (as ``carries_memory_figure``)."""
    end = data.find(b"\n", start, size)
    end = size if end == -1 else end
    return _UNIT_BYTES.search(data, start, end) is not None or (
        _WORD_BYTES.search(data, start, end) is not None and _DIGIT_BYTES.search(data, start, end) is not None
    )


def _word_positions(data: bytes, size: int, position: int, words: tuple[bytes, ...]) -> Iterator[int]:
    """The first occurrence of any of ``words`` in each line of ``data[position:size]``."""
    while True:
        found = [p for p in (data.find(word, position, size) for word in words) if p != -1]
        if not found:
            return
        at = min(found)
        yield at
        end = data.find(b"\n", at, size)
        if end == -1:
            return
        position = end


#: one character of every keyword and of every figure's probe word (``tests/test_integrate_probe.py`` checks it)
MESSAGE_PROBE_CHARACTERS = "VMBmyGLCU_"


def might_be_read(message: str, *, usage: bool = False) -> bool:
    """Whether a logged message may be a line a rule reads: False costs a few character searches.

    The live handler asks this of every record a server logs, on the server's thread, so it must cost
    next to nothing; it is true of every message that ``segments`` would make a candidate (each probe
    word holds one of ``MESSAGE_PROBE_CHARACTERS``), and of a few more, which the engine then turns down.
    With ``usage``, of a usage line too (each word of ``_USAGE_PROBES`` holds ``usage``).
    """
    return (
        (usage and "usage" in message)
        or "V" in message
        or "M" in message
        or "B" in message
        or "m" in message
        or "y" in message
        or "G" in message
        or "L" in message
        or "C" in message
        or "U" in message
        or "_" in message
    )


def probe_words() -> tuple[str, ...]:
    """Every word a probe of text lines looks for (keywords, figure words): what ``might_be_read`` must not miss.

    (Not the ``{`` of a JSON event: a record is a server's text, and an event already typed is not read again.)
    """
    return tuple(word.decode() for _, _, words in (*_PROBES, *_FIGURE_PROBES) for word in words if word != b"{")


def carries_memory_figure(message: str) -> bool:
    """Whether a message states an amount of memory: a number with a unit of bytes, or a memory word and a number."""
    if _UNIT_TEXT.search(message) is not None:
        return True
    return _WORD_TEXT.search(message) is not None and _DIGIT_TEXT.search(message) is not None
