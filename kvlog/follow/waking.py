"""Waiting for news between a follower's passes, at no cost while nothing changes.

inotify (through ``inotify_simple``, the ``follow`` extra: a thin binding of the kernel calls) watches
the directories that hold the followed files and the patterns' base directories; a wait blocks in
``poll()`` in the kernel until one of them changes, a stop is asked for (``wake``, which the signal
handlers call), or the tick comes (held events' time, files in directories nothing watches yet). An
idle follower wakes once a tick, where ``tail -F`` wakes for nothing. Passes are at most ``_MIN_PASS_S``
apart, so a server writing line by line costs one pass per interval, not one per write. Without the
extra, or with polling asked for (network file systems, where inotify sees no remote writes), the
files are polled every ``poll_s``.
"""

from __future__ import annotations

import os
import select
import threading
import time
from contextlib import suppress
from pathlib import Path
from typing import Any

from kvlog.io.tailing import Tailer

#: at most one pass per this many seconds: the wait is the latency, and a burst of writes is one pass
_MIN_PASS_S = 0.02


class Waker:
    """Sleeps until a watched directory changes, ``tick_s`` passes, ``wake()`` is called or ``stop`` is set."""

    def __init__(
        self,
        tailer: Tailer,
        stop: threading.Event,
        *,
        tick_s: float = 1.0,
        poll_s: float = 0.5,
        force_polling: bool = False,
    ) -> None:
        self.tailer = tailer
        self.stop = stop
        self.tick_s = tick_s
        self.poll_s = poll_s
        self._inotify: Any
        self._inotify, self._mask = (None, 0) if force_polling else _inotify()
        self._watches: dict[str, int] = {}
        self._last_pass = 0.0
        self._wake_read, self._wake_write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._poller = select.poll()
        self._poller.register(self._wake_read, select.POLLIN)
        if self._inotify is not None:
            self._poller.register(self._inotify.fileno(), select.POLLIN)

    @property
    def uses_inotify(self) -> bool:
        """Whether waits are woken by the kernel (False: polled)."""
        return self._inotify is not None

    def wake(self) -> None:
        """End the current or next wait now (safe in a signal handler and from another thread)."""
        with suppress(BlockingIOError):  # a wake-up is already pending
            os.write(self._wake_write, b"\0")

    def wait(self) -> None:
        """Return at the next change, tick, wake-up or stop."""
        if self.stop.is_set():
            return
        if self._inotify is None:
            self.stop.wait(self.poll_s)
            return
        self._watch_directories()
        self._poller.poll(int(self.tick_s * 1000))
        self._inotify.read(timeout=0)  # drained: what changed is read again from the files themselves
        with suppress(BlockingIOError):
            os.read(self._wake_read, 4096)
        pause = self._last_pass + _MIN_PASS_S - time.monotonic()
        if pause > 0 and not self.stop.is_set():
            time.sleep(pause)
        self._last_pass = time.monotonic()

    def close(self) -> None:
        """Release the kernel watch and the wake-up pipe."""
        if self._inotify is not None:
            self._inotify.close()
            self._inotify = None
        for descriptor in (self._wake_read, self._wake_write):
            with suppress(OSError):
                os.close(descriptor)

    def _watch_directories(self) -> None:
        """Watch the patterns' base directories and those of the followed files; stop watching the rest."""
        roots = self.tailer.watched_directories()
        wanted = {str(Path(root)) for root in roots} | {str(Path(source.path).parent) for source in self.tailer.sources}
        for directory in set(self._watches) - wanted:
            with suppress(OSError):  # already gone with its directory
                self._inotify.rm_watch(self._watches.pop(directory))
        for directory in wanted - set(self._watches):
            with suppress(OSError):  # not there yet, or no watch left (fs.inotify.max_user_watches): the tick sees it
                self._watches[directory] = self._inotify.add_watch(directory, self._mask)


def _inotify() -> tuple[Any, int]:
    """An inotify instance and the changes to watch for; (None, 0) where there is none (polled then)."""
    try:
        import inotify_simple  # noqa: PLC0415 - the follow extra; polling without it
    except ImportError:
        return None, 0
    flags = inotify_simple.flags
    # a file grew or was truncated, deleted while open (its link count), renamed (rotation), created,
    # removed; the watched directory itself moved or removed
    mask = (
        flags.MODIFY
        | flags.ATTRIB
        | flags.CLOSE_WRITE
        | flags.MOVED_FROM
        | flags.MOVED_TO
        | flags.CREATE
        | flags.DELETE
        | flags.DELETE_SELF
        | flags.MOVE_SELF
    )
    try:
        return inotify_simple.INotify(), int(mask)
    except OSError:  # no inotify here (another kernel, no instance left)
        return None, 0
