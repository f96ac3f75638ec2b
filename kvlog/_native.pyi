# The compiled module's interface (native/src/lib.rs), for mypy: the module itself is optional (kvlog.native).

import logging
from collections.abc import Callable

class Prefilter:
    """The byte-probe prefilter of ``kvlog.migration.candidates``, over the tables that module hands it."""

    def __init__(
        self,
        scans: tuple[tuple[bytes, tuple[tuple[int, tuple[bytes, ...], int], ...]], ...],
        json_event: bytes,
        figure_words: tuple[str, ...],
        probe_misses: int,
        /,
    ) -> None: ...
    def starts(self, data: bytes, begin: int, size: int, /) -> list[int]:
        """The sorted starts of the candidate lines of ``data[begin:size]`` (whole lines)."""

def count_lines(data: bytes, start: int, end: int, /) -> int:
    r"""``data.count(b"\n", start, end)``, sixteen bytes at a time (the passthrough's line count)."""

class Gate:
    """The live handler's probe on the server's thread (native/src/probe.rs), ``EventHandler.handle`` its reference."""

    def __init__(
        self,
        characters: str,
        usage: bool,
        candidate: Callable[[logging.LogRecord, str], None],
        reference: Callable[[logging.LogRecord], bool],
        /,
    ) -> None: ...
    def probe(self, message: str, /) -> bool | None:
        """``might_be_read(message, usage=...)``; None for a message that is no UTF-8 (a lone surrogate)."""
    @property
    def handle(self) -> Callable[[logging.LogRecord], bool]:
        """``handle(record)``: True, never an ``Exception``; a candidate to ``candidate``, the rest to ``reference``."""

class EventDecoders:
    """``kvlog validate``'s native fast path, over a decoder table (``kvlog.schema.decoders.for_catalog``)."""

    def __init__(self, table: bytes, /) -> None: ...
    def rejected(self, data: bytes, begin: int, end: int, max_line: int, /) -> tuple[int, list[tuple[int, int, int]]]:
        """The lines of ``data[begin:end]``: how many, and ``(index, start, stop)`` of each one not accepted."""
    def accepts_line(self, line: bytes, /) -> bool:
        """Whether one line is accepted as a valid event the Python path would find no problem in."""
