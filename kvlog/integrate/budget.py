"""The bytes kvlog's logging handler may hold in a server process: its queue and its look-ahead together.

A count of records bounds nothing when a record may be a megabyte (the handler's probe passes almost
any message), and an event waiting for its post-capture line (up to ``--hold``) keeps every record read
since. So each record is charged from the moment the server's thread queues it until every line of it
is written: its message, and ``LINE_BYTES`` a line for what the handler and the engine keep of it
meanwhile (the record, its line number, a held event: measured at about 3.3 KB for an event line,
0.2 KB for another). A record the budget cannot take is dropped and counted.
"""

from __future__ import annotations

import sys
import threading

from kvlog.migration.candidates import MAX_LINE_BYTES

#: the default budget of one server process (``--max-held``): some 16,000 records held at once
MAX_HELD_BYTES = 64 << 20
#: the least budget that takes a record of the longest line the engine reads
MIN_HELD_BYTES = 1 << 20
#: what a line of a record costs beyond its characters while it is held (see the module's docstring)
LINE_BYTES = 4096


def readable(message: str) -> str:
    """``message`` without what the engine would never read: lines longer than it parses are kept empty.

    A line of more than ``MAX_LINE_BYTES`` characters is longer than that in UTF-8 too: the engine
    copies it unparsed, and only counts it. Holding its characters meanwhile (a configuration dumped
    in one record, a tensor's repr) would take the budget the memory lines need.
    """
    if len(message) <= MAX_LINE_BYTES:
        return message
    return "\n".join("" if len(line) > MAX_LINE_BYTES else line for line in message.split("\n"))


def cost(message: str) -> int:
    """What a record of ``message`` is charged while it is held."""
    return sys.getsizeof(message) + LINE_BYTES * (message.count("\n") + 1)


class Budget:
    """Bytes held, taken by the server's threads and given back by the worker; never more than ``limit``."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held = 0
        #: the most held at once (``benchmarks/bench_integrate_held.py`` reports it)
        self.peak = 0
        self._lock = threading.Lock()

    def take(self, size: int) -> bool:
        """Hold ``size`` more bytes, if the budget has them."""
        with self._lock:
            if self.held + size > self.limit:
                return False
            self.held += size
            self.peak = max(self.peak, self.held)
            return True

    def give(self, size: int) -> None:
        with self._lock:
            self.held -= size
