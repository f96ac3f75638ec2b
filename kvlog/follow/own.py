"""The files a follower writes, known by device and inode: never read back as logs, whatever names they get.

``kvlog follow 'logs/*' -o logs/events.jsonl`` names its own output. Excluded by name, it is read as
soon as it has another one: logrotate renames it (``events.jsonl.1``) while the follower writes on in
the open file, or a hard link names it in the pattern; the follower would then read its own events,
write them again, read those, without end, until the disk is full. So each file the process writes
is known by its identity, from its open descriptor: the events, standard output and standard error
(the notices, which quote each dead letter's line), the state's lock, and the state, a new file at
each save. Each saved state is held open while a name still links it (renamed or linked into a
pattern), so its inode is not reused by a log while it is excluded; one replaced by the next save is
let go.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from kvlog.io.tailing import FileKey

#: standard output and standard error: the process's own outputs wherever they are redirected
_STANDARD = (1, 2)


class OwnFiles:
    """The identities of every file this follower writes, as of now (``keys``)."""

    def __init__(self, *descriptors: int | None) -> None:
        #: open for the follower's life by their owners (the events, the state's lock)
        self._descriptors = tuple(descriptor for descriptor in descriptors if descriptor is not None)
        #: the saved states, each held while a name links it
        self._states: list[int] = []

    def saved(self, path: Path) -> None:
        """A state was just saved at ``path``: hold it, and let go of the earlier ones no name links any more."""
        with contextlib.suppress(OSError):  # renamed away at once: the next save is held
            self._states.append(os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC))
        self._states = [descriptor for descriptor in self._states if self._linked(descriptor)]

    def keys(self) -> frozenset[FileKey]:
        """The identities of the files written now: taken again at each call, as a descriptor may be moved."""
        found = set()
        for descriptor in (*self._descriptors, *_STANDARD, *self._states):
            with contextlib.suppress(OSError):  # a standard stream closed (``2>&-``)
                status = os.fstat(descriptor)
                found.add(FileKey(status.st_dev, status.st_ino))
        return frozenset(found)

    def close(self) -> None:
        """Let go of the saved states held."""
        for descriptor in self._states:
            os.close(descriptor)
        self._states.clear()

    def _linked(self, descriptor: int) -> bool:
        if os.fstat(descriptor).st_nlink:
            return True
        os.close(descriptor)
        return False
