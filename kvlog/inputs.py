"""Opening log inputs: plain files, standard input, gzip and zstd, always as bytes.

Logs are read as bytes so that a line that is not valid UTF-8 (they exist in real logs) can be
reported or passed through untouched instead of crashing a decoder.
"""

from __future__ import annotations

import gzip
import io
import sys
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from kvlog.errors import KvlogError

STDIN = "-"


class InputError(KvlogError):
    """An input cannot be opened or read; the message names it and says why."""


@contextmanager
def open_binary(name: str) -> Iterator[IO[bytes]]:
    """Open ``name`` for reading bytes, decompressing ``.gz`` and ``.zst`` by their suffix."""
    if name == STDIN:
        yield sys.stdin.buffer
        return
    path = Path(name)
    if path.is_dir():
        raise InputError(f"{name}: is a directory")
    try:
        raw = path.open("rb")
    except OSError as exc:
        raise InputError(f"{name}: cannot open: {exc.strerror}") from None
    with raw:
        if path.suffix == ".gz":
            with gzip.GzipFile(fileobj=raw) as stream:
                yield stream  # type: ignore[misc]
        elif path.suffix == ".zst":
            with _zstd_reader(name, raw) as stream:
                yield stream
        else:
            yield raw


@contextmanager
def _zstd_reader(name: str, raw: IO[bytes]) -> Iterator[IO[bytes]]:
    try:
        import zstandard  # noqa: PLC0415 - an optional extra, imported only when a .zst file is read
    except ImportError:
        raise InputError(f"{name}: reading .zst needs the zstd extra: pip install 'kvlog[zstd]'") from None
    yield io.BufferedReader(_ZstdFrames(raw, zstandard), 1 << 16)


class _ZstdFrames(io.RawIOBase):
    """The concatenated frames of a zstd stream, and an error where the stream ends inside one.

    zstandard's own ``stream_reader`` treats a truncated file as complete (a cut-off log would be
    read as empty, and ``--in-place`` would replace it with nothing) and cannot be iterated by line.
    The errors are those gzip raises for the same damage: EOFError when truncated, OSError when corrupt.
    """

    def __init__(self, raw: IO[bytes], zstandard: Any) -> None:
        self._raw = raw
        self._zstandard = zstandard
        self._frame = zstandard.ZstdDecompressor().decompressobj()
        self._pending = b""
        self._started = False  # whether the current frame has received any input

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        while not self._pending:
            compressed = self._raw.read(1 << 16)
            if not compressed:
                if self._started and not self._frame.eof:
                    raise EOFError("the zstd stream ends inside a frame (truncated)")
                return 0
            self._pending = self._decompress(compressed)
        count = min(len(view), len(self._pending))
        view[:count] = self._pending[:count]
        self._pending = self._pending[count:]
        return count

    def _decompress(self, compressed: bytes) -> bytes:
        out = b""
        while compressed:
            if self._frame.eof:  # the next frame of a concatenation
                self._frame = self._zstandard.ZstdDecompressor().decompressobj()
            self._started = True
            try:
                out += self._frame.decompress(compressed)
            except self._zstandard.ZstdError as exc:
                raise OSError(f"corrupt zstd data: {exc}") from None
            compressed = self._frame.unused_data if self._frame.eof else b""
        return out


def read_lines(name: str) -> Iterator[bytes]:
    """The lines of ``name`` with their line endings, turning decompression errors into InputError."""
    with open_binary(name) as stream:
        try:
            yield from stream
        except (OSError, EOFError, zlib.error) as exc:  # zlib.error: a corrupt deflate stream inside a .gz
            raise InputError(f"{name}: cannot read: {exc}") from None
