"""Following files as they grow, like ``tail -F``: whole lines, across rotation, truncation and new files.

A followed log changes under the reader in four ways, and each must neither lose nor repeat a line:

- **rotation by rename** (logrotate's default): the name now holds a new file; the old one may still
  get the writer's last lines. It is read to its end until it stays quiet for ``drain_s``, then closed.
- **rotation by copytruncate**, or any truncation: the same file starts again from nothing. Seen as a
  size below what was read, or a first few bytes that changed; it is read again from its start.
- **deleted and recreated**: the new file may even reuse the old inode number; an open file whose last
  link is gone (``st_nlink == 0``) is the old one, whatever the number says.
- **new files** matching a pattern or appearing in a directory.

Files are known by device and inode, not by name, so a file renamed to another name that still
matches is followed on, not read twice; and the follower's own files (``own``: its output, its
state) are never read, whatever name a pattern finds them under. Only whole lines are handed on (a line is whole at its
newline, or at the end of a file that is closed); a line longer than ``max_line_bytes`` is skipped
as it streams past and handed on as an ``OverlongLine`` (a newline, with its length and first bytes),
so memory stays bounded whatever the lines and the follower still reports it.

A directory may hold more files than the process may have descriptors (old rotations, a log per
restart). The tailer keeps at most ``max_open`` files open (by default from ``RLIMIT_NOFILE``, leaving
the rest of the process room for its own opens): past that, the file that has gone longest without
news is closed, and watched through the listing each pass lists anyway (its size and modification
time); when it changes it is opened again at its name and taken only if it is the same file (device
and inode), read on from where it was. A file that cannot be opened (no permission, no descriptor
left) is named once and tried again at the next pass; following goes on.

Waiting between passes is ``kvlog.follow.waking``'s: this module never blocks.
"""

from __future__ import annotations

import glob
import os
import resource
import stat
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from kvlog.io.compression import is_compressed
from kvlog.io.expansion import expand_inputs, pattern_root
from kvlog.io.inputs import OverlongLine

#: read at most this much of one file per pass, so that one busy file does not starve the others
READ_BYTES = 4 << 20
#: how many first bytes of a file tell a truncated-and-rewritten file from the one that was read
HEAD_BYTES = 64
#: descriptors left to the rest of the process (imports, sockets, state saves): a quarter of the limit, at least this
HEADROOM = 32
#: how a followed file is opened: never blocking (a name replaced by a FIFO must not hang the follower)
_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)


@dataclass(frozen=True)
class FileKey:
    """A file's identity while it exists: its device and inode (a name can move; these do not)."""

    device: int
    inode: int


@dataclass(eq=False)
class Source:
    """One file being followed."""

    path: str
    key: FileKey
    #: None while closed for want of descriptors (``Tailer.max_open``): opened again when the file changes
    descriptor: int | None
    #: bytes read so far: the whole lines handed on, then ``partial`` (or the skipped part of an overlong line)
    offset: int = 0
    #: the first bytes of the file, as read: they change only when the file is rewritten from its start
    head: bytes = b""
    partial: bytearray = field(default_factory=bytearray)
    #: inside a line longer than the cap: its bytes are skipped until its newline
    skipping: bool = False
    #: that line so far: its length and first bytes, handed on at its end
    skipped: OverlongLine | None = None
    #: renamed away or deleted: read until quiet, then closed
    draining_since: float | None = None
    last_data: float = 0.0
    #: the modification time when it was closed for want of descriptors: a change says it is to be read
    closed_mtime_ns: int = 0


class Reader(Protocol):
    """What a follower does with what the tailer finds."""

    def opened(self, source: Source) -> None:
        """A new file to follow, read from its first byte."""

    def lines(self, source: Source, data: bytes, end: int) -> None:
        """Whole lines of ``source`` (each ending in a newline but perhaps the last, when it is closed).

        ``end`` is the offset just after them. An overlong line comes alone, as an ``OverlongLine`` (a
        newline with its length and first bytes): then ``data`` is shorter than the bytes it stands for.
        """

    def truncated(self, source: Source) -> None:
        """``source`` was truncated or rewritten from its start: what follows is read from its first byte."""

    def closed(self, source: Source) -> None:
        """``source`` was renamed away or deleted, and is read to its end: nothing more will come."""

    def unreadable(self, path: str, reason: str) -> None:
        """The file at ``path`` cannot be opened (``reason``): it is tried again at each pass, said once."""

    def own_file(self, path: str) -> None:
        """The file at ``path`` is one the follower writes: never read (said once for each name)."""


class Tailer:
    """The files that ``patterns`` (files, directories, globs) name, now and as they change."""

    def __init__(
        self,
        patterns: tuple[str, ...],
        *,
        max_line_bytes: int,
        drain_s: float = 5.0,
        own: Callable[[], Collection[FileKey]] = lambda: (),
        max_open: int | None = None,
    ) -> None:
        self.patterns = patterns
        self.max_line_bytes = max_line_bytes
        self.drain_s = drain_s
        #: the identities of the follower's own files (output, state), now: a pattern naming them, under any
        #: name, would feed it its own events
        self.own = own
        #: the most files held open at once: past it, the one longest without news is closed until it changes
        self.max_open = max_open if max_open is not None else descriptor_budget()
        self._sources: dict[FileKey, Source] = {}
        #: the sources open now, the one longest without news first
        self._open: dict[FileKey, Source] = {}
        #: files that could not be opened, so that each is said once, not at every pass
        self._refused: set[FileKey | str] = set()
        #: names own files were found under, so that each is said once
        self._own_said: set[str] = set()

    @property
    def sources(self) -> list[Source]:
        """The files followed now, in the order they were found."""
        return list(self._sources.values())

    def poll(self, reader: Reader, stopping: Callable[[], bool] = lambda: False) -> bool:
        """One pass: find new, rotated and deleted files, and hand on the whole lines written since the last.

        Returns whether a file has more to read than one pass reads of it (``READ_BYTES``): then the
        next pass must not wait for news, which a file already written will never send. Once
        ``stopping()`` is true nothing more is read: a pass over files already written (a restart's
        re-read) would otherwise hold a stop signal for as long as it takes to read 4 MiB of each.
        """
        now = time.monotonic()
        listed = self._listing()
        found = {path: _key(status) for path, status in listed.items()}
        for path, key in found.items():
            source = self._sources.get(key)
            if source is None:
                self.adopt(path, reader, key)
            elif source.path != path and source.path not in found:
                source.path = path  # renamed to a name that still matches: the same file, followed on
        matched = {key: (path, listed[path]) for path, key in found.items()}
        behind = False
        for source in list(self._sources.values()):
            descriptor = source.descriptor
            if descriptor is None and (descriptor := self._reopen(source, matched.get(source.key), reader)) is None:
                continue
            status = os.fstat(descriptor)
            if source.key not in matched or status.st_nlink == 0:  # renamed away, or deleted (unlinked)
                source.draining_since = source.draining_since or now
            behind |= self._read(source, descriptor, status.st_size, reader, now, stopping)
            if source.draining_since is not None and now - max(source.draining_since, source.last_data) >= self.drain_s:
                self._close(source, reader)
        return behind

    def adopt(self, path: str, reader: Reader, key: FileKey | None = None) -> Source | None:
        """Follow the file at ``path`` (also one no pattern names: a log rotated away while nobody followed).

        None when it is not the file ``key`` names, is followed already, is gone, is not a regular file or is
        one of the follower's own. One that cannot be opened (permission denied is not a file that is not
        there) is said, once.
        """
        own = self.own()
        if key in own:
            self._own(path, reader)
            return None
        descriptor = self._open_file(path, key or path, reader)
        if descriptor is None:
            return None
        status = os.fstat(descriptor)
        if not stat.S_ISREG(status.st_mode):
            os.close(descriptor)
            return None
        actual = FileKey(status.st_dev, status.st_ino)
        if (key is not None and actual != key) or actual in self._sources or actual in own:
            os.close(descriptor)
            if actual in own:
                self._own(path, reader)
            return None
        self._refused.discard(actual)
        source = Source(path, actual, descriptor, last_data=time.monotonic())
        self._sources[actual] = self._open[actual] = source
        reader.opened(source)
        return source

    def close(self) -> None:
        """Stop following: close every file (nothing more is handed on)."""
        for source in self._open.values():
            if source.descriptor is not None:
                os.close(source.descriptor)
        self._sources.clear()
        self._open.clear()

    def watched_directories(self) -> tuple[str, ...]:
        """The patterns' base directories: where new files appear (a subdirectory's is seen at the tick)."""
        roots: list[str] = []
        for pattern in self.patterns:
            path = Path(pattern)
            if path.is_dir():
                roots.append(pattern)
            elif glob.has_magic(pattern):
                roots.append(pattern_root(pattern))
            else:
                roots.append(str(path.parent))
        return tuple(dict.fromkeys(roots))

    def matching(self) -> dict[str, FileKey]:
        """Every regular file the patterns name now (compressed files are finished rotations: not followed)."""
        return {name: _key(status) for name, status in self._listing().items()}

    def _listing(self) -> dict[str, os.stat_result]:
        """``matching``, with what each file's ``stat`` said (a closed file's size and time tell it changed)."""
        found: dict[str, os.stat_result] = {}
        expansion = expand_inputs(self.patterns)
        # every name, a second name of one file too: the tailer tells files apart by identity itself, and
        # a link to its own output must be seen (and said) under the name that links it
        for name in [*expansion.names, *(again for again, _first in expansion.repeated)]:
            if is_compressed(name):
                continue
            try:
                status = Path(name).stat()
            except OSError:
                continue  # not there (yet): a name given alone is waited for, as tail -F does
            if stat.S_ISREG(status.st_mode):
                found.setdefault(name, status)
        return found

    def _open_file(self, path: str, refusal: FileKey | str, reader: Reader) -> int | None:
        """A descriptor of the file at ``path``, made room for; None (said once for ``refusal``) if none can be had."""
        if not self._make_room():
            reason = f"more files than may be open at once ({self.max_open}, from the descriptor limit); waits"
            self._refuse(path, refusal, reason, reader)
            return None
        try:
            return os.open(path, _OPEN_FLAGS)
        except FileNotFoundError:
            return None  # gone between the listing and the open: the next pass sees what is there
        except OSError as exc:  # permission denied is not a file that is not there; nor is EMFILE
            self._refuse(path, refusal, exc.strerror or str(exc), reader)
            return None

    def _refuse(self, path: str, refusal: FileKey | str, reason: str, reader: Reader) -> None:
        if refusal not in self._refused:
            self._refused.add(refusal)
            reader.unreadable(path, reason)

    def _make_room(self) -> bool:
        """Close the open file longest without news if none more may be opened; False if all are being drained."""
        if len(self._open) < self.max_open:
            return True
        for source in self._open.values():
            if source.draining_since is None:  # one being read to its end is closed soon anyway, for good
                self._set_aside(source)
                return True
        return False

    def _set_aside(self, source: Source) -> None:
        """Close ``source`` for want of descriptors; it stays followed, and is opened again when it changes."""
        if source.descriptor is not None:
            source.closed_mtime_ns = os.fstat(source.descriptor).st_mtime_ns
            os.close(source.descriptor)
            source.descriptor = None
        del self._open[source.key]

    def _reopen(self, source: Source, listed: tuple[str, os.stat_result] | None, reader: Reader) -> int | None:
        """Open a file closed for want of descriptors again if it changed: its descriptor, or None.

        ``listed`` is a name the listing found it under (its old one may hold a new file now) and what
        ``stat`` said of it; None when no pattern names it any more: renamed away (looked for beside
        its last name, and read to its end there) or deleted (what it held was read before it was
        closed: it is done with).
        """
        if listed is None:
            where = find_beside(Path(source.path).parent, source.key)
            if where is None:
                self._close(source, reader)
                return None
            path = source.path = str(where)
        else:
            path, status = listed
            if status.st_size == source.offset and status.st_mtime_ns == source.closed_mtime_ns:
                return None  # unchanged since it was read
        descriptor = self._open_file(path, source.key, reader)
        if descriptor is None:
            return None
        if _key(os.fstat(descriptor)) != source.key:  # the name holds another file now: the next listing tells
            os.close(descriptor)
            return None
        self._refused.discard(source.key)
        source.descriptor = descriptor
        self._open[source.key] = source
        return descriptor

    def _own(self, path: str, reader: Reader) -> None:
        if path not in self._own_said:
            self._own_said.add(path)
            reader.own_file(path)

    def _read(  # noqa: PLR0917 - one pass's reading of one file, with what the pass knows of it
        self, source: Source, descriptor: int, size: int, reader: Reader, now: float, stopping: Callable[[], bool]
    ) -> bool:
        """Hand on what ``source`` (open at ``descriptor``, ``size`` bytes now) has gained, up to ``READ_BYTES``.

        Returns whether more is left.
        """
        if size < source.offset or self._rewritten(source, descriptor):
            source.offset, source.head, source.skipping, source.skipped = 0, b"", False, None
            source.partial.clear()
            reader.truncated(source)
        budget = READ_BYTES
        while budget > 0 and source.offset < size and not stopping():
            data = os.pread(descriptor, min(budget, size - source.offset, 1 << 20), source.offset)
            if not data:
                break
            if len(source.head) < HEAD_BYTES and source.offset < HEAD_BYTES:
                source.head += data[: HEAD_BYTES - source.offset]
            start = source.offset
            source.offset += len(data)
            budget -= len(data)
            source.last_data = now
            self._open[source.key] = self._open.pop(source.key)  # the latest news: closed last for want of room
            for piece, end in self._whole_lines(source, data, start):
                reader.lines(source, piece, end)
        return source.offset < size

    def _rewritten(self, source: Source, descriptor: int) -> bool:
        """Whether the first bytes of the file differ from those read: truncated, then written past the offset."""
        if not source.head:
            return False
        return os.pread(descriptor, len(source.head), 0) != source.head

    def _whole_lines(self, source: Source, data: bytes, at: int) -> list[tuple[bytes, int]]:
        """The pieces of whole lines ``data`` (read at offset ``at``) completes, each with the offset it ends at.

        The rest waits in ``partial``, bounded by the line cap. An overlong line is its own piece, an
        ``OverlongLine``: counted and reported, never held.
        """
        pieces: list[tuple[bytes, int]] = []
        if source.skipping:
            skipped = source.skipped
            assert skipped is not None, "skipping starts with the line's head"
            end = data.find(b"\n") + 1
            if end == 0:
                skipped.length += len(data)
                return pieces
            skipped.length += end
            pieces.append((skipped, at + end))
            source.skipping, source.skipped = False, None
            data, at = data[end:], at + end
        cut = data.rfind(b"\n") + 1
        if cut:
            pieces.append((bytes(source.partial) + data[:cut], at + cut))
            source.partial.clear()
            data = data[cut:]
        source.partial += data
        if len(source.partial) > self.max_line_bytes:
            head = bytes(source.partial[: self.max_line_bytes])
            source.skipped = OverlongLine.of(len(source.partial), head=head, content=b"\n")
            source.partial.clear()
            source.skipping = True
        return pieces

    def _close(self, source: Source, reader: Reader) -> None:
        if source.skipped is not None:  # its last line too long to hold: still reported
            reader.lines(source, source.skipped, source.offset)
        elif source.partial:
            last = bytes(source.partial)  # the last line of a finished file needs no newline
            source.partial.clear()
            reader.lines(source, last, source.offset)
        if source.descriptor is not None:
            os.close(source.descriptor)
            del self._open[source.key]
        del self._sources[source.key]
        reader.closed(source)


def descriptor_budget() -> int:
    """How many files a tailer may hold open: the soft ``RLIMIT_NOFILE`` less what is open now and a headroom.

    The headroom (a quarter of the limit, at least ``HEADROOM``) is for everything else the process
    opens while it follows: a module imported late, a metrics or OTLP connection, a state's save.
    """
    limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if limit == resource.RLIM_INFINITY:
        limit = 1 << 20
    return max(1, limit - _open_descriptors() - max(HEADROOM, limit // 4))


def find_beside(directory: Path, key: FileKey) -> Path | None:
    """The entry of ``directory`` that is the file ``key`` names (a rotation renamed it there); None if none is."""
    try:
        entries = list(directory.iterdir())
    except OSError:
        return None
    for entry in entries:
        try:
            status = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if _key(status) == key:
            return entry
    return None


def _key(status: os.stat_result) -> FileKey:
    return FileKey(status.st_dev, status.st_ino)


def _open_descriptors() -> int:
    """How many descriptors the process has open (0 where the system does not say)."""
    try:
        return sum(1 for _ in Path("/proc/self/fd").iterdir())
    except OSError:
        return 0
