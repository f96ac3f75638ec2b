"""Opening log inputs: plain files, standard input, gzip and zstd, always as bytes.

Logs are read as bytes so that a line that is not valid UTF-8 (they exist in real logs) can be
reported or passed through untouched instead of crashing a decoder.
"""

from __future__ import annotations

import gzip
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

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
    with zstandard.ZstdDecompressor().stream_reader(raw) as stream:
        yield stream


def read_lines(name: str) -> Iterator[bytes]:
    """The lines of ``name`` with their line endings, turning decompression errors into InputError."""
    with open_binary(name) as stream:
        try:
            yield from stream
        except (OSError, EOFError) as exc:
            raise InputError(f"{name}: cannot read: {exc}") from None
