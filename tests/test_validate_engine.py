"""``kvlog.file_validation`` as a library: how each kind of line is counted and reported, and how files are chunked.

The CLI tests check the printed findings; these pin the counts behind the summary line (lines,
events, invalid, non-JSON, skipped, unknown events, by event) for every path of the slow reading,
with and without skips, and the chunk boundaries that decide how a file is shared among workers.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from foundation_samples import sample

from kvlog.file_validation import (
    Counts,
    LineProblem,
    Skips,
    available_cpus,
    chunk_ranges,
    validate_input,
    validate_lines,
)
from kvlog.io.errors import InputError
from kvlog.io.inputs import OverlongLine
from kvlog.schema.event_validator import EventValidator, Violation

VALID = json.dumps(sample("kv_pool.allocation", 2)).encode() + b"\n"
#: one line of each kind the slow path tells apart, in this order
MIXED = [
    VALID,
    b"   \r\n",  # blank: skipped whatever the skips
    b'{"a": 1e400}\n',  # JSON, but beyond what orjson reads: reported even when non-JSON is skipped
    b"[1e400]\n",  # not an object: not an event either
    b"[1]\n",
    b"plain text\n",
    b'{"event": "other.logger"}\n',  # JSON, not a catalog event
    b'{"event": [1], "schema_version": {}}\n',  # unhashable name and version
    b'{"event": "kv_pool.allocation"}\n',
    VALID,
]


def _counts(summary: Counts) -> tuple[int, ...]:
    return (
        summary.lines,
        summary.events,
        summary.invalid_events,
        summary.non_json_lines,
        summary.skipped_lines,
        summary.unknown_events,
        summary.findings,
    )


def test_every_kind_of_line_is_counted_and_reported_once(validator: EventValidator) -> None:
    summary = Counts()
    findings = [str(finding) for finding in validate_lines("f", MIXED, summary, validator)]
    starts = [  # what follows a JSON reader's complaint is the reader's wording
        "f:3: ?@?: $: JSON that kvlog cannot read: number is infinity",
        "f:4: ?@?: $: not a JSON event: number is infinity",
        "f:5: ?@?: $: not a JSON event: a JSON list",
        "f:6: ?@?: $: not a JSON event: ",
        "f:7: other.logger@?: $.event: unknown event 'other.logger'",
        "f:8: ?@{}: $.event: missing or not a string: every event needs a name",
        "f:9: kv_pool.allocation@?: $.schema_version: missing: every event names its version of kv_pool.allocation",
    ]
    assert len(findings) == len(starts), findings
    for finding, start in zip(findings, starts, strict=True):
        assert finding.startswith(start), finding
    assert _counts(summary) == (10, 5, 3, 4, 1, 0, 7)
    assert summary.by_event == {"other.logger": 1, "?": 1, "kv_pool.allocation": 1}
    assert summary.ok is False
    assert str(summary) == "5 events, 3 invalid, 4 non-JSON lines, 1 skipped, 7 problems"


def test_skipping_non_json_still_reports_json_kvlog_cannot_read(validator: EventValidator) -> None:
    summary = Counts()
    findings = list(validate_lines("f", MIXED, summary, validator, skips=Skips(non_json=True)))
    assert [finding.line for finding in findings] == [3, 7, 8, 9]
    assert _counts(summary) == (10, 5, 3, 1, 4, 0, 4)


@pytest.mark.parametrize(
    ("line", "why"),
    [
        (b'{"a": 1' + b"0" * 5000 + b"}\n", "number is infinity"),  # an integer of more digits than Python reads
        (b'{"a": ' + b"[" * 3000 + b"]" * 3000 + b"}\n", "depth limit exceeded"),  # deeper than Python recurses
    ],
)
def test_json_beyond_what_python_reads_either_is_still_reported_when_non_json_is_skipped(
    validator: EventValidator, line: bytes, why: str
) -> None:
    summary = Counts()
    (finding,) = validate_lines("f", [line], summary, validator, skips=Skips(non_json=True))
    assert str(finding).startswith(f"f:1: ?@?: $: JSON that kvlog cannot read: {why}")
    assert _counts(summary) == (1, 0, 0, 1, 0, 0, 1)


def test_skipping_unknown_events_counts_them_apart(validator: EventValidator) -> None:
    summary = Counts()
    findings = list(validate_lines("f", MIXED, summary, validator, skips=Skips(non_json=True, unknown_events=True)))
    assert [finding.line for finding in findings] == [3, 9]
    assert _counts(summary) == (10, 3, 1, 1, 6, 2, 2)
    assert summary.by_event == {"kv_pool.allocation": 1}
    assert str(summary) == "3 events, 1 invalid, 1 non-JSON lines, 6 skipped (2 unknown events), 2 problems"


def test_a_summary_that_already_counts_an_input_counts_the_next_one_on_top(validator: EventValidator) -> None:
    """Valid lines are counted as what the slow paths did not count, in this input only."""
    summary = Counts()
    for _ in range(2):
        list(validate_lines("f", MIXED, summary, validator))
    assert _counts(summary) == (20, 10, 6, 8, 2, 0, 14)
    assert summary.by_event == {"other.logger": 2, "?": 2, "kv_pool.allocation": 2}


def test_only_valid_lines_leave_the_summary_ok(validator: EventValidator) -> None:
    summary = Counts()
    assert list(validate_lines("f", [VALID, VALID, VALID], summary, validator)) == []
    assert _counts(summary) == (3, 3, 0, 0, 0, 0, 0)
    assert summary.ok is True


def test_a_line_over_the_limit_is_reported_with_its_length_whatever_the_skips(validator: EventValidator) -> None:
    summary = Counts()
    skips = Skips(non_json=True, unknown_events=True)
    (finding,) = validate_lines("f", [VALID, OverlongLine.of(20_000_000)], summary, validator, skips=skips)
    assert str(finding) == "f:2: ?@?: $: a line of 20000000 bytes, over the 16 MiB an event may take: not read"
    assert _counts(summary) == (2, 1, 0, 1, 0, 0, 1)


def test_a_finding_without_event_or_version_shows_question_marks() -> None:
    problem = LineProblem("a\nb.jsonl", 7, None, None, Violation("$", "x"))
    assert str(problem) == "a\\nb.jsonl:7: ?@?: $: x"
    assert str(LineProblem("f", 1, "e", 0, Violation("$.p", "m"))) == "f:1: e@0: $.p: m"


def test_summaries_fold_every_count() -> None:
    total = Counts(lines=1, events=1, by_event={"a": 1})
    total.add(Counts(2, 3, 4, 5, 6, 7, 8, {"a": 2, "b": 1}))
    assert _counts(total) == (3, 4, 4, 5, 6, 7, 8)
    assert total.by_event == {"a": 3, "b": 1}


def _newline_file(path: Path, size: int, ends: list[int]) -> None:
    """A sparse file of ``size`` bytes, zeros but for a newline ending at each offset in ``ends``."""
    with path.open("wb") as stream:
        stream.truncate(size)
        for end in ends:
            stream.seek(end - 1)
            stream.write(b"\n")


@pytest.mark.parametrize(
    ("size", "jobs", "target"),
    [
        (1 << 20, 2, 128 << 10),  # a quarter of a job's share
        (256 << 10, 16, 64 << 10),  # never below the minimum, 64 KiB
        (96 << 20, 1, 16 << 20),  # never above the maximum, 16 MiB
    ],
)
def test_chunks_are_a_quarter_of_each_jobs_share_within_bounds(
    tmp_path: Path, size: int, jobs: int, target: int
) -> None:
    log = tmp_path / "lines"
    _newline_file(log, size, list(range(4096, size + 1, 4096)))
    assert chunk_ranges(str(log), size, jobs) == [(start, start + target) for start in range(0, size, target)]


def test_a_chunk_boundary_inside_a_long_line_moves_to_its_end_and_no_chunk_is_empty(tmp_path: Path) -> None:
    """A line ending exactly at a later boundary, and a last line holding the last boundary."""
    log = tmp_path / "long"
    target = 64 << 10  # the least a chunk holds
    size = 4 * target + 100
    _newline_file(log, size, [2 * target, 3 * target, 4 * target + 50, size])
    assert chunk_ranges(str(log), size, 16) == [
        (0, 2 * target),
        (2 * target, 3 * target),
        (3 * target, 4 * target + 50),
        (4 * target + 50, size),
    ]


def test_a_line_starting_just_before_a_chunk_boundary_is_kept_whole_in_the_earlier_chunk(tmp_path: Path) -> None:
    """The boundary byte's own line goes to the chunk that holds its start, even one byte before the boundary."""
    log = tmp_path / "edge"
    target = 64 << 10
    size = 3 * target
    _newline_file(log, size, [target - 1, target + 10, size])  # a line from target - 1 to target + 10
    assert chunk_ranges(str(log), size, 16) == [(0, target + 10), (target + 10, size)]


def test_chunking_a_file_that_cannot_be_opened_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"missing: cannot open: No such file or directory"):
        chunk_ranges(str(tmp_path / "missing"), 100, 2)


@pytest.mark.parametrize("jobs", [1, 2, None])
def test_an_empty_file_has_no_lines(tmp_path: Path, validator: EventValidator, jobs: int | None) -> None:
    (tmp_path / "empty").write_bytes(b"")
    summary = Counts()
    assert list(validate_input(str(tmp_path / "empty"), summary, validator, jobs=jobs)) == []
    assert _counts(summary) == (0, 0, 0, 0, 0, 0, 0)


def test_the_cpus_available_are_those_of_this_processs_affinity() -> None:
    assert available_cpus() == len(os.sched_getaffinity(0))


@pytest.mark.parametrize("line", [b"{broken\n", b'{"a": NaN}\n', b"{'a': 1}\n"])
def test_text_that_only_starts_like_an_object_is_not_json_and_is_skipped_with_it(
    validator: EventValidator, line: bytes
) -> None:
    """Only JSON that orjson refuses (too deep, beyond a double) is kept when non-JSON lines are skipped."""
    (finding,) = validate_lines("f", [line], Counts(), validator)
    assert str(finding).startswith("f:1: ?@?: $: not a JSON event: ")
    summary = Counts()
    assert list(validate_lines("f", [line], summary, validator, skips=Skips(non_json=True))) == []
    assert _counts(summary) == (1, 0, 0, 0, 1, 0, 0)


def test_without_affinity_the_cpus_available_are_the_machines(monkeypatch: pytest.MonkeyPatch) -> None:
    """macOS has no ``sched_getaffinity``: every CPU of the machine, and at least one."""
    monkeypatch.delattr(os, "sched_getaffinity")
    assert available_cpus() == (os.cpu_count() or 1)
    monkeypatch.setattr(os, "cpu_count", lambda: None)
    assert available_cpus() == 1
