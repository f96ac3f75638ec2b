"""The one policy for a failure of the write path: outside ``raise`` mode it loses the event, said once.

The event is the server's diagnostics, not its work: a log line must never take an inference server
down. Whatever a stream, a stdlib handler, a renderer or one of kvlog's processors raises loses that
one event, is said once on stderr and counted (``lost_events()``).
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable
from typing import ParamSpec

from kvlog.emission._forks import Locked

_P = ParamSpec("_P")


class Losses(Locked):
    """Events lost to a failure of the write path, and whether the current run of failures was said.

    Outside ``raise`` mode a failure loses the event instead of raising into the code that emitted it.
    The first failure after a success is said once on the interpreter's own stderr; ``count`` is what
    was lost since ``configure``.
    """

    def __init__(self, *, strict: bool) -> None:
        super().__init__()
        self.strict = strict
        self.count = 0
        self.failing = False

    def attempt(self, write: Callable[_P, object], *args: _P.args, **kwargs: _P.kwargs) -> None:
        """Run one write of an event: a failure loses the event (raised instead when strict).

        The write's arguments are passed along rather than closed over: no function is made per event.
        """
        try:
            write(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - raised again when strict (failed)
            self.failed(exc)
        else:
            self.failing = False

    def failed(self, exc: Exception) -> None:
        """A failure of the write path: raised again when strict, else the event is lost (and counted)."""
        if self.strict:
            raise exc
        self.lose(exc)

    def lose(self, exc: Exception) -> None:
        """Count one lost event; say why on stderr if the previous event got through."""
        with self.lock:
            self.count += 1
            first, self.failing = not self.failing, True
        if first and sys.__stderr__ is not None:
            with contextlib.suppress(Exception):
                reason = f"{type(exc).__name__}: {exc}"
                print(f"kvlog: cannot write events ({reason}); dropping them until it can", file=sys.__stderr__)
