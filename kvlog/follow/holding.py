"""The bounded look-ahead in time: how long an event read from a live log may wait for a later line.

``kvlog migrate`` bounds the post-capture look-ahead by lines; a live log (``kvlog follow``, the logging
handler of ``kvlog integrate``) may go quiet for hours after the line that would settle an event, so
there each event waits at most ``hold_s`` seconds after its line was read, then is written as it stands
with the bound in ``migrated.inferred``.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the options that name the default (``--hold``) import this without the engine
    from kvlog.migration.engine import FileRun

#: how long an event waits by default (``--hold`` of ``kvlog follow`` and ``kvlog integrate``)
HOLD_S = 300.0


class Holding:
    """When each piece of one run's lines was read, to release what waited longer than ``hold_s``."""

    def __init__(self, hold_s: float) -> None:
        self.hold_s = hold_s
        self.bound = f"{hold_s:g} s"
        #: (lines read, monotonic time) after each piece
        self._read_at: deque[tuple[int, float]] = deque()

    def read(self, run: FileRun, now: float) -> None:
        """``run`` was fed a piece at ``now``."""
        self._read_at.append((run.number, now))

    def expire(self, run: FileRun, now: float) -> None:
        """Write, as they stand, the events of ``run`` whose lines were read ``hold_s`` or more before ``now``."""
        limit, waited = now - self.hold_s, 0
        while self._read_at and self._read_at[0][1] <= limit:
            waited = self._read_at.popleft()[0]
        if waited and run.held:
            run.release_through(waited, self.bound)
