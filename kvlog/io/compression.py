"""Compressed logs, told apart by their first bytes or their name's suffix: the one table of formats.

The format decides four things that must agree: how an input is read, how an output is written
(``-o out.log.zst`` writes zstd; ``--in-place`` writes back as the input was), which inputs
``kvlog validate`` may split by byte range (only plain files), and which files a golden corpus
counts as logs. One table keeps them in agreement: a format added here is read, written, kept
serial and walked everywhere. An input is read by its magic bytes (a rotated ``server.log.1`` that
was gzipped in place is gzip), else by its suffix (a ``.gz`` that is not gzip is then an error, not
text); an output's name is all there is to go by. zstandard is an optional extra, imported only
when a ``.zst`` file is met; without it the error says what to install.
"""

from __future__ import annotations

import gzip
import io
import stat
import sys
import zlib
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from kvlog.io.errors import InputError
from kvlog.io.inputs import STDIN, bounded_lines, open_raw
from kvlog.io.zstd_frames import ZstdFrames
from kvlog.text.printable import printable_name

#: a stream over ``raw`` that (de)compresses: given the raw stream and the file's name, for errors
_Wrap = Callable[[IO[bytes], str], AbstractContextManager[IO[bytes]]]


@dataclass(frozen=True)
class Codec:
    """One compressed format: how a stream of it is read, and how one is written."""

    read: _Wrap
    write: _Wrap
    #: whether the first bytes of a file are this format's
    starts: Callable[[bytes], bool] = lambda _: False


@contextmanager
def _read_gzip(raw: IO[bytes], _name: str) -> Iterator[IO[bytes]]:
    with gzip.GzipFile(fileobj=raw) as stream:
        yield stream  # type: ignore[misc]


@contextmanager
def _write_gzip(raw: IO[bytes], _name: str) -> Iterator[IO[bytes]]:
    with gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as stream:  # mtime 0: the same log, the same bytes
        yield stream  # type: ignore[misc]


@contextmanager
def _read_zstd(raw: IO[bytes], name: str) -> Iterator[IO[bytes]]:
    yield io.BufferedReader(ZstdFrames(raw, _zstandard(name, "reading")), 1 << 16)


@contextmanager
def _write_zstd(raw: IO[bytes], name: str) -> Iterator[IO[bytes]]:
    with _zstandard(name, "writing").ZstdCompressor().stream_writer(raw, closefd=False) as stream:
        yield stream


def _zstandard(name: str, doing: str) -> Any:
    try:
        import zstandard  # noqa: PLC0415 - an optional extra, imported only when a .zst file is met
    except ImportError:
        raise InputError(
            f"{printable_name(str(name))}: {doing} .zst needs the zstd extra: pip install 'kvlog[zstd]'"
        ) from None
    return zstandard


def _gzip_magic(head: bytes) -> bool:
    return head[:2] == b"\x1f\x8b"


def _zstd_magic(head: bytes) -> bool:
    """A zstd frame (``28 b5 2f fd``) or a skippable frame (``5?  2a 4d 18``), which a stream may start with."""
    return head[:4] == b"\x28\xb5\x2f\xfd" or (
        len(head) >= 4 and head[0] & 0xF0 == 0x50 and head[1:4] == b"\x2a\x4d\x18"
    )


#: every compressed format kvlog reads and writes, by the suffix that names it
_CODECS: dict[str, Codec] = {
    ".gz": Codec(_read_gzip, _write_gzip, _gzip_magic),
    ".zst": Codec(_read_zstd, _write_zstd, _zstd_magic),
}
_SUFFIXES = tuple(_CODECS)
#: how many first bytes tell the formats apart
_MAGIC_BYTES = 4


def is_compressed(name: str) -> bool:
    """Whether ``name`` is a compressed file (a stream: it cannot be read by byte range), by suffix or first bytes.

    A name that cannot be opened here (a store's object, a missing file) is judged by its suffix: the
    reader opens it and detects the format, or says why it cannot.
    """
    if name.endswith(_SUFFIXES):
        return True
    try:  # only a regular file is opened: a FIFO's first bytes (and its writer) are its reader's
        path = Path(name)
        if not stat.S_ISREG(path.stat().st_mode):
            return False
        with path.open("rb") as raw:
            return _by_magic(raw.read(_MAGIC_BYTES)) is not _PLAIN
    except (OSError, ValueError):
        return False


def with_compressed(suffix: str) -> tuple[str, ...]:
    """``suffix`` as it is, then followed by each compressed suffix: ``.log``, ``.log.gz``, ``.log.zst``."""
    return (suffix, *(suffix + compression for compression in _SUFFIXES))


def _as_it_is(raw: IO[bytes], _name: str) -> AbstractContextManager[IO[bytes]]:
    return nullcontext(raw)


#: a file whose name has none of the suffixes: read and written as it is
_PLAIN = Codec(_as_it_is, _as_it_is)


def _codec(name: str) -> Codec:
    return next((codec for suffix, codec in _CODECS.items() if name.endswith(suffix)), _PLAIN)


def _by_magic(head: bytes) -> Codec:
    return next((codec for codec in _CODECS.values() if codec.starts(head)), _PLAIN)


def codec_of(raw: IO[bytes], name: str) -> Codec:
    """The format of the input ``raw`` (named ``name``): by its first bytes, else by ``name``'s suffix.

    ``raw`` is left where it was: it is peeked at, or read and sought back.
    """
    peek = getattr(raw, "peek", None)
    if peek is not None:
        head = peek(_MAGIC_BYTES)[:_MAGIC_BYTES]
    elif raw.seekable():
        at = raw.tell()
        head = raw.read(_MAGIC_BYTES)
        raw.seek(at)
    else:
        head = b""
    found = _by_magic(head)
    return found if found is not _PLAIN else _codec(name)


def decompressed(raw: IO[bytes], name: str) -> AbstractContextManager[IO[bytes]]:
    """``raw`` decompressed as its first bytes say, else as ``name``'s suffix says, else as it is."""
    return codec_of(raw, name).read(raw, name)


def compressed(raw: IO[bytes], name: str) -> AbstractContextManager[IO[bytes]]:
    """What is written goes to ``raw`` compressed as ``name``'s suffix says, else as it is."""
    return _codec(name).write(raw, name)


@contextmanager
def open_binary(name: str) -> Iterator[IO[bytes]]:
    """Open the log ``name`` (``-``: standard input) for reading bytes, decompressed by its suffix."""
    if name == STDIN:
        yield sys.stdin.buffer
        return
    with open_raw(name) as raw, decompressed(raw, name) as stream:
        yield stream


def read_lines(name: str) -> Iterator[bytes]:
    """The lines of the log ``name`` with their line endings, turning decompression errors into InputError."""
    with open_binary(name) as stream:
        try:
            yield from bounded_lines(stream)
        except (OSError, EOFError, zlib.error) as exc:  # zlib.error: a corrupt deflate stream inside a .gz
            raise InputError(f"{printable_name(str(name))}: cannot read: {exc}") from None
