"""The native passthrough (``kvlog._native.count_lines``) migrates every log exactly as the Python one does.

What a run copies through unread is counted, and every line number after it (an event's provenance, a
dead letter's, the report's) depends on that count: on every log the repository holds and on generated
logs (lines over ``MAX_LINE_BYTES``, CRLF endings, no final newline, empty files), read in blocks cut
anywhere in a line, the native engine must write the same bytes, the same report and the same dead
letters as the Python one reading whole blocks; compressed inputs go through ``kvlog migrate`` itself.

Skipped where the module is not built (``scripts/native``), unless ``KVLOG_NATIVE=1`` says it must be
(CI): there a missing module fails the tests.
"""

from __future__ import annotations

import gzip
import io
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import zstandard
from cli_harness import kvlog
from hypothesis import given, settings
from hypothesis import strategies as st
from migration_helpers import shipped_chain
from test_native_differential import LOGS

from kvlog import native
from kvlog.migration import candidates
from kvlog.migration.candidates import BLOCK_BYTES, MAX_LINE_BYTES, line_counter
from kvlog.migration.engine import MigrateOptions, Migrator

pytestmark = pytest.mark.skipif(
    native.compiled() is None and os.environ.get(native.ENV) != "1",
    reason="kvlog._native is not built (scripts/native builds it where cargo is installed): only the Python "
    "passthrough runs here, so there is nothing to compare it with",
)

#: what each run is migrated as: the default, the events alone (the runs counted, not written), text
OPTIONS = (MigrateOptions(), MigrateOptions(only_events=True), MigrateOptions(output_format="text"))


class _Cut:
    """A stream that gives at most the next of ``sizes`` bytes a read (as a pipe may), then whole reads."""

    def __init__(self, data: bytes, sizes: Iterator[int]) -> None:
        self._data = io.BytesIO(data)
        self._sizes = sizes

    def read(self, size: int = -1, /) -> bytes:
        return self._data.read(min(size, next(self._sizes, size)))


def _migrated(
    data: bytes, options: MigrateOptions, monkeypatch: pytest.MonkeyPatch, value: str, cuts: list[int] | None = None
) -> tuple[bytes, dict[str, Any], list[dict[str, Any]]]:
    monkeypatch.setenv(native.ENV, value)
    out, dead = io.BytesIO(), []
    stream = io.BytesIO(data) if cuts is None else _Cut(data, iter(cuts))
    report = Migrator(shipped_chain(), options).migrate("run.log", stream, out, dead.append)
    return out.getvalue(), report.to_json(), dead


def _compare(data: bytes, monkeypatch: pytest.MonkeyPatch, cuts: list[int], options: MigrateOptions) -> None:
    python = _migrated(data, options, monkeypatch, "0")
    assert _migrated(data, options, monkeypatch, "1", cuts) == python
    assert _migrated(data, options, monkeypatch, "1") == python


def test_the_native_count_is_the_one_chosen(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(native.ENV, "1")
    compiled = native.compiled()
    assert compiled is not None, f"kvlog._native is not built, and {native.ENV}=1 says it must be"
    assert line_counter() is compiled.count_lines
    monkeypatch.setenv(native.ENV, "0")
    assert line_counter() is candidates._python_count


#: lengths around the native count's vectors (16 bytes) and its rounds of 255 of them
_SIZES = st.integers(0, 3 * 16 * 255 + 40)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=40) | _SIZES.map(lambda n: b"ab\n\r\n\n\x0a\xff" * (n // 8 + 1)), st.data())
def test_the_native_count_counts_every_newline(data: bytes, draw: st.DataObject) -> None:
    start = draw.draw(st.integers(0, len(data)), label="start")
    end = draw.draw(st.integers(start, len(data)), label="end")
    counted = native.compiled()
    assert counted is not None
    assert counted.count_lines(data, start, end) == data.count(b"\n", start, end)


@pytest.mark.parametrize(("start", "end"), [(2, 1), (0, 5), (-1, 2)])
def test_the_native_count_refuses_a_range_outside_the_data(start: int, end: int) -> None:
    compiled = native.compiled()
    assert compiled is not None
    with pytest.raises((ValueError, OverflowError)):
        compiled.count_lines(b"a\nb\n", start, end)


@pytest.mark.parametrize("name", sorted(LOGS))
def test_every_log_migrates_alike(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    data = LOGS[name]
    cuts = [len(data) // 3 + 1, 7, 1, BLOCK_BYTES - 5, 2]  # blocks cut inside lines, one a single byte
    for options in OPTIONS:
        _compare(data, monkeypatch, cuts, options)


_LINE_ENDINGS = st.sampled_from([b"\n", b"\r\n", b"\r"])
_PLAIN = [
    b'INFO:     10.0.0.1:4242 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
    b"[2026-01-02 03:04:05 TP3] Cache flushed successfully!",
    b"[2026-01-02 03:04:05 TP0] Decode batch. #running-req: 3, #token: 4096, token usage: 0.01, #queue-req: 0",
    b"",
]
_CORPUS_LINES = sorted({line for data in LOGS.values() for line in data.splitlines()[:60]})
_LINE = (
    st.sampled_from(_PLAIN)
    | st.sampled_from(_CORPUS_LINES)
    | st.sampled_from([MAX_LINE_BYTES - 1, MAX_LINE_BYTES, MAX_LINE_BYTES + 1, 2 * MAX_LINE_BYTES + 3]).map(
        lambda n: (b"KV Cache is allocated. " + b"m" * n)[:n]  # around the cap, one passed on in pieces
    )
)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(_LINE, _LINE_ENDINGS), max_size=40),
    st.booleans(),
    st.lists(st.integers(1, 2 * BLOCK_BYTES), max_size=8),
    st.sampled_from(OPTIONS),
)
def test_generated_logs_migrate_alike(
    lines: list[tuple[bytes, bytes]], ended: bool, cuts: list[int], options: MigrateOptions
) -> None:
    data = b"".join(line + ending for line, ending in lines)
    if not ended and lines:
        data = data[: -len(lines[-1][1])]  # no final newline
    with pytest.MonkeyPatch.context() as monkeypatch:
        _compare(data, monkeypatch, cuts, options)


def test_an_empty_log_migrates_alike(monkeypatch: pytest.MonkeyPatch) -> None:
    for options in OPTIONS:
        _compare(b"", monkeypatch, [1], options)


@pytest.mark.parametrize("suffix", [".log", ".log.gz", ".log.zst"])
def test_compressed_logs_migrate_alike(suffix: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = b"".join(LOGS[name] for name in sorted(LOGS) if name.startswith("tests/corpus/")) * 2
    data += b"x" * (MAX_LINE_BYTES + 9) + b"\r\nMemory pool end. avail mem=1.00 GB"  # overlong; no final newline
    compress = {".log": bytes, ".log.gz": gzip.compress, ".log.zst": zstandard.compress}[suffix]
    log = tmp_path / f"run{suffix}"
    log.write_bytes(compress(data))
    written = {}
    for value in ("0", "1"):
        monkeypatch.setenv(native.ENV, value)
        out, report, dead = (tmp_path / f"{value}.{name}" for name in ("out", "report.json", "dead.jsonl"))
        result = kvlog("migrate", log, "-o", out, "--report", report, "--dead-letter", dead)
        assert result.returncode == 0, result.stderr
        written[value] = (out.read_bytes(), report.read_bytes(), dead.read_bytes(), result.stderr)
    assert written["1"] == written["0"]
    assert written["0"][2]  # the overlong line is dead lettered, after the lines counted before it
