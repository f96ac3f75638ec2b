"""The follower: each followed file through the migration engine, events out in order, marks for restarts.

Every file gets its own ``FileRun`` (its own ranks, runs and dates, as ``kvlog migrate`` gives each
input), fed whole lines as the tailer finds them. An event waiting for a later line (the post-capture
look-ahead) holds back the events behind it in its file, for at most ``hold_s`` seconds after its line
was read; then it is written as it stands, with the look-ahead rule in ``migrated.inferred``.

Lines can be *quiet*: read, so that the context and the gauges learn from them, but their events not
written. A restart makes the lines its state counts quiet (they were written before); ``new_only``
makes the lines present at the follow's start quiet (a restart's files the state has no mark of came
later, and are read whole). Observers (the gauges) see every event, quiet or not: a gauge must show
the state of the run, which earlier lines set. Exports (an OpenTelemetry export's log records) see
only the events written: like the events themselves, what leaves the process leaves once, and a
restart or ``--new-only`` must not send a collector the history again.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any, Protocol

from kvlog.follow.holding import HOLD_S, Holding
from kvlog.follow.state import FileMark, FollowState, digest
from kvlog.io.errors import OutputError
from kvlog.io.outputs import NamedSink
from kvlog.io.tailing import Reader, Source
from kvlog.migration.encoders import jsonl
from kvlog.migration.engine import FileRun, Migrator
from kvlog.migration.records import Record
from kvlog.migration.report import MigrationReport
from kvlog.text.printable import printable, printable_name


class Observer(Protocol):
    """Something that learns from the events a follower reads: the gauges (every event), an export (those written)."""

    def observe(self, event: Mapping[str, Any], *, instance: str) -> None:
        """One event, of the server whose log ``instance`` names."""

    def count_unparsed(self, lines: int, *, instance: str) -> None:
        """Memory-like lines that no rule read; 0 (and 0 violations) when the file is first followed."""

    def count_violations(self, count: int, *, instance: str) -> None:
        """Events that could not be migrated into valid current events."""


class EventOutput:
    """Where events go: standard output, or a file they are appended to (whose size the state records)."""

    def __init__(self, path: str | None, stdout: IO[bytes]) -> None:
        self.path = None if path in (None, "-") else os.path.abspath(path)  # noqa: PTH100 - a str in, a str out
        self.name = path or "standard output"
        if self.path is None:
            self._stream: IO[bytes] = stdout
            self._file: IO[bytes] | None = None
        else:
            try:
                self._file = open(self.path, "ab")  # noqa: SIM115, PTH123 - held open for the follower's life
            except OSError as exc:
                raise OutputError(f"{path}: cannot open: {exc.strerror}") from None
            self._stream = self._file
        self._sink = NamedSink(self._stream, self.name)
        #: inside a write or flush of events: where a stop may find the run blocked on a reader that does not read
        self.writing = False
        #: standard output's own descriptor, kept while ``abandon`` points it at /dev/null
        self._given_back: int | None = None
        #: a regular file is put on disk at each commit; a device (``/dev/null``) or a FIFO has no disk
        self._durable = self._file is not None and stat.S_ISREG(os.fstat(self._file.fileno()).st_mode)
        if self._file is not None and self._durable:
            self._lock(self._file)

    def _lock(self, file: IO[bytes]) -> None:
        """Hold the file for this follower: a second one would interleave its lines and cut this one's on restart.

        (Devices and FIFOs are shared freely: ``-o /dev/null`` for a metrics-only follower.)
        """
        try:
            fcntl.flock(file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            file.close()
            if isinstance(exc, BlockingIOError):
                raise OutputError(f"{self.name}: another kvlog follow writes to this file") from None
            raise OutputError(f"{self.name}: cannot lock: {exc.strerror}") from None

    @property
    def identity(self) -> tuple[int, int] | tuple[None, None]:
        """The output file's device and inode (None for standard output)."""
        if self._file is None:
            return None, None
        status = os.fstat(self._file.fileno())
        return status.st_dev, status.st_ino

    def cut_to(self, size: int) -> bool:
        """Drop what was written after the state recorded ``size`` (it is written again); False if shorter."""
        if self._file is None:
            return True
        actual = os.fstat(self._file.fileno()).st_size
        if actual < size:
            return False
        if actual > size:
            os.truncate(self._file.fileno(), size)
        return True

    def write(self, data: bytes) -> None:
        """One event line."""
        self.writing = True
        try:
            self._sink.write(data)
        finally:
            self.writing = False

    def commit(self) -> int | None:
        """Put what was written where a restart finds it (flushed; on disk for a file); the file's size."""
        self.writing = True
        try:
            self._sink.flush()
        finally:
            self.writing = False
        if self._file is None or not self._durable:
            return None
        try:
            os.fsync(self._file.fileno())
            # the size, not tell(): after ``cut_to`` the position stays at the old end until the next write
            return os.fstat(self._file.fileno()).st_size
        except OSError as exc:
            raise OutputError(f"{self.name}: cannot write: {exc.strerror}") from None

    @property
    def descriptor(self) -> int | None:
        """The events' file descriptor; None for a stream that has none (a library caller's ``BytesIO``)."""
        try:
            return self._stream.fileno()
        except (OSError, ValueError):  # io.UnsupportedOperation is both
            return None

    def abandon(self) -> None:
        """Drop what cannot be written (its reader stopped reading): no later write or flush may block on it.

        The descriptor is pointed at /dev/null, and so is standard output or error where it is the same
        pipe (``2>&1``: a message written there would block too). Standard output is given back at
        ``close``, once what was buffered for it has gone to /dev/null; a descriptor that only shared
        the pipe stays on /dev/null, as anything written to it would block.
        """
        descriptor = self.descriptor
        if descriptor is None:
            return
        stalled = os.fstat(descriptor)
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            if self._file is None:
                self._given_back = os.dup(descriptor)
            for shared in (1, 2):
                with contextlib.suppress(OSError):  # closed: nothing to protect
                    status = os.fstat(shared)
                    if shared != descriptor and (status.st_dev, status.st_ino) == (stalled.st_dev, stalled.st_ino):
                        os.dup2(null, shared)
            os.dup2(null, descriptor)
        finally:
            os.close(null)

    def close(self) -> None:
        """Close the file (standard output is the caller's); what a failed write left buffered fails again, named."""
        if self._given_back is not None:  # standard output, abandoned: its buffer is dropped, its descriptor restored
            with contextlib.suppress(OSError, ValueError):
                self._stream.flush()
            descriptor = self.descriptor
            if descriptor is not None:
                os.dup2(self._given_back, descriptor)
            os.close(self._given_back)
            self._given_back = None
        if self._file is not None:
            try:
                self._file.close()
            except OSError as exc:
                raise OutputError(f"{self.name}: cannot write: {exc.strerror or exc}") from None


@dataclass
class _Followed:
    """A followed file and the engine run reading it."""

    source: Source
    run: FileRun
    #: the server this file is the log of, for observers: the name it was first found under
    instance: str
    #: when each piece was read: how long the oldest held event has waited
    holding: Holding
    #: events of lines up to this one are not written (a restart's, or new-only's); None: none are quiet
    quiet_lines: int | None = None
    #: the restart's mark: until its lines are read again it still says how far the events are written
    resumed: FileMark | None = None
    #: new-only: lines ending at or before this offset are quiet (made a line count once reached); a piece
    #: ending before it is quiet as a whole, as a first pass ends there when the log's last line was
    #: half-written at the start or the log is larger than one pass reads (``READ_BYTES``)
    quiet_offset: int | None = None
    #: (lines read, offset) after each piece: the offset a state mark can name
    ends: deque[tuple[int, int]] = field(default_factory=deque)
    #: the offset the state names: the last piece's end whose lines are all written
    checked: int = 0
    unparsed: int = 0
    rejected: int = 0


class Follower(Reader):
    """Reads what the tailer finds, writes events, tells observers and exports, and marks progress for ``--state``.

    ``observers`` rebuild state from every event read, quiet or not; ``exports`` send each event
    written, once (never the quiet ones). Both are told the counts of unparsed lines and violations.
    """

    def __init__(
        self,
        migrator: Migrator,
        output: EventOutput,
        *,
        observers: Sequence[Observer] = (),
        exports: Sequence[Observer] = (),
        hold_s: float = HOLD_S,
        new_only: bool = False,
        state: FollowState | None = None,
        clock: Callable[[], float],
        on_notice: Callable[[str], None] = lambda _: None,
        own_names: Iterable[str] = (),
    ) -> None:
        self.migrator = migrator
        self.output = output
        self.observers = tuple(observers)
        self.exports = tuple(exports)
        self.hold_s = hold_s
        self.new_only = new_only
        self.clock = clock
        self.say = on_notice
        #: the names the follower's own files were given (``-o``, ``--state``): found there, they go unsaid
        self.own_names = frozenset(map(os.path.realpath, own_names))
        self.marks = {(mark.device, mark.inode): mark for mark in (state.files if state else ())}
        #: a restart: its own start is not the follow's, and a file the state has no mark of came meanwhile
        #: (unless the first run stopped before it had opened its files: then this start is the follow's)
        self.resuming = state is not None and state.files_opened
        self.started = False
        self.written = 0
        self._files: dict[tuple[int, int], _Followed] = {}

    # -- what the tailer finds ------------------------------------------------------------------

    def opened(self, source: Source) -> None:
        events = _Events(self)
        run = FileRun(self.migrator, source.path, MigrationReport(files=1), events.dead, events)
        followed = events.followed = _Followed(source, run, source.path, Holding(self.hold_s))
        key = (source.key.device, source.key.inode)
        mark = self.marks.pop(key, None)
        descriptor = source.descriptor
        assert descriptor is not None, "a file is open when it is found, or found again from its start"
        size = os.fstat(descriptor).st_size
        if mark is not None:
            head = os.pread(descriptor, mark.head_bytes, 0)
            if mark.same_file(head) and size >= mark.offset:
                followed.quiet_lines, followed.resumed = mark.line, mark
            else:
                self.say(
                    f"{printable_name(source.path)}: changed while it was not followed (truncated or replaced): "
                    "read from its start"
                )
        elif self.new_only and not self.started:
            if self.resuming:  # its lines were written after the follow began: new, all of them
                self.say(
                    f"{printable_name(source.path)}: not in the state (new since the last run, or newly named): "
                    "read from its start"
                )
            else:
                followed.quiet_offset = size
        self._files[key] = followed
        # counted 0 from the file's first sight: its first lines are a rise, alerted on
        for observer in self.observers + self.exports:
            observer.count_unparsed(0, instance=followed.instance)
            observer.count_violations(0, instance=followed.instance)

    def lines(self, source: Source, data: bytes, end: int) -> None:
        followed = self._files[(source.key.device, source.key.inode)]
        quiet = followed.quiet_offset
        if quiet is not None:
            start = end - len(data)  # an overlong line's empty piece starts later than it: never quiet, as it ends past
            boundary = _line_end_at_or_after(data, quiet - start)
            if boundary is None:  # ends before the start's size (a pass's end, a half-written last line): all quiet
                followed.quiet_lines = followed.run.number + data.count(b"\n")  # such a piece ends at a newline
            else:  # the lines up to here were there at the start
                followed.quiet_lines = followed.run.number + data.count(b"\n", 0, boundary)
                followed.quiet_offset = None
        followed.run.feed(data)
        followed.holding.read(followed.run, self.clock())
        followed.ends.append((followed.run.number, end))
        _settle(followed)  # also without a state, which would otherwise never take them: memory stays bounded
        self._count(followed)

    def truncated(self, source: Source) -> None:
        key = (source.key.device, source.key.inode)
        self._files[key].run.finish()
        self._count(self._files.pop(key))
        self.say(f"{printable_name(source.path)}: truncated (rotated by copytruncate?): following it from its start")
        self.opened(source)

    def closed(self, source: Source) -> None:
        followed = self._files.pop((source.key.device, source.key.inode))
        followed.run.finish()
        self._count(followed)

    def unreadable(self, path: str, reason: str) -> None:
        self.say(f"{printable_name(path)}: cannot open: {reason}; not followed until it can be read")

    def own_file(self, path: str) -> None:
        if os.path.realpath(path) not in self.own_names:
            self.say(f"{path}: written by this kvlog follow (its events, state or messages): not read")

    def finish(self) -> None:
        """The end of following without a state: what still waits is written as it stands, as at a file's end.

        (With a state it stays unwritten: the restart reads its lines again and may yet see its evidence.)
        A last line with no newline yet may be half-written: it is not read, and said.
        """
        for followed in self._files.values():
            followed.run.finish()
            self._count(followed)
            unended = len(followed.source.partial)
            if unended:
                self.say(
                    f"{printable_name(followed.source.path)}: its last {unended} bytes end no line yet "
                    "(still being written?): not read; kvlog migrate reads them as a line"
                )

    # -- time, and marks ------------------------------------------------------------------------

    def expire(self) -> None:
        """Write the events that waited ``hold_s`` for a later line, as they stand."""
        now = self.clock()
        for followed in self._files.values():
            followed.holding.expire(followed.run, now)

    def state(self, output_size: int | None) -> FollowState:
        """What a restart needs, as of now: call after the events written so far were committed.

        A file a restart has not read again as far as its old mark keeps that mark (its events are in the
        output), and so does a file of the old state not opened again but still there (unreadable for now,
        or no longer named by a pattern): a stop before they are read must not make the next restart write
        their events a second time.
        """
        marks = []
        for followed in self._files.values():
            _settle(followed)
            source, head = followed.source, followed.source.head
            draining = source.draining_since is not None
            resumed = followed.resumed
            if resumed is not None and followed.run.written_lines < resumed.line:
                marks.append(replace(resumed, path=source.path, draining=draining))
                continue
            marks.append(
                FileMark(
                    source.path,
                    source.key.device,
                    source.key.inode,
                    followed.run.written_lines,
                    followed.checked,
                    digest(head),
                    len(head),
                    draining=draining,
                )
            )
        marks.extend(mark for mark in self.marks.values() if _still_there(mark))
        return FollowState(tuple(marks), self.output.path, output_size, *self.output.identity)

    # -- events ---------------------------------------------------------------------------------

    def _event(self, followed: _Followed, record: Record) -> None:
        if followed.quiet_lines is not None and record.line <= followed.quiet_lines:
            _tell(self.observers, record, followed.instance)  # its state, not the event: it was written before
            return
        self.output.write(jsonl(record) + b"\n")
        self.written += 1
        _tell(self.observers + self.exports, record, followed.instance)  # after the write: an export never runs ahead

    def _unparsed(self, followed: _Followed, letter: dict[str, Any]) -> None:
        if followed.quiet_lines is None or letter["line"] > followed.quiet_lines:
            where = f"{printable_name(followed.source.path)}:{letter['line']}"
            self.say(f"{where}: {letter['reason']}: {printable(letter['text'][:200])}")  # no log byte drives a terminal

    def _count(self, followed: _Followed) -> None:
        report = followed.run.report
        unparsed, rejected = report.unparsed_memory_lines - report.rejected, report.rejected
        for observer in self.observers + self.exports:
            if unparsed > followed.unparsed:
                observer.count_unparsed(unparsed - followed.unparsed, instance=followed.instance)
            if rejected > followed.rejected:
                observer.count_violations(rejected - followed.rejected, instance=followed.instance)
        followed.unparsed, followed.rejected = unparsed, rejected


class _Events:
    """A followed file's downstream: its records to the follower; it reads events only, so nothing passes through."""

    followed: _Followed

    def __init__(self, follower: Follower) -> None:
        self.follower = follower

    def passthrough(self, data: bytes | memoryview) -> None:
        pass  # only the empty lines of ``only_events``

    def record(self, record: Record) -> None:
        self.follower._event(self.followed, record)

    def dead(self, letter: dict[str, Any]) -> None:
        self.follower._unparsed(self.followed, letter)


def _tell(observers: Sequence[Observer], record: Record, instance: str) -> None:
    for observer in observers:
        observer.observe(record.event, instance=instance)


def _settle(followed: _Followed) -> None:
    """Move ``checked`` to the end of the last piece whose lines are all written, dropping the pieces before it."""
    written = followed.run.written_lines
    while followed.ends and followed.ends[0][0] <= written:
        followed.checked = followed.ends.popleft()[1]


def _still_there(mark: FileMark) -> bool:
    """Whether the file a mark names is still at its name (a deleted one's mark has nothing left to count)."""
    try:
        status = Path(mark.path).stat()
    except OSError:
        return False
    return (status.st_dev, status.st_ino) == (mark.device, mark.inode)


def _line_end_at_or_after(data: bytes, position: int) -> int | None:
    """The end of the line that holds ``data[position - 1]`` (0: before everything); None if past ``data``."""
    if position <= 0:
        return 0
    if position > len(data):
        return None
    if data[position - 1] == 0x0A:
        return position
    end = data.find(b"\n", position)
    return None if end == -1 else end + 1
