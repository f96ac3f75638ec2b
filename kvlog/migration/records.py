"""What the engine hands on: a ``Record`` per event, between the transform and the encoders and sinks.

The engine (``kvlog.migration.engine.FileRun``) is the transform: it reads lines, migrates and
validates their events, and gives its ``Downstream``, in input order after the look-ahead, the bytes
of the lines no rule reads (as read, without a copy) and a ``Record`` for each event. What becomes of
them is the downstream's job alone: ``kvlog migrate`` encodes and writes them
(``kvlog.migration.encoders``), ``kvlog follow`` and the live handler tell their observers the event
itself, so that no consumer parses back the bytes its own process wrote (``docs/pipeline.md``).
"""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol


class Record(NamedTuple):
    """One event the engine read and validated, with where it came from.

    ``event`` is at the version the output asks for (``--to-catalog``'s for JSON lines; the newest,
    which text and legacy wordings render) in the written key order, and carries no key of kvlog's
    own: what the engine knows of the line travels in the other fields. A named tuple, immutable as a
    frozen dataclass is, at a quarter of the cost of building one: every event written builds a record.
    """

    event: dict[str, Any]
    #: the input line the event was read from (a correction's: the line that made it)
    line: int
    #: that line's bytes as read, with its line ending
    raw: bytes
    #: the wording or format the event was read from (``sglang-text/2024-10``, ``kvlog-jsonl/v3``)
    source_format: str
    #: the version of the event the line said (None: an event no input line stands for, a correction)
    source_version: int | None
    #: text glued before and after the line's message (a progress bar's carriage return): kept in text output
    glue: tuple[str, str] = ("", "")
    #: ``raw`` is the event as the output writes it (an event already at the version asked for): copied
    verbatim: bool = False


class Downstream(Protocol):
    """Where a ``FileRun`` hands what it read, in input order: the stage after the transform.

    ``passthrough`` takes the bytes of lines no rule reads (a ``memoryview`` of the block read, not
    to be kept past the call); ``record`` takes each event, and raises ``MigrationError`` when it
    cannot write it in its format: the engine then rejects the line and passes its bytes through.
    """

    def passthrough(self, data: bytes | memoryview, /) -> object: ...

    def record(self, record: Record, /) -> None: ...
