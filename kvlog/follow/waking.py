"""Waiting for news between a follower's passes, at next to no cost while nothing changes.

inotify (through ``watchfiles``, the ``follow`` extra) wakes the follower when a watched directory
changes, with a tick for time-bound work (held events, new files on file systems that send no
events); without it, or where nothing can be watched yet, the files are polled.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

from kvlog.io.tailing import Tailer


class Waker:
    """Sleeps until a watched directory changes, ``tick_s`` passes, or ``stop`` is set.

    Uses inotify through ``watchfiles`` where it is installed and the directories exist; otherwise
    (or with ``poll_s`` forced) it polls every ``poll_s``. The watch is remade when the set of
    directories that exist changes (a log directory created after the follower started).
    """

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
        self.force_polling = force_polling
        self._watch: Iterator[object] | None = None
        self._watching: tuple[str, ...] = ()

    @property
    def uses_inotify(self) -> bool:
        """Whether waits are woken by the kernel (False: polled)."""
        return self._watch is not None

    def wait(self) -> None:
        """Return at the next change, tick or stop."""
        watch = self._watcher()
        if watch is None:
            self.stop.wait(self.poll_s)
            return
        next(watch, None)

    def close(self) -> None:
        """Release the kernel watch."""
        if self._watch is not None:
            self._watch.close()  # type: ignore[attr-defined]
            self._watch = None

    def _watcher(self) -> Iterator[object] | None:
        if self.force_polling:
            return None
        roots, recursive = self.tailer.watched_directories()
        existing = tuple(root for root in roots if Path(root).is_dir())
        if existing != self._watching or self._watch is None:
            self.close()
            self._watching = existing
            if not existing:
                return None
            try:
                import watchfiles  # noqa: PLC0415 - the follow extra; polling without it
            except ImportError:
                self.force_polling = True
                return None
            self._watch = watchfiles.watch(
                *existing,
                watch_filter=None,
                debounce=50,
                step=10,
                rust_timeout=int(self.tick_s * 1000),
                yield_on_timeout=True,
                stop_event=self.stop,
                raise_interrupt=False,
                recursive=recursive,
                ignore_permission_denied=True,
            )
        return self._watch
