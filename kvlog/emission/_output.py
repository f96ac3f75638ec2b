"""Output to a stream: the wrapped logger that writes each rendered line, and the renderer a stream takes.

As structlog's ``_output`` loggers, the writer knows nothing of events: it writes what the processors
rendered, flushes it, and hands a failure to the loss policy.
"""

from __future__ import annotations

import io
from typing import IO, Any

from structlog.typing import Processor

from kvlog.emission import _render
from kvlog.emission._forks import Locked
from kvlog.emission._losses import Losses
from kvlog.emission._render import Output


class LineWriter(Locked):
    """The wrapped logger: writes each rendered line (bytes or str, newline included) and flushes it.

    A line that cannot be written (a full disk, a closed file or pipe, a stream that raises anything
    else) is lost and counted by ``losses``, unless strict.
    """

    def __init__(self, stream: IO[Any], owner: IO[Any], losses: Losses) -> None:
        super().__init__()
        self.owner = owner  # held: a text wrapper that is garbage-collected closes the buffer we write to
        self.stream = stream
        self._write = stream.write
        self._flush = stream.flush
        self.losses = losses

    def after_fork(self) -> None:
        """Also write through a fresh buffer on the same file descriptor, if the stream is a file's.

        ``io``'s buffered streams have a lock of their own, which Python cannot re-create: held by a
        thread blocked in a write at the fork (a full pipe, a slow disk), it would stop the child's
        first line. The parent's unflushed bytes stay the parent's to write.
        """
        super().after_fork()
        fresh = _reopened(self.stream)
        if fresh is not None:
            self.stream, self._write, self._flush = fresh, fresh.write, fresh.flush

    @property
    def lost(self) -> int:
        """Events lost since ``configure``, in writing or before it."""
        return self.losses.count

    def msg(self, line: bytes | str) -> None:
        """Write and flush one line (``Losses.attempt``, spelled out: this runs for every event written)."""
        with self.lock:
            try:
                self._write(line)
                self._flush()
            except Exception as exc:  # noqa: BLE001 - raised again when strict (Losses.failed)
                self.losses.failed(exc)
            else:
                self.losses.failing = False

    debug = info = warning = error = critical = exception = msg


def _reopened(stream: IO[Any]) -> IO[Any] | None:
    """A new buffered stream, of the same kind, on ``stream``'s file descriptor; None if it has none."""
    if not isinstance(stream, io.BufferedWriter | io.BufferedRandom | io.TextIOWrapper):
        return None
    try:
        raw = io.FileIO(stream.fileno(), "w", closefd=False)
    except (OSError, ValueError):  # no descriptor (or closed): nothing of Python's to re-create
        return None
    if isinstance(stream, io.TextIOWrapper):
        return io.TextIOWrapper(io.BufferedWriter(raw), encoding=stream.encoding, errors=stream.errors)
    return io.BufferedWriter(raw)


def target(stream: IO[str] | IO[bytes], output: Output) -> tuple[IO[Any], Processor]:
    """Where lines go and the renderer that writes them there: bytes if the stream takes bytes."""
    if output == "console":
        if isinstance(stream, io.RawIOBase | io.BufferedIOBase):
            return stream, _render.console_bytes_line
        return stream, _render.console_text_line
    if isinstance(stream, io.TextIOBase):
        buffer = getattr(stream, "buffer", None)
        if buffer is None:
            return stream, _render.json_text_line
        stream.flush()
        return buffer, _render.json_line
    return stream, _render.json_line
