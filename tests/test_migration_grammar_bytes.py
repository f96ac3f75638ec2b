"""The text grammar against arbitrary bytes, and against lines built to make regular expressions backtrack.

tests/test_migration_parsing.py already proves the constructive half (a line rendered from any
template reads back to its figures). This file adds the adversarial half: any bytes at all, and
valid lines with bytes inserted, deleted or repeated, never raise, keep one output line per input
line, and come out either byte for byte as they went in or as a valid event. And the cost of a line
grows linearly with its length: time per byte of a 4 MB hostile line is within 3x of a 1 MB one
(a ratio measured in the same run, never an absolute time).
"""

from __future__ import annotations

import io
import time
import tracemalloc

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvlog.migration import load_chain
from kvlog.migration.candidates import MAX_LINE_BYTES
from kvlog.migration.engine import MigrateOptions, Migrator
from kvlog.schema.event_validator import EventValidator

CHAIN = load_chain()
VALIDATOR = EventValidator()
MIGRATORS = {fmt: Migrator(CHAIN, MigrateOptions(output_format=fmt)) for fmt in ("jsonl", "text", "legacy")}
VALID_LINES = [
    b"[2025-06-03 11:20:41 TP0] KV Cache is allocated. #tokens: 2371584, K size: 56.57 GB, V size: 56.58 GB",
    b"[2025-06-03 11:20:41 PP1 TP3] KV Cache is allocated. K size: 1.00 GB, V size: 2.00 GB.",
    b"[2026-08-10 09:00:00 TP0] KvVmmArena[1234_0] ready: device=0 reserved=12.0 GiB granularity=2048 KiB",
    b"[2025-06-03 11:20:40 TP0] Memory pool end. avail mem=10.86 GB",
    b"[2025-06-03 11:20:39] Load weight begin. avail mem=78.60 GB",
    b'{"event":"kv_arena.closed","schema_version":1,"timestamp":"2025-01-01T00:00:00Z","level":"info",'
    b'"arena_id":"1_0","released_bytes":0}',
    b"SWAKVPool mem usage: full 1.00 GB, swa 2.00 GB",
]
#: pieces of the grammar, so that random lines come close to real ones more often than pure noise does
FRAGMENTS = [
    b"KV Cache is allocated. ",
    b"#tokens: ",
    b"K size: ",
    b"KV size: ",
    b" GB",
    b" GiB",
    b"KvVmmArena[",
    b"]",
    b"[",
    b"{",
    b'"schema_version"',
    b"0_",
    b"12.34",
    b"999999999999999999999",
    b"TP0",
    b" ",
    b",",
    b"\r",
    b"\x00",
    b"\xff",
    b"[2025-06-03 11:20:41 TP0] ",
    b"Memory pool end. avail mem=",
    b"reserved=",
]

noise = st.lists(st.one_of(st.binary(max_size=12), st.sampled_from(FRAGMENTS)), max_size=30).map(b"".join)


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    """A valid line with a few bytes inserted, deleted or a slice repeated."""
    line = bytearray(draw(st.sampled_from(VALID_LINES)))
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, len(line)))
        action = draw(st.sampled_from(["insert", "delete", "repeat"]))
        if action == "insert":
            line[at:at] = draw(st.one_of(st.binary(min_size=1, max_size=4), st.sampled_from(FRAGMENTS)))
        elif action == "delete":
            del line[at : at + draw(st.integers(1, 4))]
        else:
            line[at:at] = line[at : at + draw(st.integers(1, 8))] * draw(st.integers(2, 50))
    return bytes(line)


def migrate(data: bytes, output_format: str = "jsonl") -> bytes:
    out = io.BytesIO()
    MIGRATORS[output_format].migrate("fuzz.log", io.BytesIO(data), out)
    return out.getvalue()


def assert_line_for_line(data: bytes, out: bytes) -> None:
    """One output line per input line, each the same bytes or a valid event."""
    ins, outs = io.BytesIO(data).readlines(), io.BytesIO(out).readlines()  # split at LF only, as the engine does
    assert len(outs) == len(ins), (ins, outs)
    for before, after in zip(ins, outs, strict=True):
        if after == before:
            continue
        event = orjson.loads(after)
        assert VALIDATOR.violations(event) == [], (before, after)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(noise, mutated(), st.sampled_from(VALID_LINES)), min_size=1, max_size=8))
def test_arbitrary_lines_never_raise_and_come_out_as_they_were_or_as_valid_events(lines: list[bytes]) -> None:
    data = b"\n".join(line.replace(b"\n", b" ") for line in lines) + b"\n"
    assert_line_for_line(data, migrate(data))


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400))
def test_raw_bytes_never_raise_in_any_output_format(data: bytes) -> None:
    for output_format in MIGRATORS:
        out = migrate(data, output_format)
        if output_format == "jsonl":
            assert_line_for_line(data, out)
        assert out.count(b"\n") == data.count(b"\n")


HOSTILE = {
    "digits after #tokens": lambda n: b"KV Cache is allocated. #tokens: " + b"9" * n,
    "0_ after KvVmmArena[": lambda n: b"KvVmmArena[" + b"0_" * (n // 2) + b"] ready: device=0",
    "nested brackets": lambda n: b"[2025-06-03 11:20:41 " + b"[" * (n // 2) + b"]" * (n // 2) + b" KV Cache",
    "rank tags": lambda n: b"[2025-06-03 11:20:41" + b" TP1" * (n // 4) + b"] Memory pool end. avail mem=1.0 GB",
    "repeated sizes": lambda n: b"SWAKVPool mem usage: " + b"1.00 GB, " * (n // 9),
}


def seconds_per_byte(line: bytes, total: int) -> float:
    """Best of five runs over ``total`` bytes of copies of ``line``: CPU seconds per byte.

    CPU time of this thread, not wall time, so that other processes on a shared CI machine count less.
    """
    data = line + b"\n"
    data *= max(1, total // len(data))
    best = float("inf")
    for _ in range(5):
        started = time.thread_time()
        out = migrate(data)
        best = min(best, time.thread_time() - started)
    assert out == data  # none of them is a real line: all pass through
    return best / len(data)


def test_hostile_lines_cost_time_linear_in_their_length() -> None:
    """Below the engine's line cap the grammar reads each line; above it lines are copied unread: both linear."""
    ratios = {}
    for name, build in HOSTILE.items():
        parsed = seconds_per_byte(build(MAX_LINE_BYTES - 1024), 2 << 20) / seconds_per_byte(build(4096), 2 << 20)
        copied = seconds_per_byte(build(4 << 20), 8 << 20) / seconds_per_byte(build(1 << 20), 8 << 20)
        ratios[name] = (round(parsed, 2), round(copied, 2))
    assert all(max(pair) < 3 for pair in ratios.values()), ratios


class _LongLine:
    """A stream of one ``size``-byte line and then ``after``, made block by block, never whole."""

    def __init__(self, size: int, after: bytes) -> None:
        self.left = size
        self.after = after

    def read(self, size: int = -1) -> bytes:
        if self.left > 0:
            take = min(size, self.left)
            self.left -= take
            return b"x" * take
        after, self.after = self.after, b""
        return after


class _Sink:
    def __init__(self) -> None:
        self.written = 0
        self.tail = b""

    def write(self, data: bytes | memoryview) -> None:
        self.written += len(data)
        self.tail = (self.tail + bytes(data))[-200:]


def test_a_line_over_the_cap_streams_through_in_bounded_memory_and_keeps_line_numbers() -> None:
    """64 MB in one line: Python allocations stay under 4 MB, and the lines after it keep their numbers."""
    after = b"\nKV Cache is allocated. K size: oops GB\nlast line without newline"
    sink, dead = _Sink(), []
    # what a run builds once for all its lines (the rules the lines after it need, compiled when first met, and
    # the index of cut wordings) is built before the count: the bound is on what the long line costs
    MIGRATORS["jsonl"].migrate("warm.log", io.BytesIO(after), io.BytesIO(), lambda record: None)
    tracemalloc.start()
    try:
        report = MIGRATORS["jsonl"].migrate("long.log", _LongLine(64 << 20, after), sink, dead.append)  # type: ignore[arg-type]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert sink.written == (64 << 20) + len(after) and sink.tail.endswith(after[-100:])
    assert peak < 4 << 20, f"{peak >> 20} MiB allocated for a 64 MiB line"
    assert report.lines == 3 and report.overlong_lines == 1
    # the long line is copied whole yet reported (nobody read it to know it states no memory), and the
    # broken figure after it keeps its own number
    assert [record["line"] for record in dead] == [1, 2]
    assert dead[0]["length"] >= 64 << 20 and "not read" in dead[0]["reason"]
