"""``kvlog.file_validation``: which path a line takes, how many processes a file is given, ``validate_on``.

Lines: the hot loop settles a line of a kind (event name, version) it has seen by one compiled check;
only the first line of each kind, and lines that are not events, take the slow path (``_look_closer``).

Workers: a plain file under ``PARALLEL_MIN_BYTES`` is validated in this process unless ``jobs`` says
otherwise, one at that size is spread over the CPUs, ``jobs=1`` and a file of one chunk never start a
pool. The pool and the chunk validation are replaced by recorders here: which path ran is the question.

Engine: ``validate_on`` runs on a serial engine of this process (the ``Engine`` protocol, each task run
here in order, one chosen task "lost" as a dead node's would be). Its findings, counts and unreadable
inputs must be those ``validate_input`` gives input by input, in input order: a plain file, a file of
``PARALLEL_MIN_BYTES`` split in byte ranges, a ``.gz``, one cut short, a missing file, a file named twice.
"""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Callable, Generator, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pytest
from foundation_samples import sample

from kvlog import events, file_validation
from kvlog.file_validation import (
    PARALLEL_MIN_BYTES,
    Counts,
    LineProblem,
    Unreadable,
    chunk_ranges,
    unreadable_reason,
    validate_input,
    validate_lines,
    validate_on,
)
from kvlog.io.errors import InputError
from kvlog.io.progress import InOrder
from kvlog.schema.event_validator import EventValidator

VALID = json.dumps(sample("kv_pool.allocation", 2)).encode() + b"\n"
NO_VERSION = b'{"event": "kv_pool.allocation"}\n'
TEXT = b"plain text\n"


def _counts(summary: Counts) -> tuple[Any, ...]:
    return (
        summary.lines,
        summary.events,
        summary.invalid_events,
        summary.non_json_lines,
        summary.skipped_lines,
        summary.findings,
        summary.by_event,
    )


# -- which path a line takes -----------------------------------------------------------------------------


def test_lines_of_a_kind_already_seen_never_take_the_slow_path(
    monkeypatch: pytest.MonkeyPatch, validator: EventValidator
) -> None:
    slow: list[int] = []
    look_closer = file_validation._look_closer

    def spy(name: str, number: int, *rest: Any) -> list[LineProblem]:
        slow.append(number)
        return look_closer(name, number, *rest)

    monkeypatch.setattr(file_validation, "_look_closer", spy)
    other = orjson.dumps(sample("kv_arena.closed", events.KvArenaClosed.VERSION), option=orjson.OPT_APPEND_NEWLINE)
    lines = [VALID] * 50 + [other] * 50 + [VALID, NO_VERSION, TEXT, other, NO_VERSION]
    summary = Counts()
    findings = list(validate_lines("f", lines, summary, validator))
    assert slow == [1, 51, 102, 103, 105]  # the first of each kind; the lines no compiled check settles
    assert [finding.line for finding in findings] == [102, 103, 105]
    assert _counts(summary)[:6] == (105, 104, 2, 1, 0, 3)


# -- how many processes a file is given --------------------------------------------------------------------


@dataclass
class Paths:
    """Which way each chunk went: validated here, or handed to a pool of ``pools[i]`` workers."""

    here: int = 0
    pools: list[int] = field(default_factory=list)


@pytest.fixture
def paths(monkeypatch: pytest.MonkeyPatch) -> Paths:
    seen = Paths()

    def chunk_here(validator: EventValidator, chunk: Any, *_more: Any) -> tuple[list[LineProblem], Counts]:
        seen.here += 1
        return [], Counts()

    def pool(
        function: Any, items: Iterable[Any], *, workers: int, start: Any, start_args: Any, **_options: Any
    ) -> Generator[tuple[list[LineProblem], Counts], None, None]:
        seen.pools.append(workers)
        for _ in items:
            yield [], Counts()

    monkeypatch.setattr(file_validation, "_validate_chunk", chunk_here)
    monkeypatch.setattr(file_validation, "in_order", pool)
    monkeypatch.setattr(file_validation, "available_cpus", lambda: 3)
    return seen


def _blank_lines(path: Path, size: int) -> str:
    """A file of ``size`` bytes (a multiple of 4096) in blank lines of 4096 bytes."""
    path.write_bytes((b" " * 4095 + b"\n") * (size // 4096))
    return str(path)


@pytest.mark.parametrize(
    ("size", "jobs", "pools"),
    [
        (PARALLEL_MIN_BYTES - 4096, None, []),  # under the size: starting workers costs more than it saves
        (PARALLEL_MIN_BYTES, None, [3]),  # at the size: every CPU of this process's affinity
        (PARALLEL_MIN_BYTES, 1, []),  # --jobs 1: never a pool
        (1 << 20, 2, [2]),  # --jobs 2 on a small file of several chunks
        (4096, 2, []),  # one chunk: nothing to share
    ],
)
def test_a_file_is_validated_here_or_by_a_pool_by_its_size_and_jobs(
    tmp_path: Path, validator: EventValidator, paths: Paths, size: int, jobs: int | None, pools: list[int]
) -> None:
    name = _blank_lines(tmp_path / "log", size)
    assert list(validate_input(name, Counts(), validator, jobs=jobs)) == []
    assert paths.pools == pools
    assert paths.here == (0 if pools else len(chunk_ranges(name, size, jobs or 1)))


# -- validate_on ---------------------------------------------------------------------------------------------


class SerialEngine:
    """The ``Engine`` protocol in this process: tasks run in order; the ``lose``-th task is lost for good."""

    local = True

    def __init__(self, workers: int, lose: int | None = None) -> None:
        self.workers = workers
        self.lose = lose

    def in_order(
        self,
        function: Callable[[Any, Any], Any],
        items: Iterable[Any],
        *,
        start: Callable[..., Any],
        start_args: tuple[Any, ...],
        streamed: tuple[str, ...] = (),
        lost: Callable[[Any, str], Any] | None = None,
        **_options: Any,  # what else an engine may be told (progress): nothing to do here
    ) -> Generator[Any, None, None]:
        state = start(*start_args)
        for index, item in enumerate(items):
            if index == self.lose:
                assert lost is not None
                yield lost(item, "its node died")
            else:
                yield function(state, item)


def _lines(count: int, every: int, odd: bytes) -> bytes:
    """``count`` lines, each ``every``-th of them ``odd``, the rest valid events."""
    return b"".join(odd if number % every == 0 else VALID for number in range(1, count + 1))


def _sized(path: Path, body: bytes, size: int) -> str:
    """``body`` padded with one blank line to exactly ``size`` bytes."""
    path.write_bytes(body + b" " * (size - len(body) - 1) + b"\n")
    return str(path)


def _inputs(tmp_path: Path, split_at: int) -> list[str]:
    plain = tmp_path / "plain.jsonl"
    plain.write_bytes(_lines(40, 7, NO_VERSION) + TEXT)
    big = _sized(tmp_path / "big.jsonl", _lines(split_at // len(VALID) - 20, 97, TEXT), split_at)
    packed = tmp_path / "packed.jsonl.gz"
    packed.write_bytes(gzip.compress(_lines(30, 4, TEXT)))
    cut = tmp_path / "cut.jsonl.gz"
    varied = b"".join(b'{"event": "x", "n": %d}\n' % (number * 7919 % 100003) for number in range(4000))
    whole = gzip.compress(varied)
    cut.write_bytes(whole[: len(whole) // 2])
    missing = tmp_path / "missing.jsonl"
    return [str(plain), big, str(packed), str(cut), str(missing), str(plain)]


def _one_by_one(names: list[str], validator: EventValidator) -> tuple[list[LineProblem | Unreadable], Counts]:
    """What ``kvlog validate`` without an engine reports: each input read here, a failure after its findings."""
    found: list[LineProblem | Unreadable] = []
    summary = Counts()
    for name in names:
        try:
            found.extend(validate_input(name, summary, validator, jobs=1))
        except InputError as exc:
            found.append(Unreadable(name, unreadable_reason(name, exc)))
    return found, summary


@pytest.fixture
def small_split(monkeypatch: pytest.MonkeyPatch) -> int:
    """A file of 256 KiB is split as one of PARALLEL_MIN_BYTES is, so that its lines stay few."""
    monkeypatch.setattr(file_validation, "PARALLEL_MIN_BYTES", 256 << 10)
    return 256 << 10


def test_validate_on_reports_what_validating_each_input_here_reports(
    tmp_path: Path, validator: EventValidator, small_split: int
) -> None:
    names = _inputs(tmp_path, small_split)
    assert len(chunk_ranges(names[1], small_split, 2)) > 2  # the big file is validated in several parts
    expected, expected_summary = _one_by_one(names, validator)
    summary = Counts()
    found = list(validate_on(SerialEngine(workers=2), names, summary, validator))
    assert [str(item) for item in found] == [str(item) for item in expected]
    assert found == expected
    assert _counts(summary) == _counts(expected_summary)
    failures = [item for item in found if isinstance(item, Unreadable)]
    assert [(Path(item.name).name, item.reason.split(":")[0]) for item in failures] == [
        ("cut.jsonl.gz", "cannot read"),
        ("missing.jsonl", "cannot open"),
    ]
    big_lines = [item.line for item in found if isinstance(item, LineProblem) and item.file == names[1]]
    assert big_lines == list(range(97, big_lines[-1] + 1, 97)) and big_lines[-1] > small_split // len(VALID) // 2


def test_a_part_lost_with_its_node_ends_that_input_and_keeps_the_parts_before_it(
    tmp_path: Path, validator: EventValidator, small_split: int
) -> None:
    plain, big, *_ = _inputs(tmp_path, small_split)
    (first_start, first_end), *_ = chunk_ranges(big, small_split, 2)
    head = tmp_path / "head.jsonl"
    head.write_bytes(Path(big).read_bytes()[first_start:first_end])
    expected, expected_summary = _one_by_one([plain, str(head)], validator)
    expected = [
        item if item.file == plain else LineProblem(big, item.line, item.event, item.version, item.violation)
        for item in expected
        if isinstance(item, LineProblem)
    ]
    summary = Counts()
    # tasks: plain (0), then the parts of big: its first (1) is read, its second (2) is lost, the rest skipped
    found = list(validate_on(SerialEngine(workers=2, lose=2), [plain, big, plain], summary, validator))
    again, _ = _one_by_one([plain], validator)
    assert found == [*expected, Unreadable(big, "its node died"), *again]
    plain_counts = _one_by_one([plain], validator)[1]
    assert summary.lines == expected_summary.lines + plain_counts.lines
    assert summary.findings == expected_summary.findings + plain_counts.findings


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (InputError("logs/a.jsonl: cannot open: No such file or directory"), "cannot open: No such file or directory"),
        (InputError("logs/a.jsonl: is a directory"), "is a directory"),
        (OSError(5, "Input/output error"), "cannot read: Input/output error"),
        (OSError("a disk that went away"), "cannot read: a disk that went away"),
    ],
)
def test_an_unreadable_input_is_told_without_its_name(error: InputError | OSError, reason: str) -> None:
    assert unreadable_reason("logs/a.jsonl", error) == reason


def test_validate_on_tells_progress_each_byte_range_read_and_each_input_once_done(
    tmp_path: Path, validator: EventValidator, small_split: int
) -> None:
    names = _inputs(tmp_path, small_split)[:3]  # plain, big (in parts), packed
    steps: list[tuple[int, int]] = []
    progress = InOrder(names, lambda files, count: steps.append((files, count)))
    list(validate_on(SerialEngine(workers=2), names, Counts(), validator, progress=progress))
    ranges = chunk_ranges(names[1], small_split, 2)
    sizes = [Path(name).stat().st_size for name in names]
    assert [files for files, _ in steps] == [1] + [0] * len(ranges) + [1, 1]
    assert [count for files, count in steps[1:-2]] == [end - start for start, end in ranges]
    assert sum(count for _, count in steps) == sum(sizes)


def test_the_cpus_counted_are_this_processs_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """``sched_getaffinity(0)`` is this process; another pid (init's, say) may run on other CPUs."""
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2} if pid == 0 else {0})
    assert file_validation.available_cpus() == 3


def test_validate_input_tells_each_byte_range_as_it_is_done_and_a_stream_nothing(
    tmp_path: Path, validator: EventValidator
) -> None:
    plain = tmp_path / "plain.jsonl"
    plain.write_bytes(_lines(2000, 13, NO_VERSION))
    size = plain.stat().st_size
    reads: list[int] = []
    list(validate_input(str(plain), Counts(), validator, jobs=1, on_read=reads.append))
    assert reads == [end - start for start, end in chunk_ranges(str(plain), size, 1)]
    assert len(reads) > 1 and sum(reads) == size
    packed = tmp_path / "packed.jsonl.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    streamed: list[int] = []
    list(validate_input(str(packed), Counts(), validator, on_read=streamed.append))
    assert streamed == []


@pytest.mark.parametrize("line", [VALID, NO_VERSION, TEXT, b"   ", b'{"a": 1e400}\n', b"[1]\n", b'{"a": 1\n'])
def test_a_line_is_reported_the_same_whatever_ends_it(validator: EventValidator, line: bytes) -> None:
    body = line.rstrip(b"\n")
    reports = []
    for ending in (b"\n", b"\r\n", b""):
        summary = Counts()
        found = [str(finding) for finding in validate_lines("f", [body + ending], summary, validator)]
        reports.append((found, _counts(summary)))
    assert reports[0] == reports[1] == reports[2]
