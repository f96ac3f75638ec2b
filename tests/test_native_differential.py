"""The native prefilter (``kvlog._native``) finds exactly the candidate lines the Python one finds.

The Python engine is the reference: on every log the repository holds (the golden corpus, the wild
corpus, the examples, a sample line of every harvested server format) and on generated blocks made of
the probes' own words cut and glued to figures, digits, units and the bytes that push a probe into its
word search, both engines must give the same line starts, with and without the usage lines; and the
segments a stream is cut into (lines over ``MAX_LINE_BYTES`` included) must be the same whichever runs.

Skipped where the module is not built (``scripts/native``), unless ``KVLOG_NATIVE=1`` says it must be
(CI): there a missing module fails the tests.
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_formats import DECIDED, RELEASES, TOOL  # the format samples, as that test writes them

from kvlog import native
from kvlog.migration import candidates
from kvlog.migration.candidates import MAX_LINE_BYTES, native_prefilter, probe_words, python_prefilter, segments

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(
    native.compiled() is None and os.environ.get(native.ENV) != "1",
    reason="kvlog._native is not built (scripts/native builds it where cargo is installed): only the Python "
    "prefilter runs here, so there is nothing to compare it with",
)


def _logs() -> Iterator[tuple[str, bytes]]:
    for pattern in ("tests/corpus/*.log", "tests/wild/*/*.log", "examples/*.log"):
        for path in sorted(ROOT.glob(pattern)):
            yield str(path.relative_to(ROOT)), path.read_bytes()
    lines = [
        sample.line
        for fmt, rule in DECIDED
        if rule is not None
        for sample in TOOL.samples(fmt, rule, RELEASES[fmt.server])
    ]
    yield "format samples", "".join(f"{line}\n" for line in lines).encode()


LOGS = dict(_logs())


def _compare(data: bytes, begin: int = 0) -> None:
    for usage in (False, True):
        compiled = native_prefilter(usage=usage)
        assert compiled is not None, f"kvlog._native is not built, and {native.ENV}=1 says it must be"
        assert compiled(data, begin, len(data)) == python_prefilter(usage=usage)(data, begin, len(data)), (usage, begin)


@pytest.mark.parametrize("name", sorted(LOGS))
def test_every_log_gives_the_same_candidates(name: str) -> None:
    _compare(LOGS[name])


#: What generated lines are made of: every probe word (and its halves, so that a word may be cut short), the
#: usage lines' words, the figure words in every case, units, digits, the JSON marker, and runs of the probe
#: bytes common enough to push a probe past its misses into its word search
_WORDS = [*probe_words(), *(w.decode() for _, _, words in candidates._USAGE_PROBES for w in words)]
_FRAGMENTS = [
    *_WORDS,
    *(w[: len(w) // 2] for w in _WORDS),
    *(w[len(w) // 2 :] for w in _WORDS),
    *("memory", "Memory", "MEMORY", "mem", "MEM", "bytes", "Bytes", "BYTES", "memo", "xmem", "mem_", "bytesX"),
    *(" GB", "GB", "GiB", " MiB", "kB", "KB", "TB", "PiB", "Bx", "B_", "iB", "B"),
    *("0", "7", "12.5", " ", "  ", "=", ":", ",", "\t", "é", "\x00"),
    *('{"event":"kv_pool.sized",', '"schema_version":1}', '"schema_version"', "{", "}"),
    *(byte * 70 for byte in ("m", "B", "_", "V", "M", "U", "y", "L", "C", "G", "A", "!", "k", "{")),
    *(" POST /v1/chat/completions HTTP/1.1", "Cache flushed successfully!", "[2026-01-02 03:04:05 TP0] "),
]
#: a figure or a near miss of one: a digit, a space or not, a unit or a figure word, and what follows it
_FIGURE = st.tuples(
    st.sampled_from(["0", "7.5", "x", ""]),
    st.sampled_from(["", " ", "  ", "="]),
    st.sampled_from([*(f"{p}{i}B" for p in "KMGTPkmx" for i in ("", "i")), "mem", "Memory", "bytes", "BYTES", "B"]),
    st.sampled_from(["", " ", "x", "_", "0", "/", "s", "é"]),
).map("".join)
_PART = st.sampled_from(_FRAGMENTS) | _FIGURE | st.text("abcxyzKMGTPBimy_ 019{}", max_size=6)
_LINE = st.lists(_PART, max_size=12).map(lambda parts: "".join(parts).encode())


@settings(max_examples=500, deadline=None)
@given(
    st.lists(_LINE | st.sampled_from([line for data in LOGS.values() for line in data.splitlines()[:50]])),
    st.booleans(),
    st.data(),
)
def test_generated_blocks_give_the_same_candidates(lines: list[bytes], ended: bool, data: st.DataObject) -> None:
    block = b"\n".join(lines) + (b"\n" if ended and lines else b"")
    starts = [0, *(i + 1 for i, byte in enumerate(block) if byte == ord("\n"))]
    _compare(block, data.draw(st.sampled_from(starts), label="begin"))  # a block may begin after a long line


def _segments(data: bytes, usage: bool, monkeypatch: pytest.MonkeyPatch, value: str) -> list[tuple[object, ...]]:
    monkeypatch.setenv(native.ENV, value)
    return [
        (kind, block[start:end]) if kind is not None else (kind, block, end)
        for kind, block, start, end in segments(io.BytesIO(data), usage=usage)
    ]


@pytest.mark.parametrize("usage", [False, True])
def test_streams_are_cut_alike_lines_over_the_cap_included(usage: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    log = LOGS["tests/corpus/gen2_2025.log"]
    over = b"KV Cache is allocated. " + b"x" * MAX_LINE_BYTES + b"\n"  # alone as a candidate: too long to read
    far_over = b"m" * (3 * MAX_LINE_BYTES) + b" 4 GB\n"  # passed on in pieces, then its head and length
    data = log + over + log + far_over + log * 40 + b"Memory pool end. avail mem=1.00 GB"  # no newline at the end
    python = _segments(data, usage, monkeypatch, "0")
    assert len([kind for kind, *_ in python if kind]) > 40 * 20
    assert _segments(data, usage, monkeypatch, "1") == python


def test_kvlog_version_says_which_engine_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(native.ENV, "0")
    assert native.engine() == f"Python ({native.ENV}=0)"
    monkeypatch.setenv(native.ENV, "1")
    assert native.engine() == "native (kvlog._native)"
