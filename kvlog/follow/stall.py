"""A stop that finds the events' reader gone quiet: ended after a bounded wait, never waited on for ever.

``kvlog follow | consumer`` writes into a pipe; a consumer that stops reading leaves the follower's
write blocked, and Python retries a write a signal interrupted (PEP 475), so a stop signal alone would
wait as long as the consumer does (for systemd, until its SIGKILL). After a stop, a watcher thread
measures whether a blocked write still moves: a pipe's queue that changes (its reader takes even a
few bytes, or the writer adds some) is progress, and a slow reader is waited for as long as it reads.
A write that moved no byte for ``patience_s`` is *stalled*: the watcher marks it and sends the stop
signal again to the main thread, whose handler (``StallWatch.stalled_write``) then ends the run there.
"""

from __future__ import annotations

import fcntl
import os
import select
import signal
import stat
import struct
import termios
import threading
import time
from collections.abc import Callable

#: how often the watcher looks at the output while a write is in progress
_SAMPLE_S = 0.05


def queued_bytes(descriptor: int) -> int:
    """How many bytes wait in the pipe ``descriptor`` is an end of (``FIONREAD`` answers for either end)."""
    answer = fcntl.ioctl(descriptor, termios.FIONREAD, b"\0\0\0\0")
    return int(struct.unpack("i", answer)[0])


def moves_within(descriptor: int, writing: Callable[[], bool], patience_s: float) -> bool:
    """Whether a write to ``descriptor`` in progress moves (or ends) within ``patience_s``.

    A regular file always moves. A pipe moves when its queue changes; anything else (a terminal paused
    with Ctrl-S, a socket) when it becomes writable.
    """
    mode = os.fstat(descriptor).st_mode
    if stat.S_ISREG(mode):
        return True
    pipe = stat.S_ISFIFO(mode)
    queued = queued_bytes(descriptor) if pipe else 0
    deadline = time.monotonic() + patience_s
    while time.monotonic() < deadline:
        time.sleep(_SAMPLE_S)
        if not writing():
            return True
        if pipe:
            now = queued_bytes(descriptor)
            if now != queued:
                return True
        else:
            ready = select.poll()
            ready.register(descriptor, select.POLLOUT)
            if ready.poll(0):
                return True
    return False


class StallWatch:
    """After the first stop signal, watches the events' writes; a stalled one is interrupted by the signal again."""

    def __init__(self, descriptor: int | None, writing: Callable[[], bool], patience_s: float) -> None:
        self._descriptor = descriptor
        self._writing = writing
        self._patience_s = patience_s
        self._done = threading.Event()
        self._thread: threading.Thread | None = None
        #: set by the watcher for the handler the signal it sends runs: the write in progress is stalled
        self._verdict = False

    def start(self, signum: int) -> None:
        """Begin watching (once): called by the stop signal's handler, in the main thread."""
        if self._thread is not None or self._descriptor is None:  # a stream with no descriptor never blocks
            return
        main = threading.get_ident()
        self._thread = threading.Thread(target=self._watch, args=(signum, main), name="kvlog-stall-watch", daemon=True)
        self._thread.start()

    def stalled_write(self) -> bool:
        """In the signal handler: whether the watcher found the write now in progress stalled."""
        verdict, self._verdict = self._verdict, False
        return verdict and self._writing()

    def close(self) -> None:
        """Stop watching."""
        self._done.set()
        if self._thread is not None:
            self._thread.join()

    def _watched_write(self) -> bool:
        return self._writing() and not self._done.is_set()

    def _watch(self, signum: int, main: int) -> None:
        assert self._descriptor is not None
        while not self._done.is_set():
            if self._writing() and not moves_within(self._descriptor, self._watched_write, self._patience_s):
                self._verdict = True
                signal.pthread_kill(main, signum)  # EINTR in the blocked write; the handler runs and raises
                self._done.wait(self._patience_s)
            else:
                self._done.wait(_SAMPLE_S)
