"""The encoders (a ``Record`` to the bytes of one output format) and ``Written``, ``migrate``'s sink.

An encoder has one job: the line of one record, without its line ending, in ``jsonl``, ``text`` or
``legacy`` wording. It raises ``MigrationError`` when the record cannot be written so (an event
nested deeper than JSON is written, a wording with no template for it): the engine then rejects the
line and copies it through, as it does an event that fails validation.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import IO

import orjson

from kvlog.io import jsonline
from kvlog.migration.errors import MigrationError
from kvlog.migration.legacy import LegacyRenderer, text_line
from kvlog.migration.records import Record
from kvlog.migration.report import MigrationReport

Encoder = Callable[[Record], bytes]


def jsonl(record: Record) -> bytes:
    """The JSON line of the event; one already written at the version asked for keeps its bytes."""
    if record.verbatim:
        return record.raw.rstrip(b"\r\n")
    try:
        return jsonline.dumps(record.event)
    except orjson.JSONEncodeError as exc:  # steps nested it deeper than JSON is written
        raise MigrationError(f"the migrated event cannot be written: {exc}") from None


def text(record: Record) -> bytes:
    """The line ``--format text`` writes for the event, with the text glued around the line kept."""
    return _glued(record, text_line(record.event))


def _glued(record: Record, line: str) -> bytes:
    """A wording of the event with the text glued before and after its input line (a progress bar's carriage return)."""
    before, after = record.glue
    return f"{before}{line}{after}".encode()


class Legacy:
    """The line an old server version printed for the event (``LegacyRenderer`` chooses the wording)."""

    def __init__(self, renderer: LegacyRenderer) -> None:
        self.renderer = renderer

    def __call__(self, record: Record) -> bytes:
        return _glued(record, self.renderer.line(record.event))


class Written:
    """``migrate``'s downstream: lines no rule reads written as read, each record encoded and written.

    With ``only_events`` every event is a line of its own; otherwise it keeps its input line's ending
    (a last line without one stays without). ``report`` learns which lines were written differently.
    """

    def __init__(self, encode: Encoder, out: IO[bytes], report: MigrationReport, *, only_events: bool) -> None:
        self.encode = encode
        self.out = out
        self.report = report
        self.only_events = only_events
        self.passthrough = out.write

    def record(self, record: Record) -> None:
        raw = record.raw
        if record.verbatim and not self.only_events:
            line = raw
        else:
            line = self.encode(record) + (b"\n" if self.only_events or raw.endswith(b"\n") else b"")
        if line != raw:
            self.report.changed_lines += 1
        self.out.write(line)
