"""Reading log inputs as bytes, in lines of bounded length (decompression: ``kvlog.io.compression``).

Logs are read as bytes so that a line that is not valid UTF-8 (they exist in real logs) can be
reported or passed through untouched instead of crashing a decoder.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from typing import IO, NamedTuple

from kvlog.io import store
from kvlog.io.errors import InputError
from kvlog.io.uris import is_uri
from kvlog.text.printable import printable_name

STDIN = "-"
#: the longest line read as one piece; no event is this long (a longer line is read past, never held)
MAX_LINE_BYTES = 16 << 20
#: ``range_blocks`` reads a file in blocks of this size (``range_lines`` splits them in C)
RANGE_BLOCK_BYTES = 1 << 20


def open_raw(name: str, *, follow_symlinks: bool = True) -> IO[bytes]:
    """The file ``name`` as it is on disk, or an InputError that names it and gives the reason.

    Without ``follow_symlinks`` the file is opened with ``O_NOFOLLOW``: a caller that will replace
    the file must read the very file it replaces, not whatever a link planted there names. A URI
    (``s3://bucket/key``) is an object in a store, streamed by ``kvlog.io.store``; a path never goes there.
    """
    if is_uri(name):
        local = store.local_name(name)
        if local == name:
            return store.open_input(name)
        name = local  # file://: the path it names, opened as paths are
    flags = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)
    if not follow_symlinks:
        flags |= getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)  # NONBLOCK: a FIFO must not hang
    try:
        descriptor = os.open(name, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP and not follow_symlinks:
            raise InputError(f"{printable_name(str(name))}: is a symbolic link; name the file it points to") from None
        raise InputError(f"{printable_name(str(name))}: cannot open: {exc.strerror}") from None
    status = os.fstat(descriptor)
    if stat.S_ISDIR(status.st_mode) or (not follow_symlinks and not stat.S_ISREG(status.st_mode)):
        os.close(descriptor)
        kind = "a directory" if stat.S_ISDIR(status.st_mode) else "not a regular file (a FIFO or device?)"
        raise InputError(f"{printable_name(str(name))}: is {kind}")
    if not follow_symlinks:
        os.set_blocking(descriptor, True)
    return os.fdopen(descriptor, "rb")


class OverlongLine(bytes):
    """Stands for a line too long to hold, which was read past: empty, with its length (newline included).

    ``head`` keeps its first bytes where the reader had them (``kvlog follow``'s tailer), for the report
    that quotes it; ``content`` is what the line stands as among the others (the tailer's: a newline).
    """

    length: int
    head: bytes

    @classmethod
    def of(cls, length: int, *, head: bytes = b"", content: bytes = b"") -> OverlongLine:
        line = cls(content)
        line.length = length
        line.head = head
        return line


def bounded_lines(stream: IO[bytes], size: int = -1) -> Iterator[bytes]:
    """The lines of ``stream`` (of its next ``size`` bytes, which end at a line end), in bounded memory.

    Iterating a file holds each line whole: one line of a decompression bomb, or ``/dev/zero``, would
    take every byte of memory. A line longer than ``MAX_LINE_BYTES`` is read past in pieces of that
    size and stands as an ``OverlongLine``. (The loop is the hot path of ``kvlog validate``: one
    ``readline`` a line, about 30 ns more than iterating the file.)
    """
    readline, cap, left = stream.readline, MAX_LINE_BYTES, size
    while left:
        line = readline(cap if left < 0 else min(cap, left))
        if not line:
            return
        if left > 0:
            left -= len(line)
        if len(line) < cap or line[-1] == 0x0A:
            yield line
            continue
        length = len(line)
        while left:
            more = readline(cap if left < 0 else min(cap, left))
            if left > 0:
                left -= len(more)
            length += len(more)
            if not more or more[-1] == 0x0A:
                break
        yield line if length == cap else OverlongLine.of(length)  # exactly at the cap: the last line


class Run(NamedTuple):
    """Whole lines of a plain file: ``data[start:end]``, each line ending at a newline but the file's last."""

    data: bytes
    start: int
    end: int


def range_blocks(stream: IO[bytes], size: int, block_bytes: int = RANGE_BLOCK_BYTES) -> Iterator[Run | OverlongLine]:
    """The next ``size`` bytes of a plain file (they end at a line end) as runs of whole lines, a block at a time.

    A line that a block boundary cuts is joined into a run of its own, or, over ``MAX_LINE_BYTES``,
    stands as an ``OverlongLine`` (read past, never held); a line within one block is left in its run
    for the reader to weigh against the cap. ``range_lines`` splits the runs into lines; ``kvlog
    validate``'s native path hands each run to the compiled validator whole. It reads a block ahead,
    so it is for byte ranges of files, never for a stream whose reader waits for each line.
    """
    cap, left = MAX_LINE_BYTES, size
    pieces: list[bytes] = []  # the start of a line that goes on in the next block; let go of once over the cap
    length = 0  # that line's length so far
    while left > 0 and (block := stream.read(min(block_bytes, left))):
        left -= len(block)
        first = block.find(b"\n") + 1
        if first == 0:  # no line ends in this block
            pieces.append(block)
            length += len(block)
            if length > cap:
                pieces = []
            continue
        if length:
            whole = length + first
            yield Run(b"".join([*pieces, block[:first]]), 0, whole) if whole <= cap else OverlongLine.of(whole)
        else:
            first = 0
        last = block.rfind(b"\n") + 1
        if first < last:
            yield Run(block, first, last)
        pieces, length = [block[last:]], len(block) - last
    if length:
        yield Run(b"".join(pieces), 0, length) if length <= cap else OverlongLine.of(length)


def range_lines(stream: IO[bytes], size: int, block_bytes: int = RANGE_BLOCK_BYTES) -> Iterator[bytes]:
    """The lines of the next ``size`` bytes of a plain file (they end at a line end), as ``bounded_lines`` gives them.

    ``kvlog validate`` spent a sixth of its time in ``bounded_lines``' one ``readline`` a line; splitting
    the blocks of ``range_blocks`` in C costs a third less.
    """
    cap = MAX_LINE_BYTES
    for run in range_blocks(stream, size, block_bytes):
        if isinstance(run, OverlongLine):
            yield run
            continue
        data, start, end = run
        *ended, rest = (data if start == 0 and end == len(data) else data[start:end]).split(b"\n")
        yield from [line + b"\n" if len(line) < cap else OverlongLine.of(len(line) + 1) for line in ended]
        if rest:  # the range's last line, which no newline ends (weighed against the cap as it was joined)
            yield rest


def file_size(name: str) -> int | None:
    """The bytes of the regular file at path ``name``: None for standard input, anything else, or what cannot be read.

    Progress weighs inputs by it and ``validate`` splits a file by byte range within it; the run itself
    names what cannot be read, so a size never fails.
    """
    if name == STDIN:
        return None
    try:
        status = os.stat(name)  # noqa: PTH116 - names are str here, as every reader's
    except (OSError, ValueError):
        return None
    return status.st_size if stat.S_ISREG(status.st_mode) else None
