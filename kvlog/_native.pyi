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

def count_lines(data: bytes, start: int, end: int, /) -> int:
    r"""``data.count(b"\n", start, end)``, sixteen bytes at a time (the passthrough's line count)."""
