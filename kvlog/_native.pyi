# The compiled module's interface (native/src/lib.rs), for mypy: the module itself is optional (kvlog.native).

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

class EventDecoders:
    """``kvlog validate``'s native fast path, over a decoder table (``kvlog.schema.decoders.for_catalog``)."""

    def __init__(self, table: bytes, /) -> None: ...
    def rejected(self, data: bytes, begin: int, end: int, max_line: int, /) -> tuple[int, list[tuple[int, int, int]]]:
        """The lines of ``data[begin:end]``: how many, and ``(index, start, stop)`` of each one not accepted."""
    def accepts_line(self, line: bytes, /) -> bool:
        """Whether one line is accepted as a valid event the Python path would find no problem in."""
