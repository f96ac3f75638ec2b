"""Reading a ``.zst`` log in bounded memory and linear time, with an error where it is cut short.

zstandard's ``stream_reader`` decompresses a bounded amount per read (a 32 KB bomb that expands to
1 GiB costs no more memory than any other file), but it reads a stream that stops inside a frame as
complete: a cut-off log would be migrated as a shorter one, and ``--in-place`` would replace the
original with it. So the compressed bytes pass through ``_FrameEdges`` on their way in, which
follows the frame and block headers (RFC 8878) just far enough to know whether the stream stopped
at the end of a frame. The errors are those gzip raises for the same damage: EOFError when
truncated, OSError when corrupt.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import IO, Any

_READ_BYTES = 1 << 16
_ZSTD_MAGIC = 0xFD2FB528
_SKIPPABLE_MAGIC = range(0x184D2A50, 0x184D2A60)
_DICTIONARY_ID_BYTES = (0, 1, 2, 4)
_CONTENT_SIZE_BYTES = (0, 2, 4, 8)  # the first is 1 for a single-segment frame
_RLE_BLOCK = 1
#: zstd's own limit on the window a frame may need, 128 MiB: what bounds the memory a .zst costs to read
_WINDOW_REFUSED = "Frame requires too much memory"
_WINDOW_ADVICE = (
    "it was written with a window over 128 MiB (zstd --long=28 or more), which zstd itself will not read "
    "by default; decompress it first with zstd -d --long=31"
)


class ZstdFrames(io.RawIOBase):
    """The decompressed bytes of every frame of a zstd stream (skippable frames are skipped)."""

    def __init__(self, raw: IO[bytes], zstandard: Any) -> None:
        self._source = _FrameEdges(raw)
        self._reader = zstandard.ZstdDecompressor().stream_reader(
            self._source, read_size=_READ_BYTES, read_across_frames=True
        )
        self._corrupt: type[Exception] = zstandard.ZstdError

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        try:
            count: int = self._reader.readinto(buffer)
        except self._corrupt as exc:
            if _WINDOW_REFUSED in str(exc):
                raise OSError(f"{exc}: {_WINDOW_ADVICE}") from None
            raise OSError(f"corrupt zstd data: {exc}") from None
        if count == 0:
            self._source.check_complete()
        return count


class _FrameEdges:
    """A zstd stream's compressed bytes, read through, and whether they stopped between frames.

    Only headers are looked at: a block's content is skipped by its size, so the cost is a few
    operations per block of up to 128 KiB. Whatever the headers do not describe is left to the
    decompressor, which reads the same bytes and raises for them.
    """

    def __init__(self, raw: IO[bytes]) -> None:
        self._raw = raw
        self._offset = 0  # of the next byte to read
        self._header = bytearray()  # the part of the header being read that has arrived
        self._wanted = 4  # its length
        self._step: Callable[[int, int], None] = self._frame_start  # what the header is, given it and its end
        self._skip = 0  # content bytes to pass before the next header
        self._checksum = 0  # bytes after the last block of the current frame
        self._ended = False

    def read(self, size: int = -1) -> bytes:
        data = self._raw.read(size)
        if not data:
            self._ended = True
        self._follow(memoryview(data))
        self._offset += len(data)
        return data

    def check_complete(self) -> None:
        """Raise EOFError if the stream ends inside a frame, OSError if the decompressor stopped before its end."""
        stopped = self._offset
        if not self._ended and self.read(_READ_BYTES):
            raise OSError(f"corrupt zstd data: the decompressor stopped at byte {stopped}, before the end")
        if self._header or self._skip or self._step != self._frame_start:
            raise EOFError(f"the zstd stream ends inside a frame (truncated at byte {self._offset})")

    def _follow(self, data: memoryview) -> None:
        position = 0
        while position < len(data):
            if self._skip:
                passed = min(self._skip, len(data) - position)
                self._skip -= passed
                position += passed
                continue
            taken = min(self._wanted - len(self._header), len(data) - position)
            self._header += data[position : position + taken]
            position += taken
            if len(self._header) == self._wanted:
                header = int.from_bytes(self._header, "little")
                self._header.clear()
                self._step(header, self._offset + position)

    def _expect(self, length: int, step: Callable[[int, int], None]) -> None:
        self._wanted, self._step = length, step

    def _frame_start(self, magic: int, offset: int) -> None:
        if magic == _ZSTD_MAGIC:
            self._expect(1, self._frame_header)
        elif magic in _SKIPPABLE_MAGIC:
            self._expect(4, self._skippable_size)
        else:
            raise OSError(f"corrupt zstd data: no frame starts at byte {offset - 4}")

    def _skippable_size(self, size: int, _offset: int) -> None:
        self._skip = size
        self._expect(4, self._frame_start)

    def _frame_header(self, descriptor: int, _offset: int) -> None:
        single_segment = descriptor >> 5 & 1
        content_size = _CONTENT_SIZE_BYTES[descriptor >> 6] or single_segment
        rest = (1 - single_segment) + _DICTIONARY_ID_BYTES[descriptor & 3] + content_size
        self._checksum = 4 * (descriptor >> 2 & 1)
        if rest:
            self._expect(rest, self._header_rest)
        else:
            self._expect(3, self._block)

    def _header_rest(self, _fields: int, _offset: int) -> None:
        self._expect(3, self._block)

    def _block(self, header: int, _offset: int) -> None:
        self._skip = 1 if header >> 1 & 3 == _RLE_BLOCK else header >> 3
        if header & 1:  # the frame's last block
            self._skip += self._checksum
            self._expect(4, self._frame_start)
