"""Every exception the I/O layer raises, in one module (as httpx's ``_exceptions.py``).

One place to look up what a read, a write, a worker or a stop can raise, and a leaf that every module
of ``kvlog.io`` imports from: no module has to import another (``outputs`` from ``store``, ``store``
from ``outputs``) only for its exception, which is how the layer's import cycle came about.
"""

from __future__ import annotations

import signal

from kvlog.errors import KvlogError, NamesOptions


class InputError(KvlogError):
    """An input cannot be opened or read; the message names it and says why."""


class OutputError(KvlogError):
    """An output (a migrated file, the report, the dead letters) cannot be written; the message names it."""


class ReplaceRefused(NamesOptions):
    """The log was left as it was, for the reason given: replacing it could lose a line or the backup."""


class WorkerDied(KvlogError):
    """A worker process ended before its task did; the results not yet yielded are lost."""


class LineError(ValueError):
    """A line orjson parses that cannot be read faithfully; the message says why, for a finding."""


class TooDeep(LineError):
    """Nesting deeper than ``kvlog.io.jsonline.MAX_DEPTH``: orjson read it but cannot write it back."""


class Stopped(BaseException):
    """A stop signal arrived. A BaseException, like KeyboardInterrupt: no ``except Exception`` swallows it."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum

    @property
    def exit_status(self) -> int:
        """What shells expect of a process a signal stopped: 128 + the signal."""
        return 128 + self.signum


class ReaderGone(Stopped):
    """The reader of an output (standard output's pipe: ``kvlog migrate big.log | head -1``) closed it.

    Python ignores SIGPIPE, so a write there fails with EPIPE instead of ending the process as it ends
    ``cat`` or ``grep``. Raised in its place, it stops the whole run as that signal would (not one
    input, to fail again on the next), through the same cleanup as a stop signal: no temporary file is
    left, nothing more is said (no summary claims a run that did not finish), and the exit status is
    the shells' for a process SIGPIPE ended, 128 + 13 = 141.
    """

    def __init__(self) -> None:
        super().__init__(signal.SIGPIPE)


__all__ = ["InputError", "LineError", "OutputError", "ReaderGone", "ReplaceRefused", "Stopped", "TooDeep", "WorkerDied"]
