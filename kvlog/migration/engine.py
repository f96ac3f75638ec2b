"""The streaming migrator: one pass over a log, one output line per input line, bounded memory.

A log is mostly request lines that no rule reads. The reader finds candidate lines by the words
every wording contains (``kvlog.migration.candidates``, at memchr speed) and copies everything
between them through untouched, so the cost is in the handful of memory lines: each is split from
its prefix, rejected at once unless its message starts the way some wording starts, and otherwise
tried against the text generations, oldest first. A recognised line becomes an event of the newest
catalog version (text: through its generation's step, then up the chain; JSON events of an older
version: up the chain), goes through the per-rank context, and is written at the requested catalog
version after validation. Anything that cannot be migrated is
copied through as it was and, when it looks like a memory line, reported with the reason.

Events that wait for a later line (see ``kvlog.migration.context``) hold back the output behind them
for at most ``LOOKAHEAD_LINES`` lines or ``LOOKAHEAD_BYTES`` bytes: memory stays bounded on any file.
A live follower (``kvlog.follow``) drives the same ``FileRun`` with whole lines as they arrive and bounds
the look-ahead in time as well (``release_through``); the live handler (``kvlog.integrate``) with log
records' messages under the header each record says (``messages``), which no prefix is split from.
"""

from __future__ import annotations

import io
import re
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, Literal

import orjson

from kvlog.envelope import EVIDENCE, LAST_LINE, WORDING, InferenceRule, Wrapper, ordered
from kvlog.io import jsonline
from kvlog.io.errors import InputError, LineError
from kvlog.io.inputs import OverlongLine
from kvlog.migration.candidates import (
    JSON_EVENT,
    MAX_LINE_BYTES,
    Readable,
    carries_memory_figure,
    line_counter,
    segments,
)
from kvlog.migration.context import Context, Held
from kvlog.migration.dating import DateContext, complete, follows, printed, release, undated
from kvlog.migration.encoders import Encoder, Legacy, Written, jsonl, text
from kvlog.migration.errors import MigrationError, PlanError, UnknownCatalogVersion
from kvlog.migration.grammar import MARKED, Generation, Recognised, Window
from kvlog.migration.legacy import LegacyRenderer
from kvlog.migration.ops import Op, mark_inferred, provenance, source_format
from kvlog.migration.records import Downstream, Record
from kvlog.migration.report import MigrationReport
from kvlog.migration.sampling import USAGE_EVENT, USAGE_MODES, UsageMode, UsageSampler
from kvlog.migration.steps import Chain
from kvlog.migration.transit import CUT_MIN_CHARACTERS, Open, cut_reason, cut_start_reason, joined, unglued
from kvlog.schema.catalog import catalog_version
from kvlog.schema.event_validator import EventValidator
from kvlog.text.prefix import SERVERS, LinePrefix, ServerPrefix
from kvlog.text.printable import log_text, name_text
from kvlog.text.tracebacks import traceback_line
from kvlog.text.transfers import transfer_bar
from kvlog.text.units import INFERRED_FIELDS_READ
from kvlog.text.wrappers import Peeled, peel

OutputFormat = Literal["jsonl", "text", "legacy"]
DeadLetter = Callable[[dict[str, Any]], None]

LOOKAHEAD_LINES = 100_000
LOOKAHEAD_BYTES = 64 << 20
#: how much of a line too long to be read its dead letter quotes (its length says how much more there was)
OVERLONG_TEXT_BYTES = 1 << 10
#: messages a ``Family`` remembers the reading of: a fleet log's distinct memory messages fit many times over
RECOGNISED_MESSAGES = 4096
#: words that make a line a memory line even without a figure (a broken or truncated one)
_MEMORY_WORDING = re.compile(r"is allocated|VA upper bound|reserved(?:_va)?=|mem usage|avail mem")


#: what a recognised line's event at its newest version depends on besides its message, when it can be
#: reused (``FileRun._event``): whether its header says a time and whether exactly, its level, pid, and
#: whether it has ranks
Shape = tuple[str, bool, bool, str, int | None, bool]
#: the envelope values that differ between lines of one ``Shape``: a reused event is only valid when no
#: operation of its rule or steps reads, writes or drops them
_PER_LINE = frozenset({"timestamp", "ranks", "migrated"})
#: how ``Migrator.written`` orders an event's keys: None (already in order), or the event's keys in the
#: written order and its provenance's (None: already in order)
_Plan = tuple[tuple[str, ...], tuple[str, ...] | None] | None
_UNPLANNED: Any = object()


@dataclass(frozen=True)
class Family:
    """One server's lines: its prefix, and every era's wordings (oldest first, then its known lines)."""

    server: str
    prefix: ServerPrefix
    generations: tuple[Generation, ...]
    #: every way a message some wording reads can begin: most candidate lines are rejected by this alone
    starts: tuple[str, ...]
    #: what each message read lately was read as: see ``recognise``
    read: dict[str, Recognised | None] = field(default_factory=dict, repr=False, compare=False)
    #: the newest-version events of the messages in ``read``, by what else of a line they depend on: see ``Shape``
    shapes: dict[Shape, tuple[dict[str, Any], tuple[str, ...]]] = field(default_factory=dict, repr=False, compare=False)
    #: the shapes one line printed so far: the next line of one is the first whose event is kept (``_event``)
    seen: set[Shape] = field(default_factory=set, repr=False, compare=False)

    @classmethod
    def of(cls, chain: Chain, server: str, *, usage: bool = False) -> Family:
        """The server's wordings; its usage lines' only with ``usage``: without, no line is tried against them."""
        known = chain.known.get(server)
        eras = [generation for generation in chain.generations(server) if usage or not generation.reads_usage_only]
        generations = (*eras, *((known,) if known is not None else ()))
        starts = tuple(sorted({start for generation in generations for start in generation.starts}))
        return cls(server, SERVERS[server], generations, starts)

    def recognise(self, message: str) -> Recognised | None:
        """What the first wording that reads ``message`` reads (whole first, then glued to another line).

        A fleet's log prints the same messages on every rank of every run, under other prefixes: the
        answer depends on the message alone (the wordings do not change), so it is remembered, for at
        most ``RECOGNISED_MESSAGES`` messages at a time (all forgotten at once when full, which keeps
        memory bounded on a log whose messages never repeat).
        """
        if message in self.read:
            return self.read[message]
        found = self._first(message)
        marked = INFERRED_FIELDS_READ.search(message) if found is None else None
        if marked is not None:  # kvlog's --format text: the line names the values it says that were inferred
            found = self._first(message[: marked.start()])
            if found is not None:
                found = found.marked(marked.group(1).split(", "))
        if len(self.read) >= RECOGNISED_MESSAGES:
            self.read.clear()
            self.shapes.clear()
            self.seen.clear()
        self.read[message] = found
        return found

    def cut_starts(self, message: str) -> list[tuple[str, str]]:
        """The wordings ``message`` is the rest of, its start cut, with what was cut, for a line no wording read."""
        return [(rule.template.text, lost) for each in self.generations for rule, lost in each.cut_starts(message)]

    def cut(self, message: str) -> str | None:
        """The wording ``message`` is a beginning of, ended early (None: none), for a line no wording read."""
        for generation in self.generations:
            rule = generation.cut(message)
            if rule is not None:
                return rule.template.text
        return None

    def _first(self, message: str) -> Recognised | None:
        for glued_after in (False, True):
            for generation in self.generations:
                found = generation.recognise(message, glued=glued_after)
                if found is not None:
                    return found
        return None


def _header(family: Family, line: str, said: LinePrefix | None) -> LinePrefix:
    """What ``line``'s header says: the server's prefix split off it, or the header ``said`` (the line all message).

    The one place the two ways in part: everything the engine does with a line's header after this is
    the same for a printed line and a log record's (``FileRun.messages``).
    """
    return family.prefix.split(line) if said is None else said._replace(message=line)


#: what ``FileRun._recognise`` found: the reading, the header, the text glued before the line, its wrappers
Found = tuple[Recognised, LinePrefix, str, Peeled | None]


def _wrapper_time(event: dict[str, Any], wrapped: Peeled) -> None:
    """The event's time from its wrapper's timestamp, where the server's prefix printed no date or year.

    Docker, Kubernetes and CI runners stamp each line with the UTC instant they took it, a year and a
    zone included: a truer time than a naive clock without a year, and it is said so.
    """
    event["timestamp"] = wrapped.instant
    kind = next(kind for kind in reversed(wrapped.kinds) if kind in {Wrapper.TIMESTAMP, Wrapper.SYSLOG})
    evidence = f"the server's prefix prints no date or year; the UTC instant its {kind} wrapper printed"
    mark_inferred(event, "timestamp", InferenceRule.WRAPPER_TIMESTAMP, evidence)


def _file_modified(file: str | None) -> str | None:
    """When a file last changed (UTC, ``YYYY-mm-ddTHH:MM:SS``): it dates a log whose lines print no year."""
    if file is None:
        return None
    try:
        return datetime.fromtimestamp(Path(file).stat().st_mtime, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S")
    except (OSError, ValueError, OverflowError):
        return None


@dataclass(frozen=True)
class MigrateOptions:
    """How to migrate: the output format and catalog version, and what to keep."""

    output_format: OutputFormat = "jsonl"
    to_catalog: int | None = None
    only_events: bool = False
    keep_original: bool = False
    legacy_generation: str | None = None
    #: regular expressions of memory-like lines the user accepts as unparsed: counted apart, not dead letters
    allowed_unparsed: tuple[str, ...] = ()
    #: the server whose lines the inputs are (``sglang``, ``vllm``); None: detected per file
    source: str | None = None
    #: the year of the lines that print none (``--year``); None: worked out (``kvlog.migration.dating``)
    year: int | None = None
    #: which periodic usage lines become ``kv_pool.usage`` events (``kvlog.migration.sampling``)
    usage: UsageMode = "none"
    #: the reference path (``--validate-all``): every event built from its line through its steps and
    #: validated against its schema. By default an event built from a text rule is valid by construction
    #: once one of its rule and keys was (``FileRun._record``; ``tests/test_migration_construction.py``
    #: proves it for every rule and catalog version), and a message seen before reuses its event
    #: (``FileRun._event``): the output is the same
    validate_all: bool = False

    def __post_init__(self) -> None:
        """An option that chooses what one format writes needs that format: refused here, for every caller."""
        if self.to_catalog is not None and self.output_format != "jsonl":
            raise PlanError("{to_catalog} chooses the catalog version of JSON events: it needs {output_format} jsonl")
        if self.legacy_generation is not None and self.output_format != "legacy":
            raise PlanError("{legacy_generation} chooses an old wording: it needs {output_format} legacy")
        if self.usage not in USAGE_MODES:
            raise PlanError(f"{{usage}} is {', '.join(USAGE_MODES)}, not {self.usage!r}")


class Migrator:
    """Everything that does not change from one input to the next: the chain, its parsers, the validator."""

    def __init__(self, chain: Chain, options: MigrateOptions, validator: EventValidator | None = None) -> None:
        self.chain = chain
        self.catalog = chain.catalog
        top = self.catalog.newest_release()
        if options.to_catalog is not None and not 1 <= options.to_catalog <= top:
            raise UnknownCatalogVersion(options.to_catalog, top)  # the one check of to_catalog's range
        self.options = options
        self.validator = validator or EventValidator(self.catalog)
        servers = chain.servers()
        if options.source is not None and options.source not in servers:
            raise ValueError(f"no migrations read {options.source!r} lines (kvlog reads {', '.join(servers)})")
        self.families = [
            Family.of(chain, server, usage=options.usage != "none")
            for server in servers
            if options.source is None or server == options.source
        ]
        self.to_catalog = options.to_catalog or top
        self.legacy = LegacyRenderer(chain, options.legacy_generation) if options.output_format == "legacy" else None
        patterns = options.allowed_unparsed
        self.allowed_unparsed = re.compile("|".join(f"(?:{p})" for p in patterns)) if patterns else None
        self._targets: dict[str, int | None] = {}
        #: the written order of each key tuple of an event and its provenance: see ``written``
        self._plans: dict[tuple[tuple[str, ...], tuple[str, ...] | None], _Plan] = {}
        #: (the id of a text rule, then an event's keys and its provenance's) of events found valid: ``proven``
        self._proven: set[tuple[int, tuple[str, ...], tuple[str, ...] | None]] = set()

    def written(
        self, event: dict[str, Any], keys: tuple[tuple[str, ...], tuple[str, ...] | None] | None = None
    ) -> dict[str, Any]:
        """``ordered(event)``, or ``event`` itself where its keys are already in that order.

        The written order depends on the keys alone, in their order (the event's and its provenance's;
        ``ordered`` keeps the values), so it is planned once per key tuple: None where they are in order
        already (most events are built so: no copy), else the keys of the event and of its provenance
        in the written order, which one comprehension each follows. ``keys``: those of ``event`` (``keys``),
        where the caller has them already.
        """
        migrated = event.get("migrated")
        if keys is None:
            keys = self.keys(event)
        plan = self._plans.get(keys, _UNPLANNED)
        if plan is _UNPLANNED:
            plan = self._plan(event, keys)
        if plan is None:
            return event
        top, inner = plan
        result = {key: event[key] for key in top}
        if inner is not None:
            assert isinstance(migrated, dict), "a provenance is planned only where there is one"
            result["migrated"] = {key: migrated[key] for key in inner}
        return result

    def _plan(self, event: dict[str, Any], keys: tuple[tuple[str, ...], tuple[str, ...] | None]) -> _Plan:
        """How ``written`` orders the keys of ``event`` (and of every event with the same ``keys``)."""
        result = ordered(event)
        migrated = result.get("migrated")
        inner = tuple(migrated) if isinstance(migrated, dict) and tuple(migrated) != keys[1] else None
        plan = None if tuple(result) == keys[0] and inner is None else (tuple(result), inner)
        if len(self._plans) >= RECOGNISED_MESSAGES:
            self._plans.clear()
        self._plans[keys] = plan
        return plan

    @staticmethod
    def keys(event: dict[str, Any]) -> tuple[tuple[str, ...], tuple[str, ...] | None]:
        """The keys of ``event`` and of its provenance (None: it has none), in their order.

        What ``written`` plans by and ``proven`` remembers: taken once per event, for both.
        """
        migrated = event.get("migrated")
        return tuple(event), tuple(migrated) if isinstance(migrated, dict) else None

    def proven(self, rule: object, keys: tuple[tuple[str, ...], tuple[str, ...] | None]) -> bool:
        """Whether an event ``rule`` built with these ``keys`` (the event's and its provenance's) was valid before."""
        return (id(rule), *keys) in self._proven

    def prove(self, rule: object, keys: tuple[tuple[str, ...], tuple[str, ...] | None]) -> None:
        """The event ``rule`` built with ``keys`` is valid: the next of its rule and keys is (``FileRun._record``)."""
        if len(self._proven) >= RECOGNISED_MESSAGES:
            self._proven.clear()
        self._proven.add((id(rule), *keys))

    def target(self, event: str) -> int | None:
        """The version of ``event`` that is written (None: it is not in the catalog version asked for)."""
        if event not in self._targets:
            self._targets[event] = self.catalog.at_catalog_version(event, self.to_catalog)
        return self._targets[event]

    def encoder(self) -> Encoder:
        """The encoder of the output format asked for."""
        if self.legacy is not None:
            return Legacy(self.legacy)
        return text if self.options.output_format == "text" else jsonl

    def migrate(self, name: str, stream: Readable, out: IO[bytes], dead: DeadLetter | None = None) -> MigrationReport:
        """Migrate one input (``name`` as given, ``-`` for standard input) from ``stream`` to ``out``.

        Take, encode, write: the run reads, the encoder renders each record, ``Written`` writes.
        """
        report = MigrationReport(files=1)
        written = Written(self.encoder(), out, report, only_events=self.options.only_events)
        return self.take(name, stream, written, dead, report)

    def take(
        self,
        name: str,
        stream: Readable,
        downstream: Downstream,
        dead: DeadLetter | None = None,
        report: MigrationReport | None = None,
    ) -> MigrationReport:
        """Read one input through the transform to ``downstream``: for a consumer that takes the records itself.

        ``plot`` and ``summarize`` take the events so, in the process that runs the engine: nothing is
        encoded for them to decode again.
        """
        report = MigrationReport(files=1) if report is None else report
        run = FileRun(self, None if name == "-" else name, report, dead, downstream)
        try:
            run.take(segments(stream, usage=self.options.usage != "none"))
        except InputError as exc:
            raise InputError(f"{exc} (after line {run.number})") from None
        run.finish()
        return report


class FileRun:
    """The state of one input: line numbers, context, and the output held back for look-ahead.

    The transform of the pipeline: what it reads goes to ``downstream`` in input order, the lines no
    rule reads as bytes and each event as a ``Record``. The downstream decides what to write (``migrate``
    encodes and writes, a follower also what a restart already wrote, and what its gauges learn).
    """

    def __init__(
        self,
        migrator: Migrator,
        file: str | None,
        report: MigrationReport,
        dead: DeadLetter | None,
        downstream: Downstream,
    ):
        self.migrator = migrator
        #: the input's name as events and dead letters quote it (``kvlog.text.printable.name_text``)
        self.file = None if file is None else name_text(file)
        self.downstream = downstream
        self._passthrough = downstream.passthrough
        self._newlines = line_counter()
        self.report = report
        self.dead = dead
        self.context = Context()
        #: the server this input's lines were recognised as (tried first from then on); None until one was
        self.family: Family | None = None
        self.dates = DateContext(file_modified=_file_modified(file), year=migrator.options.year)
        #: events of lines without a time read before any line that has one: dated by the next such line
        self._undated: list[Held] = []
        self.number = 0
        self.held: deque[tuple[bytes | Held, int, int]] = deque()
        self.held_lines = 0
        self.held_bytes = 0
        self.open_line = False  # the last passthrough segment ended inside a line
        #: while ``messages`` reads: the header of each of its lines, and the number of the first
        self._said: tuple[list[LinePrefix], int] | None = None
        #: a line that ended inside a known wording, until the next line completes it or not (``_continued``)
        self._open: Open | None = None
        self._usage = migrator.options.usage
        #: the window of releases of the last wording read (``dating.printed``): a repeated one tells nothing new
        self._window: Window | None = None
        self._sampler = UsageSampler()

    def take(self, pieces: Iterable[tuple[bool | None, bytes, int, int]]) -> None:
        """Migrate what ``segments`` or ``split`` found: candidate lines one by one, the rest in runs."""
        for is_candidate, data, start, end in pieces:
            if is_candidate:
                self.line(data[start:end])
            elif is_candidate is None:  # the line just passed through in pieces: too long to be read
                self.overlong(data, end)
            else:
                self.passthrough(data, start, end)

    def feed(self, lines: bytes) -> None:
        """Whole lines as they arrive (each ending in a newline but perhaps the last): the follower's way in.

        Read as a stream is, block by block (``segments``): the probes' cost per byte grows with the
        block where request lines are dense, so a follower catching up on a large file must not hand
        them a megabyte at once. An ``OverlongLine`` is a line the tailer read past: one line, reported.
        """
        if isinstance(lines, OverlongLine):
            self._close()
            self.passthrough(b"\n", 0, 1)
            self.overlong(lines.head, lines.length)
            return
        self.take(segments(io.BytesIO(lines), usage=self._usage != "none"))

    def messages(self, said: Sequence[LinePrefix]) -> None:
        r"""Messages whose header is known, each line of one a line of its own: the live handler's way in.

        A log record says its time, pid and ranks itself (``kvlog.integrate``): each ``LinePrefix`` is
        one record's, its ``message`` the record's. Its lines are read as a log's lines are (the same
        probes, look-ahead and context, through ``take``), but nothing in them is split off as a
        prefix: text that looks like one in a message is message text, and every line has its
        record's header, a progress bar's ``\r`` in it or not. Lone surrogates (``"\ud800"``), which UTF-8
        cannot encode, are read escaped, as the six characters ``\ud800``.
        """
        if not said:
            return
        headers = [header for header in said for _ in range(header.message.count("\n") + 1)]
        data = "\n".join([header.message for header in said]).encode("utf-8", "backslashreplace") + b"\n"
        self._said = (headers, self.number + 1)
        try:
            self.take(segments(io.BytesIO(data), usage=self._usage != "none"))
        finally:
            self._said = None

    def overlong(self, head: bytes, length: int) -> None:
        """The line just counted was ``length`` bytes (``head`` its first), too long to be read.

        No memory line is that long, but nobody read this one to know it is not: it is reported, dead
        lettered with its first bytes and its length, and fails ``--strict``, whatever its words (as
        ``kvlog validate`` reports a line too long for an event). It is copied, never parsed.
        """
        self._close()
        self.report.overlong_lines += 1
        reason = f"a line of {length} bytes, over the {MAX_LINE_BYTES >> 10} KiB a memory line may take: not read"
        text = log_text(head[:OVERLONG_TEXT_BYTES])
        self.report.unparsed(self.file, self.number, reason, text)
        if self.dead is not None:
            self.dead({"file": self.file, "line": self.number, "reason": reason, "text": text, "length": length})

    @property
    def written_lines(self) -> int:
        """How many input lines have all their output written: nothing before them is held back."""
        return self.number - self.held_lines - (self._open is not None)

    def release_through(self, line: int, bound: str) -> None:
        """Give up waiting for evidence for every event read on ``line`` or before (the look-ahead ``bound``)."""
        if self._open is not None and self._open.line <= line:
            self._close()
        for item, _, _ in self.held:
            if isinstance(item, Held) and not item.resolved and item.line <= line:
                self.context.give_up(item, bound)
        self._undated_give_up(line)
        self._flush()

    def passthrough(self, data: bytes, start: int, end: int) -> None:
        """Lines no rule reads, ``data[start:end]``: counted, and copied without an intermediate copy.

        A segment may end inside a line (a line over ``MAX_LINE_BYTES`` streams through in pieces, and
        a log may end without a newline): a line is counted once, in the segment where it starts.
        """
        if self._open is not None:  # the first line may complete the line before it
            first = data.find(b"\n", start, end) + 1
            if first and not self.open_line and self._continued(bytes(data[start:first])):
                start = first
                if start == end:
                    return
            self._close()
        ends_open = data[end - 1] != 0x0A
        lines = self._newlines(data, start, end) + ends_open - self.open_line
        self.open_line = ends_open
        self.number += lines
        if self.migrator.options.only_events:
            self.report.changed_lines += lines
            if self.held:
                self._emit(b"", lines)  # written as nothing, but counted against the look-ahead
            return
        if not self.held:
            self._passthrough(memoryview(data)[start:end])
        else:
            self._emit(data[start:end], lines)

    def line(self, raw: bytes) -> None:
        self._line(raw)
        if self.context.corrections:  # rare: a post-capture line after the look-ahead gave up on a pool
            corrections = self.context.take_corrections()
            if self.migrator.options.only_events and self.migrator.options.output_format == "jsonl":
                self._correct(corrections)

    def _line(self, raw: bytes) -> None:
        if self._open is not None and self._continued(raw):
            return
        self.number += 1
        body = raw[:-1] if raw.endswith(b"\n") else raw
        said = None if self._said is None else self._said[0][self.number - self._said[1]]
        if len(body) > MAX_LINE_BYTES:
            held = None  # no sglang memory line or kvlog event is this long: copied, never parsed
            self.overlong(body, len(raw))
        elif said is None and body.lstrip()[:1] == b"{":  # a record's message is a server's text, never an event
            held = self._json(raw, body)
        else:
            held = self._text(raw, body, said)
        if held is None:
            if self._open is None or self._open.line != self.number:  # else it waits for the next line
                self._copy(raw, 1)
            return
        assert held.source_version is not None, "every event read from a line has the version it said"
        self.context.observe(held, held.source_version)
        self._emit(held, 1)

    def _copy(self, raw: bytes, lines: int) -> None:
        """Input ``lines`` that make no event, copied through as read (dropped, and counted, with ``only_events``)."""
        if not self.migrator.options.only_events:
            self._emit(raw, lines)
            return
        self.report.changed_lines += lines
        if self.held:
            self._emit(b"", lines)

    def _continued(self, raw: bytes) -> bool:
        """Whether ``raw``, the line after an open one, completes it: if so, the two are read as one record.

        It does when it has no prefix of its own, reads as nothing alone, and the two lines read as a known
        wording once joined as a wrap splits them (``transit.joined``). The event is the first line's
        (its number, its time) and names the second in ``migrated.inferred.last_line``; its bytes are both lines'.
        Otherwise the open line is closed (dead-lettered as cut) by the caller's ``_close``.
        """
        opened = self._open
        assert opened is not None, "only called on an open line"
        body = raw[:-1] if raw.endswith(b"\n") else raw
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            self._close()
            return False
        if self._unprefixed(text) != text or self._recognise(text) is not None:
            self._close()  # a record of its own (a wrap's indentation is no wrapper here: it is the join's space)
            return False
        whole = next((both for both in joined(opened.text, text) if self._recognise(both) is not None), None)
        if whole is None:
            self._close()
            return False
        self._open = None
        held = self._text(opened.raw + raw, whole.encode(), None)  # read at the open line's number
        self.number += 1
        if held is None:  # a companion line, split
            self._copy(opened.raw + raw, 2)
            return True
        rule = InferenceRule.CONTINUATION_LINE
        mark_inferred(held.event, LAST_LINE, rule, EVIDENCE[rule], self.number)
        assert held.source_version is not None, "every event read from a line has the version it said"
        self.context.observe(held, held.source_version)
        self._emit(held, 2)
        return True

    def _close(self) -> None:
        """The open line, if any, completed by no line: dead-lettered as a cut record, and copied through."""
        opened, self._open = self._open, None
        if opened is None:
            return
        if self.migrator.allowed_unparsed is not None and self.migrator.allowed_unparsed.search(opened.text):
            self.report.allowed_unparsed_lines += 1  # as any line no wording reads: allowed lines are counted apart
        else:
            reason = cut_reason(opened)
            self.report.unparsed(self.file, opened.line, reason, opened.text)
            if self.dead is not None:
                self.dead({"file": self.file, "line": opened.line, "reason": reason, "text": opened.text})
        self._copy(opened.raw, 1)

    def finish(self) -> None:
        self._close()
        self.context.finish()
        self._undated_give_up(self.number)
        self._flush()
        self.report.lines = self.number
        self.report.servers[self.family.server if self.family else "none"] += 1

    # -- reading --------------------------------------------------------------------------------

    def _text(self, raw: bytes, body: bytes, said: LinePrefix | None = None) -> Held | None:
        """A text line's event (None: none): its header split off it, or ``said`` (a record's, ``messages``)."""
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError as exc:
            # judged on the text a reader sees (an escape's hex digits are no figure), quoted with its bytes
            read = body.decode("utf-8", "replace")
            self._unparsed(log_text(body), f"not valid UTF-8 ({exc.reason} at byte {exc.start})", read_as=read)
            return None
        found = self._recognise(text, said)
        if found is None:
            wording = self._cut(text) if said is None and self._open is None else None
            if wording is not None:  # it may go on on the next line: ``_continued``
                self._open = Open(raw, self.number, text, wording)
                return None
            started = self._cut_start(text) if said is None else None
            if isinstance(started, str):
                self._dead(text, cut_start_reason(started))
                return None
            if started is not None:  # one wording, its first words cut at a word's start: read with them put back
                found = self._recognise(started[0])
                if found is not None:
                    return self._read_line(raw, text, found, said, started[1])
            servers = self.family.server if self.family else " or ".join(f.server for f in self.migrator.families)
            self._unparsed(text, f"looks like a memory line but matches no known {servers} wording", said=said)
            return None
        return self._read_line(raw, text, found, said)

    def _read_line(
        self, raw: bytes, text: str, found: Found, said: LinePrefix | None, restored: str | None = None
    ) -> Held | None:
        """The event of a line read as ``found``.

        ``said``: a record's own header (``_text``'s); ``restored``: the words its start lost, put back to read it.
        """
        recognised, prefix, before, wrapped = found
        window = recognised.rule.window
        if window is not None and window is not self._window:  # its releases bound the year of lines that print none
            self._window = window
            self.dates.printed = printed(self.dates.printed, recognised.generation.server, window, self.number)
        if recognised.rule.template.event == USAGE_EVENT and not self._keeps_usage(recognised, prefix):
            return None  # a usage line not asked for: passed through as it was, as any request line
        timestamp, ranks, after = prefix.timestamp, prefix.ranks, recognised.parsed.rest
        if timestamp is not None:
            self.dates.dated(timestamp, self.number)
        if recognised.rule.role is not None:
            self._companion(recognised.rule.role, recognised, ranks, timestamp)
            return None
        event, upgraded = self._event(recognised, prefix)
        # a line that printed its whole date, unwrapped, with no undated event before it: nothing to date
        dated = wrapped is None and timestamp is not None and prefix.partial is None and not self._undated
        waits_for_time = False if dated else self._date(event, prefix, wrapped)
        migrated = event["migrated"]
        migrated["file"], migrated["line"] = self.file, self.number
        if wrapped is not None:  # peeled before the wording read the line: the first steps
            migrated["steps"][0:0] = [kind.step for kind in wrapped.kinds]
        if self.migrator.options.keep_original or before or after or restored is not None:
            migrated["original"] = text
        if restored is not None:
            evidence = f"the line's start was cut: {restored!r} put back, the one known wording that reads the rest"
            mark_inferred(event, WORDING, InferenceRule.CUT_START, evidence)
        if not upgraded:
            held = self._upgrade(event, raw, recognised.generation.id)
        else:
            held = Held(
                event,
                self.number,
                revisable=True,
                raw=raw,
                source=recognised.generation.id,
                source_version=recognised.rule.version,
            )
        if held is not None:
            held.built = recognised.rule if said is None else None  # valid by construction: see ``_record``
            # the wrappers' text, as it was, around the line's own glue: --format text writes them back
            held.glue = (before, after) if wrapped is None else (wrapped.before + before, after + wrapped.after)
            if waits_for_time:  # no line before it told its time: the next one that does will
                held.waits_for_time = True
                self._undated.append(held)
        return held

    def _companion(self, role: str, recognised: Recognised, ranks: dict[str, int], timestamp: str | None) -> None:
        """A line that makes no event of its own but tells the context something: counted, and told."""
        self.report.companions[role] += 1
        if role == "release":
            version = recognised.parsed.fields["version"]
            self.dates.release = release(recognised.generation.server, version, self.number) or self.dates.release
        elif role == "run_start":
            self.context.start_all_runs()
        elif role == "kv_dtype":
            self.context.kv_dtype(tuple(sorted(ranks.items())), recognised.parsed.fields["dtype"], self.number)
        elif role == "post_capture":
            self.context.post_capture_note(tuple(sorted(ranks.items())), self.number, timestamp)
        elif role == "start_up_end":
            self.context.start_up_end(self.number)

    def _date(self, event: dict[str, Any], prefix: LinePrefix, wrapped: Peeled | None) -> bool:
        """Give ``event`` the time its line did not print in full; True when it must wait for a later line's."""
        waits_for_time = False
        if wrapped is not None and wrapped.instant is not None and prefix.timestamp is None:
            _wrapper_time(event, wrapped)
            self.dates.last_stamped = (event["timestamp"], self.number, False)  # an instant: bare lines may take it
        elif prefix.partial is not None:
            complete(event, prefix.partial, self.dates)
            self.dates.last_stamped = (event["timestamp"], self.number, True)
        elif prefix.timestamp is None:
            waits_for_time = not undated(event, self.dates)
        if self._undated and not waits_for_time:
            self._date_undated(event["timestamp"])
        return waits_for_time

    def _date_undated(self, timestamp: str) -> None:
        """The events of lines without a time that no earlier line dated: this line's time is the nearest after."""
        for held in self._undated:
            follows(held.event, timestamp, self.number)
            held.waits_for_time = False
        self._undated.clear()
        self._flush()

    def _undated_give_up(self, through: int) -> None:
        """The events without a time read on line ``through`` or before keep the epoch: no later line told it soon."""
        for held in [held for held in self._undated if held.line <= through]:
            held.waits_for_time = False
            self._undated.remove(held)
            evidence = "the line has no timestamp, nor any line read near it: 1970-01-01 stands for it"
            mark_inferred(held.event, "timestamp", InferenceRule.NO_TIMESTAMP, evidence)

    def _keeps_usage(self, recognised: Recognised, prefix: LinePrefix) -> bool:
        """Whether a usage line becomes an event (``--usage``): a series is one rank's pool on one device."""
        if self._usage != "sampled":
            return self._usage == "all"
        fields = recognised.parsed.fields
        series = (prefix.pid, tuple(sorted(prefix.ranks.items())), fields.get("engine"), fields.get("device"))
        return self._sampler.keep(series, fields)

    def _event(self, recognised: Recognised, prefix: LinePrefix) -> tuple[dict[str, Any], bool]:
        """A recognised line's event, and whether it is already at its newest version.

        The event of a message two lines of the same ``Shape`` already printed is a copy of the second
        line's at its newest version, given this line's time and ranks (kept from the second: keeping
        costs the steps once more, which a message printed once, as most of a held-out log's, never
        repays). It is the event the steps would build: nothing else of the line reaches it, and
        nothing the steps do depends on the time
        or ranks, or on what the caller adds (the line's file, number and text, the time's provenance
        note, which keeps its place first in ``inferred``), when no operation of the rule or its steps
        names them or the provenance and none is a hook, whose code may read anything. Otherwise (and
        for the first such line) the caller takes the event up its steps, as every line went before.
        """
        family, rule = self.family, recognised.rule
        assert family is not None, "_recognise sets the family"
        if self.migrator.options.validate_all:  # the reference path: every event built through its steps
            return recognised.event(prefix), False
        level = prefix.level or rule.level
        shape = (prefix.message, prefix.timestamp is None, prefix.exact, level, prefix.pid, bool(prefix.ranks))
        built = family.shapes.get(shape)
        if built is not None:
            event, nested = built
            event = dict(event)  # a deep copy: the top level's other values are immutable
            for key in nested:
                event[key] = jsonline.copy(event[key])
            event["timestamp"] = prefix.timestamp or event["timestamp"]
            if prefix.ranks:
                event["ranks"] = dict(prefix.ranks)
            return event, True
        event = recognised.event(prefix)
        if shape in family.seen:  # printed twice: likely again, so kept (a message printed once never is)
            self._keep_shape(family, shape, event, rule.ops)
        else:
            if len(family.seen) >= RECOGNISED_MESSAGES:
                family.seen.clear()  # bounded as ``shapes``: a log whose messages never repeat keeps none
            family.seen.add(shape)
        return event, False

    def _keep_shape(self, family: Family, shape: Shape, event: dict[str, Any], rule_ops: tuple[Op, ...]) -> None:
        """Remember ``event`` at its newest version for the lines of ``shape``, where that is valid (see ``_event``)."""
        if MARKED in event:  # its marks are applied at the newest version, by ``_upgrade``: it is built each time
            return
        name, version = str(event["event"]), int(event["schema_version"])
        try:
            steps = self.migrator.chain.path(name, version, self.migrator.catalog.latest(name))
        except MigrationError:
            return  # the caller's own steps say why
        ops = (*rule_ops, *(op for step in steps for op in step.ops))
        if any(op.kind == "hook" or not _PER_LINE.isdisjoint((*op.reads, *op.writes, *op.drops)) for op in ops):
            return
        kept = event
        try:
            for step in steps:
                kept = step.apply(kept)
        except MigrationError:
            return
        # in the written order, the line's file and number in their places (the caller sets them)
        kept = ordered({**kept, "migrated": {**kept["migrated"], "file": None, "line": 0}})
        # ranks are the line's own (the shape says it has some whenever the event does)
        nested = tuple(key for key, value in kept.items() if isinstance(value, dict | list) and key != "ranks")
        if len(family.shapes) >= RECOGNISED_MESSAGES:
            family.shapes.clear()  # a message's shapes may be many: each pid a vLLM prefix names is one
        family.shapes[shape] = (jsonline.copy(kept), nested)

    def _message(self, text: str, said: LinePrefix | None) -> str:
        """A line without its prefix: the first server's prefix that reads one (the line itself if none does).

        A line whose header was ``said`` has none: it is all message.
        """
        if said is not None:
            return text
        wrapped = peel(text)
        return self._unprefixed(text if wrapped is None else wrapped.line)

    def _unprefixed(self, text: str) -> str:
        """``text`` without the first server's prefix that reads one (``text`` itself if none does)."""
        for family in self.migrator.families:
            prefix = family.prefix.split(text)
            if prefix.message != text.rstrip(" \t\r\n"):
                return prefix.message
        return text

    def _recognise(self, text: str, said: LinePrefix | None = None) -> Found | None:
        """Try the line as printed, then what follows a progress bar glued before it (``transit.unglued``).

        A printed line is first taken out of its wrappers (``kvlog.text.wrappers``), which then go
        with what was read; a record's message (``said``) has none.
        Returns what was read, the header (``_header``), the text glued before the line (kept, never
        dropped), and the wrappers peeled.
        """
        stripped = text.rstrip(" \t\r")
        family = self.family
        if family is not None and "\r" not in stripped and "<" not in stripped:  # no progress bar drawn before it
            # what is tried first below, without the wrappers or the list of attempts: the line as printed,
            # read as the server this input's lines were read as (nearly every line of a log), whole. A
            # wrapper before a line leaves no prefix to read; one after it (Ray's count, a colour's reset)
            # leaves text after the wording, which goes to the wrappers below
            prefix = _header(family, stripped, said)
            if prefix.message.startswith(family.starts):
                recognised = family.recognise(prefix.message)
                if recognised is not None and not recognised.parsed.rest:
                    return recognised, prefix, "", None
        wrapped = None if said is not None else peel(stripped)
        if wrapped is not None:
            stripped = wrapped.line.rstrip(" \t\r")
        found = self._read(stripped, said)
        return None if found is None else (*found, wrapped)

    def _read(self, stripped: str, said: LinePrefix | None) -> tuple[Recognised, LinePrefix, str] | None:
        """``_recognise`` on a line out of its wrappers."""
        attempts = [(stripped, "")]
        glued = unglued(stripped)  # a progress bar drawn before the line (``kvlog.migration.transit``)
        if glued is not None:  # the record after it first: a wording that opens with a label would take the bar
            attempts.insert(0, (glued[1], glued[0]))
        families = self.migrator.families
        if self.family is not None and self.family is not families[0]:
            families = [self.family, *(f for f in families if f is not self.family)]
        for family in families:
            for candidate, before in attempts:
                prefix = _header(family, candidate, said)
                if not prefix.message.startswith(family.starts):
                    continue  # most candidate lines (request logs that mention the KV cache) end here
                recognised = family.recognise(prefix.message)
                if recognised is not None:
                    self.family = family
                    return recognised, prefix, before
        return None

    def _cut_start(self, text: str) -> str | tuple[str, str] | None:
        """What a line no wording read is, if its start was cut (None: it is no such line).

        The line with what was lost put back, and that, where one wording reads it so and the cut took
        no letter or digit (``# `` of ``# GPU blocks``: nothing that names a device or a pool, nor part
        of a figure); else the wording it may be the rest of, which the caller dead-letters.
        """
        stripped = text.rstrip(" \t\r")
        for family in self.migrator.families:
            message = family.prefix.split(stripped).message
            if len(message) < CUT_MIN_CHARACTERS:
                continue
            found = family.cut_starts(message)
            if not found:
                continue
            restorations = {lost for _, lost in found}
            lost = next(iter(restorations))
            if len(restorations) == 1 and not any(character.isalnum() for character in lost):
                return stripped[: len(stripped) - len(message)] + lost + message, lost
            return found[0][0]
        return None

    def _cut(self, text: str) -> str | None:
        """The wording a line that no wording read begins, ended early (None: it is no such line).

        As ``_recognise`` tries it: the line as printed, then what follows a progress bar glued before it.
        """
        stripped = text.rstrip(" \t\r")
        glued = unglued(stripped)
        for candidate in (stripped,) if glued is None else (stripped, glued[1]):
            for family in self.migrator.families:
                message = family.prefix.split(candidate).message
                if len(message) >= CUT_MIN_CHARACTERS:
                    wording = family.cut(message)
                    if wording is not None:
                        return wording
        return None

    def _json(self, raw: bytes, body: bytes) -> Held | None:
        try:
            event = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            if JSON_EVENT in body:
                self._reject(raw, f"looks like a JSON event but cannot be read: {exc}")
            return None
        if not isinstance(event, dict):
            return None
        try:  # numbers orjson would write differently keep their text; no duplicate key, no nesting too deep
            event = jsonline.exact(body, event)
        except LineError as exc:
            self._reject(raw, str(exc))
            return None
        name, version = event.get("event"), catalog_version(event.get("schema_version"))
        if not isinstance(name, str) or name not in self.migrator.catalog.schemas or version is None:
            return None
        if version not in self.migrator.catalog.schemas[name]:
            self._unparsed(body.decode("utf-8", "replace"), f"{name}@{version}: the catalog has no such version")
            return None
        # An event at the newest version, or one a migration already wrote at the version asked for, is
        # copied as it is (so migrating twice changes nothing); the context still learns from it. An older
        # event never migrated goes up the chain and back, to gain what the context knows (or say it is lost).
        at_target = version == self.migrator.target(name)
        latest = version == self.migrator.catalog.latest(name)
        keep = self.migrator.options.output_format == "jsonl" and at_target and (latest or "migrated" in event)
        if "migrated" in event and not (latest and at_target):  # steps fill in what kvlog's provenance holds
            problem = self.migrator.validator.provenance_problem(event["migrated"])
            if problem is not None:  # another tool's object under that name: refused whole, not half filled in
                self._reject(raw, f"{name}@{version}: migrated is not kvlog's provenance: {problem}")
                return None
        if latest:
            return Held(event, self.number, revisable=False, raw=raw, keep_raw=keep, source_version=version)
        migrated = provenance(event)
        migrated.setdefault("file", self.file)
        migrated.setdefault("line", self.number)
        if self.migrator.options.keep_original:
            migrated.setdefault("original", body.decode("utf-8", "replace"))
        held = self._upgrade(event, raw, str(migrated["source_format"]))
        if held is not None and keep:
            held.revisable, held.keep_raw = False, True
        return held

    def _upgrade(self, event: dict[str, Any], raw: bytes, source: str) -> Held | None:
        name, version = str(event["event"]), int(event["schema_version"])
        try:
            for step in self.migrator.chain.path(name, version, self.migrator.catalog.latest(name)):
                event = step.apply(event)
        except MigrationError as exc:
            self._reject(raw, str(exc))
            return None
        for marked in event.pop(MARKED, ()):  # kvlog's --format text said these were inferred before
            if marked != "timestamp" and event.get(marked) is not None:
                mark_inferred(event, marked, InferenceRule.MARKED_INFERRED, EVIDENCE[InferenceRule.MARKED_INFERRED])
        return Held(event, self.number, revisable=True, raw=raw, source=source, source_version=version)

    def _unparsed(self, text: str, reason: str, *, read_as: str | None = None, said: LinePrefix | None = None) -> None:
        """Report ``text`` if it looks like a memory line (as ``read_as`` reads, where that differs)."""
        read = text if read_as is None else read_as
        message = self._message(read, said)
        if not carries_memory_figure(message) and _MEMORY_WORDING.search(message) is None:
            return
        if traceback_line(read) or transfer_bar(read):  # the code that raised, a download: no memory held
            return
        if self.migrator.allowed_unparsed is not None and self.migrator.allowed_unparsed.search(read):
            self.report.allowed_unparsed_lines += 1
            return
        self.report.unparsed(self.file, self.number, reason, text)
        if self.dead is not None:
            self.dead({"file": self.file, "line": self.number, "reason": reason, "text": text})

    def _dead(self, text: str, reason: str) -> None:
        """Dead-letter this line for ``reason``, whatever its words: a record known to be damaged."""
        if self.migrator.allowed_unparsed is not None and self.migrator.allowed_unparsed.search(text):
            self.report.allowed_unparsed_lines += 1
            return
        self.report.unparsed(self.file, self.number, reason, text)
        if self.dead is not None:
            self.dead({"file": self.file, "line": self.number, "reason": reason, "text": text})

    def _reject(self, raw: bytes, reason: str, line: int | None = None) -> None:
        self.report.rejected += 1
        text = log_text(raw.rstrip(b"\r\n"))
        number = line or self.number
        self.report.unparsed(self.file, number, reason, text)
        if self.dead is not None:
            self.dead({"file": self.file, "line": number, "reason": reason, "text": text})

    # -- writing --------------------------------------------------------------------------------

    def _correct(self, corrections: list[dict[str, Any]]) -> None:
        """Write the corrections a line made after its own output, into a stream of events (``--only-events``).

        They are events no input line stands for: output that keeps one line per input line has no
        place for them, a text or legacy rendering no wording. Nor has a catalog release whose corrected
        event carries no ``allocation_state`` (catalog 1's pools): there the earlier event never claimed
        a state, so there is nothing to correct.
        """
        for event in corrections:
            corrected = self.migrator.target(str(event["corrected_event"]))
            if corrected is None:
                continue
            schema = self.migrator.catalog.schema(str(event["corrected_event"]), corrected)
            if "allocation_state" in schema.get("properties", {}):
                self._emit(Held(event, self.number, revisable=False, raw=b"\n"), 0)

    def _emit(self, item: bytes | Held, lines: int) -> None:
        if not self.held and (isinstance(item, bytes) or (item.resolved and not item.waits_for_time)):  # ready
            self._write(item)
            return
        size = len(item) if isinstance(item, bytes) else len(item.raw)
        self.held.append((item, lines, size))
        self.held_lines += lines
        self.held_bytes += size
        while self.held and (self.held_lines > LOOKAHEAD_LINES or self.held_bytes > LOOKAHEAD_BYTES):
            head = self.held[0][0]
            if isinstance(head, Held) and not head.resolved:
                self.context.give_up(head, f"{LOOKAHEAD_LINES} lines or {LOOKAHEAD_BYTES >> 20} MiB")
            if isinstance(head, Held) and head.waits_for_time:
                self._undated_give_up(head.line)
            self._flush()
        self._flush()

    def _flush(self) -> None:
        while self.held:
            item, lines, size = self.held[0]
            if isinstance(item, Held) and (not item.resolved or item.waits_for_time):  # not ready
                return
            self.held.popleft()
            self.held_lines -= lines
            self.held_bytes -= size
            self._write(item)

    def _write(self, item: bytes | Held) -> None:
        if isinstance(item, bytes):
            self._passthrough(item)
            return
        record = self._record(item)
        if record is None:
            return
        try:
            self.downstream.record(record)
        except MigrationError as exc:  # its encoder cannot write it
            self._refuse(item, str(exc))
            return
        self.report.counted_event(record.source_format, record.event)

    def _record(self, held: Held) -> Record | None:
        """The record of an event: validated, at the version asked for, in the written order (None: rejected).

        An event the migrator built from a text rule, off a printed line, at its newest version, is valid
        by construction once one event of that rule with the same keys was: its values are captured as
        its schema types them (digits for an integer, an enum's values, a sign only where the schema
        allows one), its header's by the server's prefix grammar, so what can still make it invalid is
        which keys it has (a required field a wording's optional part did not print), and the keys are
        what ``Migrator.proven`` remembers. Every event is checked with ``validate_all`` (the reference);
        one taken down to an older catalog version (whose schema may bound what the newest does not: a
        negative figure), one read from JSON, a log record's (``messages``) or one the context made (a
        correction) always is. ``tests/test_migration_construction.py`` and
        ``tests/test_migration_reference.py`` hold the two paths to the same output.
        """
        event = held.event
        source = held.source or source_format(event)
        if held.keep_raw:
            return Record(event, held.line, held.raw, source, held.source_version, verbatim=True)
        rule = None if self.migrator.options.validate_all else held.built
        try:
            if self.migrator.options.output_format == "jsonl":
                at_target = self._at_target(event)
                if at_target is not event:  # taken down to an older version: checked, as the reference does
                    rule, event = None, at_target
            keys = self.migrator.keys(event)
            if rule is None or not self.migrator.proven(rule, keys):
                self._check(event)
                if rule is not None:
                    self.migrator.prove(rule, keys)
            if self.migrator.options.output_format == "jsonl":
                event = self.migrator.written(event, keys)
        except MigrationError as exc:
            self._refuse(held, str(exc))
            return None
        return Record(event, held.line, held.raw, source, held.source_version, held.glue)

    def _refuse(self, held: Held, reason: str) -> None:
        """An event that cannot be written: rejected, and its line copied through as read (dropped: ``only_events``)."""
        self._reject(held.raw, reason, held.line)
        if self.migrator.options.only_events:
            self.report.changed_lines += 1
        else:
            self._passthrough(held.raw)

    def _at_target(self, event: dict[str, Any]) -> dict[str, Any]:
        name, version = str(event["event"]), int(event["schema_version"])
        target = self.migrator.target(name)
        if target == version:
            return event
        if target is None:
            raise MigrationError(f"{name} does not exist in catalog version {self.migrator.to_catalog}")
        for step in self.migrator.chain.path(name, version, target):
            event = step.apply(event)
        return event

    def _check(self, event: dict[str, Any]) -> None:
        validator = self.migrator.validator
        try:  # EventValidator.is_valid, one call shorter: every event written is checked here
            if validator.fast_check(event.get("event"), event.get("schema_version"))(event):
                return
        except ValueError:  # a value the compiled validator cannot take: is_valid asks the reference validator
            if validator.is_valid(event):
                return
        problems = "; ".join(f"{v.path}: {v.message}" for v in self.migrator.validator.violations(event)[:3])
        raise MigrationError(f"the migrated {event.get('event')}@{event.get('schema_version')} is invalid: {problems}")
