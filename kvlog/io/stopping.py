"""Stopping a run on SIGINT, SIGTERM or SIGHUP without leaving a temporary file behind.

A signal becomes ``Stopped``, raised in the main thread, so the run unwinds through the same cleanup
as any error. Cleanup by unwinding has one gap: a file created an instant before the ``try`` that
would remove it. So every temporary file is put on the books (``on_the_books``) the moment it is
created, with the signal held back meanwhile (``held_back``), and whatever is still on the books
when the run stops is removed by the stopping process (``remove_leftovers``). Entries carry the
pid that made them: a forked worker never removes its parent's files.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

from kvlog.io.errors import Stopped

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


_held = 0
_pending: list[int] = []
_books: dict[Path, int] = {}
# Signals whose Stopped was raised where Python cannot unwind (a weakref or GC callback prints
# "Exception ignored" and goes on): the run must still stop, before it commits anything more.
_swallowed: list[int] = []


def stop_on_signals(*, worker: bool = False) -> None:
    """Turn the stop signals into ``Stopped`` in this process (the main thread).

    A ``worker`` (a process of a pool) removes its leftovers and exits at once (``os._exit``): unwinding
    would print the pool loop's traceback, and a worker's normal exit waits on queues its parent may no
    longer read. A signal inside ``held_back`` still waits for the block's end.
    """
    for signum in STOP_SIGNALS:
        signal.signal(signum, _exit_worker if worker else _stop)
    if not worker and sys.unraisablehook is not _unraisable:
        global _previous_hook  # noqa: PLW0603 - the hook chain is process-wide
        _previous_hook = sys.unraisablehook
        sys.unraisablehook = _unraisable


_previous_hook = sys.unraisablehook


def _unraisable(unraisable: Any) -> None:
    """A Stopped that could not unwind is kept for ``swallowed``, not printed as a traceback."""
    if isinstance(unraisable.exc_value, Stopped):
        _swallowed.append(unraisable.exc_value.signum)
        return
    _previous_hook(unraisable)


def swallowed() -> int | None:
    """The stop signal whose ``Stopped`` was swallowed on its way up, if any: the run must stop now."""
    return _swallowed[0] if _swallowed else None


def stop_if_swallowed() -> None:
    """Raise again the ``Stopped`` a callback swallowed, if any: called before anything is committed.

    A run stopped that way goes on until it next asks, so every rename into place asks first
    (``kvlog.io.outputs.Temporary.complete``): else a Ctrl-C that landed in a finaliser while ``--jobs``
    forked its workers let the run finish, commit its outputs and dead letters, and only then exit 130.
    """
    lost = swallowed()
    if lost is not None:
        raise Stopped(lost)


def _stop(signum: int, _frame: FrameType | None) -> None:
    if _held:
        _pending.append(signum)
        return
    raise Stopped(signum)


def _exit_worker(signum: int, frame: FrameType | None) -> None:
    try:
        _stop(signum, frame)
    except Stopped as stopped:
        remove_leftovers()
        os._exit(stopped.exit_status)


@contextmanager
def held_back() -> Iterator[None]:
    """A stop signal that arrives inside waits until the block ends, then stops the run."""
    global _held  # noqa: PLW0603 - one process-wide count, like the signal handlers it guards
    opened_by = os.getpid()
    _held += 1
    try:
        yield
    finally:
        if os.getpid() == opened_by:  # a child forked inside the block holds nothing back (_forked)
            _held -= 1
            if not _held and _pending:
                signal.raise_signal(_pending.pop(0))  # handled as if it arrived now


def _forked() -> None:
    """A forked child starts with no stop signal held back and none pending: those were its parent's.

    The blocks open at the fork are on the parent's stack; a pool worker forked inside one (the pool
    starts its workers as tasks are submitted, in ``held_back``) never leaves it, so an inherited count
    held every stop signal back for the worker's life. Python 3.12's pool, when a worker dies, SIGTERMs
    the others and waits for them: it waited for ever. For the same reason a child of a run that turns
    stop signals into ``Stopped`` stops as a worker does (``_exit_worker``) from its first instruction:
    unwinding its parent's stack from the pool's loop printed a traceback (Ctrl-C reaches the whole
    process group), and a worker whose start installs no handler of its own was never protected.
    """
    global _held  # noqa: PLW0603 - see held_back
    _held = 0
    _pending.clear()
    for signum in STOP_SIGNALS:
        if signal.getsignal(signum) is _stop:
            signal.signal(signum, _exit_worker)


os.register_at_fork(after_in_child=_forked)


def on_the_books(path: Path) -> None:
    """Remember ``path`` (a temporary file or directory) to be removed if the run stops; call within held_back."""
    _books[path] = os.getpid()


def off_the_books(path: Path) -> None:
    """``path`` was renamed into place or removed: it is no longer this run's to clean up."""
    _books.pop(path, None)


def remove_leftovers() -> None:
    """Remove what this process put on the books and did not take off: the run is stopping."""
    me = os.getpid()
    for path, owner in list(_books.items()):
        if owner == me:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
            del _books[path]
