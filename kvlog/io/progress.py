"""How far a run over many inputs has got: files and bytes done, whichever engine runs the files.

A display (``kvlog.cli.progress``) is given ``advance(files, bytes)`` calls, increments of the
files done and of their bytes; this module turns what an engine reports into them. The bytes are
the inputs' bytes on disk (a ``.gz`` counts its compressed size), so a run's totals are known
before it starts, and each file adds exactly its size once it is done, however much of it was
read before: a file that failed part-way, or whose task ran twice, still counts once and whole.

Reads are reported as they happen where the file is read: in this process, to the callback the
runner passes; in an engine's task, to ``read_in_task``, which the engine routes to its driver
(``kvlog.fleet.ray_engine`` as items of the task's stream, ``kvlog.io.workers`` through a counter
the worker processes share).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar

from kvlog.io import store
from kvlog.io.inputs import file_size
from kvlog.io.uris import is_uri

#: increments of the files done and of their bytes on disk
Advance = Callable[[int, int], None]

_task_reads: ContextVar[Callable[[int], None] | None] = ContextVar("kvlog_task_reads", default=None)


def input_size(name: str) -> int:
    """The bytes of input ``name`` on disk (or in its store): 0 for standard input and for what cannot be read."""
    if is_uri(name):
        local = store.local_name(name)
        if local == name:
            return store.size(name)
        name = local  # file://: the path it names, measured as paths are
    return file_size(name) or 0


def ignore(_files: int, _bytes: int) -> None:
    """An ``Advance`` for a run nobody watches."""


class Shown:
    """The ``Advance`` of a display that looked up the inputs' sizes for its totals.

    The run's tally takes each size from it rather than asking again: on a store a size is a request.
    """

    __slots__ = ("_update", "sizes")

    def __init__(self, update: Advance, sizes: Mapping[str, int]) -> None:
        self._update = update
        self.sizes = sizes

    def __call__(self, files: int, count: int) -> None:
        self._update(files, count)


class InOrder:
    """Progress of files finished one after the other, in input order.

    ``read`` counts bytes read of files not yet finished: the next one's (this process, a Ray
    task's), or any running task's (worker processes share one counter). ``done`` finishes the next
    file: what was read is taken as its bytes up to its size, and the rest of its size is added (a
    file that failed part-way counts whole). The last file also takes back what was read beyond
    the sizes (a file that grew meanwhile), so the bytes end at the sizes the run started with.
    """

    def __init__(self, names: Iterable[str], advance: Advance) -> None:
        self._sizes = deque(map(_size_for(advance), names))
        self._advance = advance
        self._read = 0

    def read(self, count: int) -> None:
        """``count`` more bytes of files not yet finished were read."""
        self._read += count
        self._advance(0, count)

    def done(self) -> None:
        """The next file is finished (migrated, validated, or failed)."""
        size = self._sizes.popleft() if self._sizes else 0
        taken = min(self._read, size)
        self._read -= taken
        beyond = 0 if self._sizes else self._read
        self._read -= beyond
        self._advance(1, size - taken - beyond)


def _size_for(advance: Advance) -> Callable[[str], int]:
    """Where ``InOrder`` gets an input's size: unwatched, a size is not worth its lookup; shown, the display has it."""
    if advance is ignore:
        return lambda _name: 0
    if isinstance(advance, Shown):
        known = advance.sizes
        return lambda name: known[name] if name in known else input_size(name)
    return input_size


def read_in_task(count: int) -> None:
    """In an engine's task: ``count`` more bytes of its input were read (nowhere to go: ignored)."""
    report = _task_reads.get()
    if report is not None:
        report(count)


def task_reads_go_to(report: Callable[[int], None]) -> None:
    """From now on, in this thread (a worker process's), ``read_in_task`` calls ``report``."""
    _task_reads.set(report)


@contextmanager
def task_reads_to(report: Callable[[int], None]) -> Iterator[None]:
    """While the block runs (in this thread), ``read_in_task`` calls ``report``."""
    token = _task_reads.set(report)
    try:
        yield
    finally:
        _task_reads.reset(token)
