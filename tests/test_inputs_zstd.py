"""Compressed logs read in bounded memory and linear time, and never read as complete when cut short.

Issue 9, item 8: the ``.zst`` reader decompressed each 64 KiB of input whole and copied what was
left on every read, so a 32 KB file that expands to 1 GiB took 2.1 GB of memory and a 64 MiB log
took 23-42 s. Memory is measured as the peak resident size (VmHWM) of a real ``kvlog`` process;
linearity as the bytes Python allocates per byte read (tracemalloc), which is the copying the old
reader did, and which does not depend on the machine's load. Speed against ``.gz`` is in
``benchmarks/bench_zstd.py``.
"""

from __future__ import annotations

import gzip
import io
import tracemalloc
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import zstandard
from test_untrusted_content import run_bounded

from kvlog.io.compression import open_binary, read_lines
from kvlog.io.errors import InputError
from kvlog.io.zstd_frames import ZstdFrames
from kvlog.migration.candidates import BLOCK_BYTES

GIB = 1 << 30
MIB = 1 << 20
PEAK_LIMIT = 200 * MIB  # a kvlog process reading a small file peaks near 40 MiB
LOG_LINE = b"[2025-06-03 11:20:41 TP0] Decode batch. #running-req: 12, #token: 4096, token usage: 0.01\n"


def compress_chunks(chunks: Iterator[bytes], suffix: str) -> bytes:
    """``chunks`` compressed as one frame or member, without holding them all (a bomb is 1 GiB)."""
    if suffix == ".gz":
        encoder = zlib.compressobj(9, zlib.DEFLATED, 31)  # 31: a gzip member
        return b"".join(encoder.compress(chunk) for chunk in chunks) + encoder.flush()
    writer = zstandard.ZstdCompressor(level=19).compressobj()
    return b"".join(writer.compress(chunk) for chunk in chunks) + writer.flush()


def repeated(piece: bytes, total: int) -> Iterator[bytes]:
    block = piece * (MIB // len(piece))
    for _ in range(total // len(block)):
        yield block


#: what each format expands from a few tens (zstd) or hundreds (gzip) of KB; both above PEAK_LIMIT
BOMB_BYTES = {".zst": GIB, ".gz": GIB // 4}


@pytest.fixture(scope="module", params=sorted(BOMB_BYTES))
def bombs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One endless line of zeros, and lines of 64 KiB."""
    suffix: str = request.param
    directory = tmp_path_factory.mktemp(f"bomb{suffix}")
    made = {
        "endless": (directory / f"endless.log{suffix}", repeated(b"\0", BOMB_BYTES[suffix])),
        "lines": (directory / f"lines.jsonl{suffix}", repeated(b"x" * (BLOCK_BYTES - 1) + b"\n", BOMB_BYTES[suffix])),
    }
    for path, chunks in made.values():
        path.write_bytes(compress_chunks(chunks, suffix))
    return {name: path for name, (path, _) in made.items()}


def decompressed_size(path: Path) -> int:
    with open_binary(str(path)) as stream:
        return sum(len(chunk) for chunk in iter(lambda: stream.read(MIB), b""))


def test_migrate_reads_a_decompression_bomb_in_bounded_memory(bombs: dict[str, Path], tmp_path: Path) -> None:
    bomb = bombs["endless"]
    suffix = bomb.suffix
    assert bomb.stat().st_size < BOMB_BYTES[suffix] // 1000
    status, _, stderr, peak = run_bounded(["migrate", str(bomb), "-o", f"out.log{suffix}"], tmp_path)
    assert status == 0, stderr
    assert peak < PEAK_LIMIT, f"migrate peaked at {peak >> 20} MiB on a {bomb.stat().st_size >> 10} KiB file"
    assert decompressed_size(tmp_path / f"out.log{suffix}") == BOMB_BYTES[suffix], "the line was not copied whole"


def test_validate_reads_a_decompression_bomb_in_bounded_memory(bombs: dict[str, Path], tmp_path: Path) -> None:
    bomb = bombs["lines"]
    status, _, stderr, peak = run_bounded(["validate", "--skip-non-json", str(bomb)], tmp_path)
    assert status == 0, stderr
    assert f"{BOMB_BYTES[bomb.suffix] // BLOCK_BYTES} skipped".encode() in stderr, stderr
    assert peak < PEAK_LIMIT, f"validate peaked at {peak >> 20} MiB on a {bomb.stat().st_size >> 10} KiB file"


def test_validate_reads_past_an_endless_line_in_bounded_memory(bombs: dict[str, Path], tmp_path: Path) -> None:
    """One line of 1 GiB (.zst) or 256 MiB (.gz): one finding naming its length, never held whole."""
    bomb = bombs["endless"]
    status, stdout, stderr, peak = run_bounded(["validate", str(bomb)], tmp_path)
    assert status == 1, stderr
    assert f"a line of {BOMB_BYTES[bomb.suffix]} bytes, over the 16 MiB".encode() in stdout, stdout[:300]
    assert peak < PEAK_LIMIT, f"validate peaked at {peak >> 20} MiB on one line of {BOMB_BYTES[bomb.suffix] >> 20} MiB"


def windowed(window_log: int, total: int) -> bytes:
    """``total`` zeros as one frame that declares a ``2**window_log``-byte window (``zstd --long``)."""
    parameters = zstandard.ZstdCompressionParameters.from_level(3, window_log=window_log, enable_ldm=True)
    writer = zstandard.ZstdCompressor(compression_params=parameters).compressobj()
    return b"".join(writer.compress(chunk) for chunk in repeated(b"\0", total)) + writer.flush()


def test_a_zst_bomb_with_the_largest_window_zstd_reads_stays_in_bounded_memory(tmp_path: Path) -> None:
    """The decoder holds one window: 128 MiB at most, zstd's default limit, whatever the file declares."""
    (tmp_path / "long.log.zst").write_bytes(windowed(27, GIB // 4))
    status, _, stderr, peak = run_bounded(["migrate", "long.log.zst", "-o", "out.log.zst"], tmp_path)
    assert status == 0, stderr
    assert peak < PEAK_LIMIT, f"migrate peaked at {peak >> 20} MiB"
    assert decompressed_size(tmp_path / "out.log.zst") == GIB // 4


def test_a_zst_frame_that_needs_a_larger_window_is_refused_with_advice(tmp_path: Path) -> None:
    (tmp_path / "longer.log.zst").write_bytes(windowed(28, 16 * MIB))
    for command in (["migrate", "longer.log.zst", "-o", "out.log"], ["validate", "longer.log.zst"]):
        status, _, stderr, peak = run_bounded(command, tmp_path)
        assert status == 2, stderr
        assert b"longer.log.zst: cannot read" in stderr and b"zstd -d --long=31" in stderr, stderr
        assert peak < PEAK_LIMIT
    assert not (tmp_path / "out.log").exists()


def skippable(content: bytes) -> bytes:
    return (0x184D2A53).to_bytes(4, "little") + len(content).to_bytes(4, "little") + content


def streamed(data: bytes, **options: object) -> bytes:
    """A frame as a pipe into ``zstd`` makes it: no content size in the header."""
    writer = zstandard.ZstdCompressor(**options).compressobj()  # type: ignore[arg-type]
    return writer.compress(data) + writer.flush()


#: frames of every kind a .zst log holds, and what each decompresses to
FRAMES = [
    (skippable(b"metadata"), b""),
    (zstandard.ZstdCompressor(write_checksum=True).compress(LOG_LINE * 40), LOG_LINE * 40),
    (streamed(LOG_LINE * 3, write_checksum=False), LOG_LINE * 3),
    (zstandard.ZstdCompressor().compress(b""), b""),
    (zstandard.ZstdCompressor(level=19).compress(b"\0" * 300_000 + b"\n"), b"\0" * 300_000 + b"\n"),
    (streamed(bytes(range(256)) * 8 + b"\n", level=1, write_checksum=True), bytes(range(256)) * 8 + b"\n"),
    (skippable(b""), b""),
]


def test_every_cut_of_a_zst_stream_is_an_error_unless_it_falls_between_frames(tmp_path: Path) -> None:
    """A log cut anywhere inside a frame (header, block header, block, checksum) is never read as complete."""
    stream = b"".join(frame for frame, _ in FRAMES)
    complete = {0: b""}
    end, content = 0, b""
    for frame, data in FRAMES:
        end, content = end + len(frame), content + data
        complete[end] = content
    source = tmp_path / "log.zst"
    for cut in range(len(stream) + 1):
        source.write_bytes(stream[:cut])
        if cut in complete:
            assert b"".join(read_lines(str(source))) == complete[cut], f"cut at byte {cut} of {len(stream)}"
        else:
            with pytest.raises(InputError, match=r"log\.zst: cannot read: .* ends inside a frame"):
                b"".join(read_lines(str(source)))


@pytest.mark.parametrize(
    "garbage",
    [
        b"this is not zstd\n",
        b"\x28\xb5\x2f\xfd\x08" + b"\0" * 20,  # a frame header with its reserved bit set
        b"\x28\xb5\x2f\xfd\x00\x00\x07\x00\x00" + b"\0" * 20,  # a block of the reserved type
        FRAMES[1][0][:-30] + b"\0" * 30,  # a frame whose last bytes are wrong
    ],
    ids=["text", "bad header", "bad block type", "bad block"],
)
def test_corrupt_zst_data_after_good_frames_is_an_error(tmp_path: Path, garbage: bytes) -> None:
    source = tmp_path / "log.zst"
    source.write_bytes(FRAMES[1][0] + garbage)
    with pytest.raises(InputError, match=r"log\.zst: cannot read: corrupt zstd data"):
        b"".join(read_lines(str(source)))


def by_lines(path: Path) -> Iterator[bytes]:
    """How ``kvlog validate`` reads a compressed input."""
    yield from read_lines(str(path))


def by_blocks(path: Path) -> Iterator[bytes]:
    """How ``kvlog migrate`` reads one."""
    with open_binary(str(path)) as stream:
        yield from iter(lambda: stream.read(BLOCK_BYTES), b"")


#: (what a log holds, that log as .zst): every way the old reader copied more the more a piece expanded
SHAPES: dict[str, Callable[[], tuple[bytes, bytes]]] = {
    "one frame of log lines": lambda: (
        LOG_LINE * (8 * MIB // len(LOG_LINE)),
        zstandard.ZstdCompressor(level=19).compress(LOG_LINE * (8 * MIB // len(LOG_LINE))),
    ),
    "frames of 1 MiB with skippable frames between": lambda: (
        b"".join(repeated(LOG_LINE, 8 * MIB)),
        b"".join(
            zstandard.ZstdCompressor().compress(block) + skippable(b"x" * 100) for block in repeated(LOG_LINE, 8 * MIB)
        ),
    ),
    "one long line": lambda: (b"\0" * 8 * MIB, compress_chunks(repeated(b"\0", 8 * MIB), ".zst")),
}


def allocated_per_byte(source: Path, reader: Callable[[Path], Iterator[bytes]]) -> float:
    """Bytes Python allocates while ``reader`` produces each piece (above what it held before), per byte read."""
    delivered = allocated = 0
    pieces = reader(source)
    tracemalloc.start()
    try:
        while True:
            held, _ = tracemalloc.get_traced_memory()
            tracemalloc.reset_peak()
            piece = next(pieces, None)
            allocated += tracemalloc.get_traced_memory()[1] - held
            if piece is None:
                break
            delivered += len(piece)
            del piece
    finally:
        tracemalloc.stop()
    return allocated / delivered


#: a line is held whole by line readers of every format (migrate reads such a line by blocks)
READS = [
    pytest.param(shape, reader, id=f"{shape}, {name}")
    for shape in sorted(SHAPES)
    for name, reader in (("by lines", by_lines), ("by blocks", by_blocks))
    if not (shape == "one long line" and reader is by_lines)
]


@pytest.mark.parametrize(("shape", "reader"), READS)
def test_reading_zst_copies_no_more_than_reading_gz(
    tmp_path: Path, shape: str, reader: Callable[[Path], Iterator[bytes]]
) -> None:
    """Each byte is copied a few times, however much one 64 KiB piece of input expands to.

    The baseline is the standard library's gzip reader on the same log. The reader that was
    replaced copied the undelivered rest of a 64 KiB input on every read: 64 bytes per byte read
    on these 8 MiB logs, and proportionally more on larger ones.
    """
    content, compressed = SHAPES[shape]()
    zst, gz = tmp_path / "log.zst", tmp_path / "log.gz"
    zst.write_bytes(compressed)
    gz.write_bytes(gzip.compress(content))
    assert b"".join(reader(zst)) == content
    zst_cost, gz_cost = allocated_per_byte(zst, reader), allocated_per_byte(gz, reader)
    assert zst_cost <= 1.5 * gz_cost, f".zst: {zst_cost:.1f} bytes allocated per byte read, .gz: {gz_cost:.1f}"


class _StopsAtOnce:
    """A zstandard whose decompressor stops before its input ends: a library fault that no file causes."""

    class ZstdError(Exception):
        pass

    class ZstdDecompressor:
        def stream_reader(self, source: object, **_: object) -> io.BytesIO:
            return io.BytesIO(b"")


def test_a_decompressor_that_stops_before_the_end_is_an_error_not_a_shorter_log() -> None:
    frames = ZstdFrames(io.BytesIO(FRAMES[1][0]), _StopsAtOnce)
    with pytest.raises(OSError, match="the decompressor stopped at byte 0, before the end"):
        frames.read()
