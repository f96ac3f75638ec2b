"""``kvlog validate`` and ``kvlog schema`` on real files.

What validation finds is tested through ``kvlog.commands.validate``; the console (standard input and
output, the summary, exit statuses) through the CLI, in process (``cli_harness``).
"""

from __future__ import annotations

import gzip
import itertools
import json
import random
from pathlib import Path
from typing import Any

import pytest
from cli_harness import kvlog_text as kvlog
from foundation_samples import FIELDS, sample

from kvlog import commands
from kvlog.file_validation import chunk_ranges
from kvlog.schema.catalog import default_catalog

GOOD = [sample(event, version) for event, version in FIELDS]  # the hand-written ones: stable across catalog growth
ALLOCATION = sample("kv_pool.allocation", 2)


def validated(*files: Path | str, **options: Any) -> tuple[int, list[str], str]:
    """``kvlog validate FILES`` in this process: (exit status, the findings as printed, the summary line)."""
    outcome = commands.validate(files, **options)
    return outcome.exit_status, [str(finding) for finding in outcome.findings], str(outcome.counts)


def jsonl(events: list[Any]) -> str:
    return "".join((e if isinstance(e, str) else json.dumps(e)) + "\n" for e in events)


def without(event: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in event.items() if k != key}


#: one defect per line: (the line, the exact report after "FILE:LINE: ")
DEFECTS: list[tuple[Any, str]] = [
    (
        {**ALLOCATION, "num_tokens": "many"},
        "kv_pool.allocation@2: $.num_tokens: 'many' is not of type 'integer', 'null'",
    ),
    (without(ALLOCATION, "layout"), "kv_pool.allocation@2: $.layout: required field is missing"),
    (
        {**ALLOCATION, "reserved": 1},
        "kv_pool.allocation@2: $.reserved: unknown field (not in this event's schema; "
        "engine-specific fields go under ext)",
    ),
    (
        {**ALLOCATION, "allocation_state": "reserved"},
        "kv_pool.allocation@2: $.allocation_state: 'reserved' is not one of ['va_upper_bound', 'allocated']",
    ),
    ({**ALLOCATION, "event": "kv_pool.alloc"}, "kv_pool.alloc@2: $.event: unknown event 'kv_pool.alloc'"),
    (
        {**ALLOCATION, "schema_version": 3},
        "kv_pool.allocation@3: $.schema_version: unknown version 3 of kv_pool.allocation (known: 1, 2)",
    ),
    (
        "[2026-12-02 09:00:00 TP0] KV Cache is allocated. #tokens: 65536, K size: 1.00 GB, V size: 1.00 GB",
        "?@?: $: not a JSON event: ",
    ),
    ({**ALLOCATION, "ranks": {"tp": -1}}, "kv_pool.allocation@2: $.ranks.tp: -1 is less than the minimum of 0"),
    ("[1, 2]", "?@?: $: not a JSON event: a JSON list"),
]


def test_a_valid_log_passes(tmp_path: Path) -> None:
    log = tmp_path / "good.jsonl"
    log.write_text(jsonl(GOOD))
    result = kvlog("validate", str(log))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout == ""
    assert result.stderr == f"{len(GOOD)} events, 0 invalid, 0 non-JSON lines, 0 skipped, 0 problems\n"


@pytest.mark.parametrize(("line", "report"), DEFECTS, ids=[report.split(": ", 2)[-1][:40] for _, report in DEFECTS])
def test_each_defect_is_reported_with_file_line_event_and_json_path(tmp_path: Path, line: Any, report: str) -> None:
    log = tmp_path / "app.jsonl"
    log.write_text(jsonl([GOOD[0], GOOD[1], line, GOOD[2]]))
    status, lines, summary = validated(log)
    assert status == 1
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"{log}:3: {report}")
    assert "1 problems" in summary


def test_all_defects_in_one_file_in_line_order_with_a_summary(tmp_path: Path) -> None:
    log = tmp_path / "mixed.jsonl"
    log.write_text(jsonl([GOOD[0], *(line for line, _ in DEFECTS), "", GOOD[1]]))
    status, reported, summary = validated(log)
    assert status == 1
    assert [r.split(":")[1] for r in reported] == [str(n) for n in range(2, 2 + len(DEFECTS))]
    for report, (_, expected) in zip(reported, DEFECTS, strict=True):
        assert report.startswith(f"{log}:"), report
        assert expected in report
    assert summary == "9 events, 7 invalid, 2 non-JSON lines, 1 skipped, 9 problems"


def test_an_event_with_several_problems_gets_one_line_each(tmp_path: Path) -> None:
    log = tmp_path / "two.jsonl"
    log.write_text(jsonl([{**without(ALLOCATION, "dtype"), "k_bytes": 1.5, "x": 1}]))
    status, lines, _ = validated(log)
    assert status == 1
    assert sorted(lines) == sorted(
        [
            f"{log}:1: kv_pool.allocation@2: $.dtype: required field is missing",
            f"{log}:1: kv_pool.allocation@2: $.k_bytes: 1.5 is not of type 'integer'",
            f"{log}:1: kv_pool.allocation@2: $.x: unknown field (not in this event's schema; "
            "engine-specific fields go under ext)",
        ]
    )


def test_skip_non_json_passes_a_mixed_log(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text(jsonl(["INFO: Started server process [4242]", GOOD[0], "plain text", "[3]", GOOD[1]]))
    assert validated(log)[0] == 1
    status, lines, summary = validated(log, skip_non_json=True)
    assert status == 0, lines
    assert summary == "2 events, 0 invalid, 0 non-JSON lines, 3 skipped, 0 problems"
    log.write_text(jsonl(["plain text", {**GOOD[0], "bogus": 1}]))
    status, lines, _ = validated(log, skip_non_json=True)
    assert status == 1
    assert lines[0].startswith(f"{log}:2: ")


def test_gzip_and_stdin(tmp_path: Path) -> None:
    log = tmp_path / "app.jsonl.gz"
    with gzip.open(log, "wt") as stream:
        stream.write(jsonl([*GOOD, DEFECTS[0][0]]))
    status, lines, _ = validated(log)
    assert status == 1
    assert lines[0].startswith(f"{log}:{len(GOOD) + 1}: kv_pool.allocation@2: $.num_tokens:")

    result = kvlog("validate", "-", stdin=jsonl([GOOD[0], DEFECTS[1][0]]).encode())
    assert result.returncode == 1
    assert result.stdout == f"-:2: {DEFECTS[1][1]}\n"
    assert kvlog("validate", "-", stdin=jsonl(GOOD).encode()).returncode == 0


def test_the_demo_output_validates(tmp_path: Path) -> None:
    demo = kvlog("demo", "--format", "json")
    assert demo.returncode == 0, demo.stderr
    assert demo.stdout.count("\n") >= 10
    (tmp_path / "demo.jsonl").write_text(demo.stdout)
    status, lines, _ = validated(tmp_path / "demo.jsonl")
    assert status == 0, lines


def test_several_files_one_summary(tmp_path: Path) -> None:
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    first.write_text(jsonl(GOOD))
    second.write_text(jsonl([GOOD[0], DEFECTS[2][0]]))
    status, lines, summary = validated(first, second)
    assert status == 1
    assert lines[0].startswith(f"{second}:2: ")
    assert summary.startswith(f"{len(GOOD) + 2} events, 1 invalid")


@pytest.mark.parametrize("kind", ["missing", "directory", "corrupt gzip", "truncated gzip"])
def test_unreadable_inputs_exit_2_with_a_clear_message(tmp_path: Path, kind: str) -> None:
    good = tmp_path / "good.jsonl"
    good.write_text(jsonl(GOOD))
    if kind == "missing":
        target, reason = tmp_path / "nope.jsonl", "cannot open: No such file or directory"
    elif kind == "directory":  # one with files is walked, as migrate walks it
        target, reason = tmp_path / "empty", "no files in this directory"
        target.mkdir()
    elif kind == "corrupt gzip":
        target, reason = tmp_path / "bad.jsonl.gz", "cannot read: Not a gzipped file"
        target.write_text("this is not gzip\n")
    else:
        target, reason = tmp_path / "short.jsonl.gz", "cannot read: Compressed file ended"
        target.write_bytes(gzip.compress(jsonl(GOOD * 50).encode())[:200])
    outcome = commands.validate([target, good])
    assert outcome.exit_status == 2
    (failure,) = outcome.input_failures
    assert str(failure).startswith(f"{target}: {reason}")
    assert outcome.counts.events == len(GOOD), "the readable file is still validated"


def test_an_invalid_event_wins_over_nothing_but_an_unreadable_input_wins_over_invalid(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(jsonl([DEFECTS[0][0]]))
    status, lines, _ = validated(bad, tmp_path / "missing.jsonl")
    assert status == 2
    assert lines[0].startswith(f"{bad}:1: ")


def test_no_files_is_a_usage_error() -> None:
    result = kvlog("validate")
    assert result.returncode == 2
    assert "Missing argument" in result.stderr


def _big_log(path: Path, lines: int, seed: int) -> list[int]:
    """A log of ``lines`` lines with defects at random places; returns their line numbers."""
    rng = random.Random(seed)
    defect_lines = sorted(rng.sample(range(1, lines + 1), 40))
    defects = iter(rng.choice(DEFECTS)[0] for _ in defect_lines)
    wanted = set(defect_lines)
    with path.open("w") as stream:
        for number in range(1, lines + 1):
            line = next(defects) if number in wanted else rng.choice(GOOD)
            stream.write(line if isinstance(line, str) else json.dumps(line))
            if number < lines:  # no newline at the end: the last chunk must still count its line
                stream.write("\r\n" if number % 7 == 0 else "\n")
    return defect_lines


def test_parallel_validation_prints_exactly_what_the_serial_path_prints(tmp_path: Path) -> None:
    log = tmp_path / "big.jsonl"
    defect_lines = _big_log(log, 30_000, seed=7)
    assert log.stat().st_size > 8 << 20 >> 1, "large enough to be split into many chunks"
    serial = validated(log, jobs=1)
    assert serial[0] == 1
    assert sorted({int(line.split(":")[1]) for line in serial[1]}) == defect_lines
    for jobs in (2, 3):
        assert validated(log, jobs=jobs) == serial
    assert validated(log) == serial
    streamed = kvlog("validate", "-", stdin=log.read_bytes())  # line by line, not in byte ranges
    assert streamed.stdout.splitlines() == [line.replace(f"{log}:", "-:") for line in serial[1]]
    assert streamed.stderr == f"{serial[2]}\n"


def test_parallel_validation_of_a_file_without_problems(tmp_path: Path) -> None:
    log = tmp_path / "clean.jsonl"
    log.write_text(jsonl(GOOD * 3000))
    copy = tmp_path / "copy.jsonl"
    copy.write_bytes(log.read_bytes())
    status, _, summary = validated(log, copy, jobs=2)
    assert status == 0
    assert summary.startswith(f"{len(GOOD) * 6000} events, 0 invalid")


def test_jobs_must_be_positive(tmp_path: Path) -> None:
    result = kvlog("validate", "-j", "0", "-")
    assert result.returncode == 2
    assert "--jobs" in result.stderr


def test_schema_list_shows_every_event_and_marks_the_current_version() -> None:
    result = kvlog("schema", "list")
    assert result.returncode == 0
    rows = {line.split()[0]: line for line in result.stdout.splitlines()}
    assert set(rows) == set(default_catalog().events())
    assert "v1, v2 (current)" in rows["kv_arena.ready"]
    assert "v1 (current)" in rows["kv_memory.pool_end"]


@pytest.mark.parametrize(
    ("spec", "path"),
    [
        ("kv_arena.ready", "kv_arena.ready/v2.json"),
        ("kv_arena.ready@1", "kv_arena.ready/v1.json"),
        ("kv_arena.ready@v1", "kv_arena.ready/v1.json"),
    ],
)
def test_schema_show_prints_the_schema_file(spec: str, path: str) -> None:
    result = kvlog("schema", "show", spec)
    assert result.returncode == 0
    expected = json.loads((Path(__file__).resolve().parent.parent / "schemas" / path).read_text())
    assert json.loads(result.stdout) == expected


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("nope", "unknown event 'nope'"),
        ("kv_arena.ready@7", "unknown version 7 of event 'kv_arena.ready' (known: 1, 2)"),
        ("kv_arena.ready@two", "version must be an integer, not 'two'"),
        ("kv_arena.ready@", "version must be an integer, not ''"),
    ],
)
def test_schema_show_rejects_a_bad_spec_clearly(spec: str, message: str) -> None:
    result = kvlog("schema", "show", spec)
    assert result.returncode != 0
    assert message in result.stderr
    assert result.stdout == ""


@pytest.mark.parametrize("jobs", [2, 3, 16])
def test_chunks_cover_the_file_exactly_and_start_at_line_starts(tmp_path: Path, jobs: int) -> None:
    rng = random.Random(jobs)
    lines = [b"x" * rng.choice([0, 1, 10, 70_000, 300_000]) + b"\n" for _ in range(60)]
    lines[-1] = lines[-1].rstrip(b"\n")  # the last line without its newline
    data = b"".join(lines)
    log = tmp_path / "lines.jsonl"
    log.write_bytes(data)
    ranges = chunk_ranges(str(log), len(data), jobs)
    assert len(ranges) > 1
    assert ranges[0][0] == 0
    assert ranges[-1][1] == len(data)
    for (_, end), (start, _) in itertools.pairwise(ranges):
        assert end == start
        assert data[start - 1 : start] == b"\n", "every chunk starts at the beginning of a line"
    assert all(start < end for start, end in ranges)
