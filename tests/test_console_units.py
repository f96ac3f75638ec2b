"""The console shows figures people can read: scaled units, 3 significant digits (issue 9, item 30).

A new user's console showed ``in 14204.838999999998 us`` and, for a small host arena,
``reserved_va=0.0 GiB``. The class: any figure of kvlog's own lines printed raw (too many digits) or
in one fixed unit (a small value reads as zero). Tried here: every byte count from 0 to 2**63 and
every duration from 0 to 10**14 us (hypothesis, plus the edges where rounding reaches the next unit),
through the formatter, the console renderer and a real host arena in a subprocess. Each figure must
have at most 4 significant digits, a non-zero value must not read as zero, and the figure must read
back (``kvlog migrate``) within its printed precision. sglang's own wordings keep their fixed units.
"""

from __future__ import annotations

import io
import re
import subprocess
import sys
import textwrap
from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson
from hypothesis import example, given, settings
from hypothesis import strategies as st

from kvlog.migration import load_chain
from kvlog.migration.engine import MigrateOptions, Migrator
from kvlog.text.console import console_line
from kvlog.text.units import BYTES, MICROSECONDS
from kvlog.text.wording import render_message

#: a figure and its unit, as kvlog's own lines print them
FIGURE = re.compile(r"(?<![\w.\[])(-?[0-9][0-9.e+-]*) (B|KiB|MiB|GiB|TiB|PiB|EiB|ns|us|ms|s|min|h|d)\b")
CHAIN = load_chain()
MIGRATOR = Migrator(CHAIN, MigrateOptions())
#: today's wording, as the grammar reads it
TODAY = CHAIN.generations("sglang")[-1]


def significant_digits(text: str) -> int:
    digits = text.lstrip("-").split("e")[0].replace(".", "").lstrip("0")
    return len(digits) or 1


def reads_as_zero(text: str) -> bool:
    return Decimal(text.split(maxsplit=1)[0]) == 0


@settings(max_examples=2000, deadline=None)
@given(st.integers(-(2**63), 2**63))
@example(0)
@example(1023)
@example(1024 * 1024 - 1)  # rounds to the next unit: 1.00 MiB, never 1024 KiB
@example(1024 * 1000 - 1)
@example(10 * 1024 - 3)
@example(2**63)
def test_every_byte_count_shows_its_magnitude_in_3_significant_digits(value: int) -> None:
    text = BYTES.format(value)
    number, _unit = text.split(" ")
    assert significant_digits(number) <= 4, text
    assert reads_as_zero(text) == (value == 0), text
    assert abs(value) < 1024 or Decimal(number.lstrip("-")) < 1024, text
    read, spread = BYTES.read(text)
    assert abs(read - value) <= spread + 1, text
    assert abs(read - value) <= abs(value) * 5e-3 + 1, text
    assert BYTES.format(read) == text  # what is read back prints the same


@settings(max_examples=2000, deadline=None)
@given(st.one_of(st.just(0.0), st.floats(1e-9, 1e14), st.integers(0, 10**14).map(float)))
@example(14204.838999999998)
@example(999.9999)
@example(59_999_999.0)
@example(59_950_000.0)  # 59.95 s rounds to 60.0 s: 1.00 min, never 0.999 min
@example(3_599_700_000.0)  # 59.995 min: 1.00 h
@example(0.0004)
def test_every_duration_shows_its_magnitude_in_3_significant_digits(micros: float) -> None:
    text = MICROSECONDS.format(micros)
    number, _unit = text.split(" ")
    assert significant_digits(number) <= 4, text
    assert reads_as_zero(text) == (micros == 0), text
    read, _ = MICROSECONDS.read(text)
    assert abs(read - micros) <= micros * 5e-3, text
    assert MICROSECONDS.format(read) == text


def test_the_reported_lines() -> None:
    commit = {
        "event": "kv_arena.commit",
        "arena_id": "4242_0",
        "range_count": 1,
        "offset_bytes": 0,
        "nbytes": 2 << 20,
        "committed_bytes": (2 << 20) * 3,
        "measured_committed_bytes": None,
        "duration_us": 14204.838999999998,
    }
    assert render_message(commit) == "KvVmmArena[4242_0] commit: offset=0 B size=2.00 MiB committed=6.00 MiB in 14.2 ms"
    batch = commit | {"range_count": 64, "nbytes": 64 << 21, "committed_bytes": 64 << 21}
    assert render_message(batch) == (
        "KvVmmArena[4242_0] commit: ranges=64 from offset=0 B size=128 MiB committed=128 MiB in 14.2 ms"
    )
    decommit = commit | {"event": "kv_arena.decommit", "committed_bytes": 0}
    assert render_message(decommit) == "KvVmmArena[4242_0] decommit: offset=0 B size=2.00 MiB committed=0 B in 14.2 ms"
    slept = decommit | {"range_count": 3, "nbytes": 6 << 20}
    assert render_message(slept) == (
        "KvVmmArena[4242_0] decommit: ranges=3 from offset=0 B size=6.00 MiB committed=0 B in 14.2 ms"
    )
    host = {
        "event": "kv_arena.ready",
        "arena_id": "7_0",
        "backend": "host",
        "device": None,
        "reserved_va_bytes": 16 << 20,
        "granularity_bytes": 4096,
        "handle_type": None,
    }
    assert render_message(host) == "KvVmmArena[7_0] ready: backend=host reserved_va=16.0 MiB granularity=4.00 KiB"
    assert _migrated(render_message(host) or "")["reserved_va_bytes"] == 16 << 20


def test_sglangs_wordings_keep_sglangs_fixed_units() -> None:
    """Monitoring parses these: a CUDA arena keeps `{:.1f} GiB` and `{} KiB`, pools `{:.2f} GB`, even when tiny."""
    cuda = {
        "event": "kv_arena.ready",
        "arena_id": "7_0",
        "backend": "cuda",
        "device": 0,
        "reserved_va_bytes": 2 << 20,
        "granularity_bytes": 2 << 20,
    }
    assert render_message(cuda) == "KvVmmArena[7_0] ready: device=0 reserved_va=0.0 GiB granularity=2048 KiB"
    assert (
        render_message({"event": "kv_memory.pool_end", "avail_bytes": 1 << 20}) == "Memory pool end. avail mem=0.00 GB"
    )


_SIZES = st.integers(0, 2**63)
_SIGNED = st.integers(-(2**63), 2**63)
_DURATIONS = st.floats(0, 1e14)


@settings(max_examples=300, deadline=None)
@given(_SIZES, _SIZES, _SIZES, st.one_of(st.none(), _SIZES), _DURATIONS, _SIGNED)
def test_kvlogs_own_console_lines_read_back_within_their_precision(
    offset: int, size: int, committed: int, measured: int | None, micros: float, discrepancy: int
) -> None:
    commit = {
        "event": "kv_arena.commit",
        "arena_id": "1_0",
        "range_count": 1,
        "offset_bytes": offset,
        "nbytes": size,
        "committed_bytes": committed,
        "measured_committed_bytes": measured,
        "measurement_source": None if measured is None else "smaps_rss",
        "duration_us": micros,
    }
    closed = {"event": "kv_arena.closed", "arena_id": "1_0", "released_bytes": size}
    sleep = {
        "event": "kv_pool.sleep",
        "pool": "MHAKVPool",
        "freed_bytes": size,
        "measured_freed_bytes": discrepancy,
        "discrepancy_bytes": discrepancy,
        "measurement_source": "smaps_rss",
        "duration_us": micros,
    }
    batch = commit | {"range_count": 64}
    decommits = [event | {"event": "kv_arena.decommit"} for event in (commit, batch)]
    written: list[dict[str, Any]] = [commit, batch, *decommits, closed, sleep]
    for event in written:
        message = console_line({**event, "level": "info"})
        for number, _unit in FIGURE.findall(message):
            assert significant_digits(number) <= 4, message
        parsed = TODAY.recognise(message)
        assert parsed is not None, message
        for name, value in event.items():
            if name.endswith("_bytes") or name == "nbytes":
                spread = parsed.parsed.uncertainty_bytes.get(name, 0)
                assert value is None or abs(parsed.parsed.fields[name] - value) <= spread + 1, (name, message)
                assert value is None or reads_as_zero(BYTES.format(value)) == (value == 0)
        if "duration_us" in event:
            assert abs(parsed.parsed.fields["duration_us"] - micros) <= micros * 5e-3, message


def _migrated(message: str) -> dict[str, Any]:
    out = io.BytesIO()
    MIGRATOR.migrate("t.log", io.BytesIO(f"[2026-01-02 03:04:05 TP0] {message}\n".encode()), out)
    event = orjson.loads(out.getvalue())
    assert isinstance(event, dict)
    return event


def test_lines_kvlog_printed_before_still_read_exactly() -> None:
    """Consoles logged with exact bytes and raw microseconds before this change: still read, exactly."""
    closed = _migrated("KvVmmArena[1_0] closed: released=2097152 B")
    assert closed["released_bytes"] == 2097152
    assert "uncertainty_bytes" not in closed["migrated"]


def test_a_real_host_arena_on_the_console(tmp_path: Path) -> None:
    """The runtime as a user runs it: a 16 MiB host arena, a commit and a decommit, console to stdout."""
    script = textwrap.dedent(
        """
        import sys
        import kvlog
        from kvlog.memory import VmmArena
        kvlog.configure(output="console", stream=sys.stdout)
        with VmmArena.host(reserve_bytes=16 << 20) as arena:
            arena.commit(0, 64 << 10)
            arena.decommit(0, 64 << 10)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert any("ready: backend=host reserved_va=16.0 MiB granularity=4.00 KiB" in line for line in lines), lines
    assert any("commit: offset=0 B size=64.0 KiB committed=64.0 KiB" in line for line in lines), lines
    assert "0.0 GiB" not in done.stdout
    for number, _unit in FIGURE.findall(done.stdout):
        assert significant_digits(number) <= 4, done.stdout
    assert re.search(r"decommit: .* in [0-9.]+ (ns|us|ms|s)$", lines[-2]), lines


def test_consecutive_lines_get_their_own_prefix_whatever_the_last_line_was() -> None:
    """The console keeps the last prefix built: a line differing in second, rank order or rank type gets its own."""
    event = {"event": "kv_memory.pool_end", "avail_bytes": 1 << 30, "level": "info"}
    stamps_and_ranks = [
        ("2026-12-03T10:00:00.000001Z", {"dp": 0, "tp": 1}),
        ("2026-12-03T10:00:00.999999Z", {"dp": 0, "tp": 1}),
        ("2026-12-03T10:00:00.999999Z", {"tp": 1, "dp": 0}),
        ("2026-12-03T10:00:01.000000Z", {"tp": 1, "dp": 0}),
        ("2026-12-03T10:00:01.000000Z", {"tp": True, "dp": 0}),
        ("2026-12-03T10:00:01.000000Z", None),
        (None, None),
    ]
    prefixes = [
        console_line(event | {"timestamp": stamp, "ranks": ranks}).split("Memory pool end.")[0]
        for stamp, ranks in stamps_and_ranks
    ]
    assert prefixes == [
        "[2026-12-03 10:00:00 DP0 TP1] ",
        "[2026-12-03 10:00:00 DP0 TP1] ",
        "[2026-12-03 10:00:00 TP1 DP0] ",
        "[2026-12-03 10:00:01 TP1 DP0] ",
        "[2026-12-03 10:00:01 TPtrue DP0] ",  # a rank no JSON integer: as JSON writes it
        "[2026-12-03 10:00:01] ",
        "",
    ]
