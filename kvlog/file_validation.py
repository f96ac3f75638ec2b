"""Validating JSON-lines log files against the catalog: the library behind ``kvlog validate``.

Almost every line of a real log is a valid event, so the loop is built for that case: one
``orjson.loads``, a lookup by event name then version, one call into the compiled validator and one
``orjson.dumps`` to see that the line is what orjson writes (so it holds no duplicate key) per line;
everything else (the reference engine's explanations, counting by event) happens only
for a line that fails. Plain files are read in byte ranges that start at line starts, validated in
this process or, for large files, by worker processes; findings are put back in file order with
file line numbers, so the output is the same for any number of jobs and the same as reading the
file as a stream (standard input, ``.gz``), line for line.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import json
import os
import signal
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import IO, TYPE_CHECKING

import orjson

from kvlog import native
from kvlog.io.compression import is_compressed, read_lines
from kvlog.io.counts import add_counts
from kvlog.io.errors import InputError, WorkerDied
from kvlog.io.inputs import MAX_LINE_BYTES, OverlongLine, bounded_lines, file_size, range_blocks, range_lines
from kvlog.io.jsonline import problems
from kvlog.io.progress import InOrder
from kvlog.io.workers import Engine, in_order
from kvlog.schema import decoders
from kvlog.schema.catalog import Catalog
from kvlog.schema.event_validator import EventValidator, Violation
from kvlog.schema.readings import json_text
from kvlog.text.printable import printable, printable_name

if TYPE_CHECKING:
    from kvlog._native import EventDecoders

#: Below this size a file is validated serially unless ``jobs`` is given: starting workers costs more.
PARALLEL_MIN_BYTES = 16 << 20
#: Chunks are small enough that workers finish together and large enough that a chunk costs little.
MIN_CHUNK_BYTES = 64 << 10
MAX_CHUNK_BYTES = 16 << 20
_CHUNKS_PER_JOB = 4
#: how kvlog writes a line (``jsonline.problems`` asks whether a line reads back as written this way)
_CANONICAL = orjson.OPT_APPEND_NEWLINE


#: compiled "valid?" tests by event name, then schema version, as the hot loop looks them up
_Checks = dict[object, dict[object, Callable[[object], bool]]]


@dataclass(frozen=True)
class LineProblem:
    """One problem at one line of one file."""

    file: str
    line: int
    event: str | None
    version: object
    violation: Violation

    def __str__(self) -> str:
        """One line, whatever the file name or the log holds (see ``kvlog.text.printable``)."""
        event = self.event if self.event is not None else "?"
        version = json_text(self.version) if self.version is not None else "?"
        where = f"{printable_name(self.file)}:{self.line}: "
        return where + printable(f"{event}@{version}: {self.violation.path}: {self.violation.message}")


@dataclass
class Counts:
    """Counts over everything validated."""

    lines: int = 0
    events: int = 0
    invalid_events: int = 0
    non_json_lines: int = 0
    skipped_lines: int = 0
    #: of the skipped lines, JSON objects that are not catalog events (``skip_unknown_events``)
    unknown_events: int = 0
    findings: int = 0
    by_event: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True when nothing was wrong: no finding, and no event counted invalid."""
        return self.findings == 0 and self.invalid_events == 0

    def add(self, other: Counts) -> None:
        """Fold another part's counts into this one."""
        add_counts(self, other)

    def __str__(self) -> str:
        unknown = f" ({self.unknown_events} unknown events)" if self.unknown_events else ""
        return (
            f"{self.events} events, {self.invalid_events} invalid, {self.non_json_lines} non-JSON lines, "
            f"{self.skipped_lines} skipped{unknown}, {self.findings} problems"
        )


@dataclass(frozen=True)
class Skips:
    """Which lines of a mixed log are not kvlog's to judge: skipped and counted, never reported."""

    #: lines that are not JSON objects (text, JSON arrays, strings, numbers)
    non_json: bool = False
    #: JSON objects whose ``event`` is not the name of a catalog event (other loggers' JSON)
    unknown_events: bool = False


_NO_SKIPS = Skips()


def validate_lines(
    name: str,
    lines: Iterable[bytes],
    counts: Counts,
    validator: EventValidator,
    *,
    skips: Skips = _NO_SKIPS,
) -> Iterator[LineProblem]:
    """Validate each line of one input, yielding a finding for every problem and counting in ``counts``."""
    return _judge(name, enumerate(lines, 1), counts, validator, skips, None)


def _judge(  # noqa: PLR0917 - validate_lines' state, passed on
    name: str,
    numbered: Iterable[tuple[int, bytes]],
    counts: Counts,
    validator: EventValidator,
    skips: Skips,
    read: _NativeLines | None,
) -> Iterator[LineProblem]:
    """``validate_lines`` on numbered lines: every line of an input, or only those ``read`` (the native path) left.

    Every line counted and not judged here is a valid event: with ``read``, its count of lines read.
    """
    loads, dumps = orjson.loads, orjson.dumps
    checks: _Checks = {}
    number = 0
    accounted = counts.events + counts.skipped_lines + counts.non_json_lines  # lines the slow paths count
    try:
        for number, line in numbered:
            try:
                event = loads(line)
                check = checks[event["event"]][event["schema_version"]]
                # jsonline.problems' first test, inlined: a line that is what orjson writes for its event has
                # no duplicate key, no nesting too deep and no integer beyond 64 bits (a third of the loop's
                # Python time was the two calls that ask it); too deep a line raises and looks closer
                canonical = dumps(event, option=_CANONICAL) == line
            except Exception:  # noqa: BLE001 - any unusual line (not JSON, no name, first of its kind) looks closer
                yield from _look_closer(name, number, line, counts, validator, checks, skips)
                continue
            if not check(event) or (not canonical and problems(line, event)):
                yield from _explain(name, number, line, event, counts, validator)
    finally:
        # every line is valid, skipped, non-JSON or an event counted by a slow path: the rest were valid
        accounted = counts.events + counts.skipped_lines + counts.non_json_lines - accounted
        total = number if read is None else read.lines
        counts.lines += total
        counts.events += total - accounted


class _NativeLines:
    """The lines of a byte range that ``kvlog._native`` does not accept as valid events, numbered from 1.

    Each run of ``range_blocks`` goes to the compiled validator whole; only the lines it cannot vouch
    for become bytes, for ``_judge`` to look at as the Python path does (an overlong one as its
    ``OverlongLine``). ``lines`` counts every line read so far, accepted or not.
    """

    def __init__(self, stream: IO[bytes], size: int, decoders: EventDecoders) -> None:
        self.stream, self.size, self.decoders = stream, size, decoders
        self.lines = 0

    def __iter__(self) -> Iterator[tuple[int, bytes]]:
        cap = MAX_LINE_BYTES
        for run in range_blocks(self.stream, self.size):
            if isinstance(run, OverlongLine):
                self.lines += 1
                yield self.lines, run
                continue
            data, start, end = run
            count, rejected = self.decoders.rejected(data, start, end, cap)
            for index, begin, stop in rejected:
                yield self.lines + index + 1, data[begin:stop] if stop - begin <= cap else OverlongLine.of(stop - begin)
            self.lines += count


def native_decoders(catalog: Catalog) -> EventDecoders | None:
    """The compiled validator over ``catalog``'s decoder table, where ``kvlog._native`` is built and selected."""
    compiled = native.selected()
    return None if compiled is None else _built_decoders(compiled, catalog)


@cache
def _built_decoders(compiled: ModuleType, catalog: Catalog) -> EventDecoders:
    built: EventDecoders = compiled.EventDecoders(decoders.for_catalog(catalog))
    return built


def _look_closer(  # noqa: PLR0917 - the hot loop's state, passed positionally on purpose: it is called per line
    name: str,
    number: int,
    line: bytes,
    counts: Counts,
    validator: EventValidator,
    checks: _Checks,
    skips: Skips,
) -> list[LineProblem]:
    """The slow path of ``validate_lines``: a line that is not JSON, not an object, or a new kind of event."""
    if isinstance(line, OverlongLine):  # read past, never held: reported whatever the skips (it may be an event)
        counts.non_json_lines += 1
        counts.findings += 1
        message = f"a line of {line.length} bytes, over the {MAX_LINE_BYTES >> 20} MiB an event may take: not read"
        return [LineProblem(name, number, None, None, Violation("$", message))]
    line = line.rstrip(b"\r\n")  # reports do not depend on how (or whether) the line ended
    try:
        event = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        unreadable = _json_orjson_refuses(line)
        if not line.strip() or (skips.non_json and not unreadable):
            counts.skipped_lines += 1
            return []
        counts.non_json_lines += 1
        counts.findings += 1
        what = "JSON that kvlog cannot read" if unreadable else "not a JSON event"
        return [LineProblem(name, number, None, None, Violation("$", f"{what}: {exc}"))]
    if type(event) is not dict:
        if skips.non_json:
            counts.skipped_lines += 1
            return []
        counts.non_json_lines += 1
        counts.findings += 1
        return [
            LineProblem(name, number, None, None, Violation("$", f"not a JSON event: a JSON {type(event).__name__}"))
        ]
    name_field, version = event.get("event"), event.get("schema_version")
    if skips.unknown_events and not (isinstance(name_field, str) and name_field in validator.catalog.schemas):
        counts.skipped_lines += 1
        counts.unknown_events += 1
        return []
    check = validator.fast_check(name_field, version)
    with contextlib.suppress(TypeError):  # an unhashable name or version: never valid, nothing to remember
        checks.setdefault(name_field, {})[version] = check
    if check(event) and not problems(line, event):
        counts.events += 1
        return []
    return list(_explain(name, number, line, event, counts, validator))


def _json_orjson_refuses(line: bytes) -> bool:
    """Whether a line orjson refused is a JSON object all the same (over 1024 levels deep, a number beyond a double).

    Such a line is reported even where lines that are not JSON are skipped: it may be an event.
    """
    if not line.lstrip().startswith(b"{"):
        return False
    try:
        json.loads(line, parse_constant=_not_json)
    except json.JSONDecodeError:
        return False
    except (ValueError, RecursionError):  # too long a number, too deep: JSON, beyond what the library reads
        return True
    return True


def _not_json(constant: str) -> object:
    raise json.JSONDecodeError(f"{constant} is not JSON", constant, 0)


def _explain(  # noqa: PLR0917 - the hot loop's state, as _look_closer
    name: str, number: int, line: bytes, event: dict[str, object], counts: Counts, validator: EventValidator
) -> Iterator[LineProblem]:
    """Every reason a line's event is not valid: how the line reads, then its schema violations.

    A line nested deeper than kvlog reads gets that one finding: its schema violations would be
    explained by a validator that recurses into the nesting.
    """
    counts.events += 1
    counts.invalid_events += 1
    name_field = event.get("event")
    label = name_field if isinstance(name_field, str) else None
    counts.by_event[label or "?"] = counts.by_event.get(label or "?", 0) + 1
    version = event.get("schema_version")
    found = problems(line, event)
    violations = [Violation(problem.path, problem.message) for problem in found]
    if not any(problem.too_deep for problem in found):
        violations += validator.violations(event)
    for violation in violations:
        counts.findings += 1
        yield LineProblem(name, number, label, version, violation)


def validate_input(
    name: str,
    counts: Counts,
    validator: EventValidator,
    *,
    skips: Skips = _NO_SKIPS,
    jobs: int | None = None,
    on_read: Callable[[int], None] | None = None,
) -> Iterator[LineProblem]:
    """Validate one input (a path or ``-``), in parallel where it pays; raises InputError if unreadable.

    A plain file is read in large byte ranges that start at line starts; ``jobs`` worker processes
    validate them (``None``: the number of CPUs for files of at least ``PARALLEL_MIN_BYTES``, else
    this process alone). Standard input and compressed files are streams, validated line by line.
    ``on_read`` hears the bytes of each range as it is done (progress; a stream tells none).
    """
    size = _splittable_size(name)
    workers = jobs if jobs is not None else (available_cpus() if size >= PARALLEL_MIN_BYTES else 1)
    if size > 0:
        yield from _validate_chunks(name, size, workers, counts, validator, skips, on_read)
    else:
        yield from validate_lines(name, read_lines(name), counts, validator, skips=skips)


def available_cpus() -> int:
    """CPUs this process may run on (its affinity, not the machine's count)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _splittable_size(name: str) -> int:
    """The size of ``name`` if it is a plain file that can be read by byte range, else -1."""
    size = None if is_compressed(name) else file_size(name)
    return -1 if size is None else size  # the serial path opens it and reports why it cannot


def chunk_ranges(name: str, size: int, jobs: int) -> list[tuple[int, int]]:
    """Byte ranges covering ``name``, each starting at the beginning of a line."""
    target = min(max(size // (jobs * _CHUNKS_PER_JOB), MIN_CHUNK_BYTES), MAX_CHUNK_BYTES)
    starts = [0]
    try:
        with Path(name).open("rb") as stream:
            for approximate in range(target, size, target):
                if approximate <= starts[-1]:
                    continue
                stream.seek(approximate - 1)
                for _ in bounded_lines(stream):  # to the end of the line that holds byte approximate - 1
                    break
                if stream.tell() >= size:
                    break
                starts.append(stream.tell())
    except OSError as exc:
        raise InputError(f"{name}: cannot open: {exc.strerror or exc}") from None
    return list(zip(starts, [*starts[1:], size], strict=True))


@dataclass(frozen=True)
class _Chunk:
    name: str
    start: int
    end: int
    skips: Skips


@dataclass(frozen=True)
class Unreadable:
    """An input that could not be read, or not to its end (what was read before is validated and counted)."""

    name: str
    #: why, without the name
    reason: str


@dataclass(frozen=True)
class _Part:
    """One task of ``validate_on``: a whole input read as a stream (``end`` None), or a byte range of one."""

    name: str
    start: int
    end: int | None
    skips: Skips
    #: the input's first part: line numbers start again (an input may be named twice)
    first: bool


@dataclass(frozen=True)
class _PartResult:
    findings: list[LineProblem]
    counts: Counts
    error: str | None = None


def _start_worker(catalog: Catalog) -> EventValidator:
    """In a worker, as it starts: the validator its chunks share."""
    # Stopping is the parent's to do: a stop signal to the whole process group (Ctrl-C, a hang-up) is
    # ignored here, and the pool's SIGTERM kills at once. A Python handler can miss a signal that lands
    # just before a blocking wait on the pool's queue, and the pool then waits for that worker for ever.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    for signum in (signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, signal.SIG_IGN)
    validator = EventValidator(catalog)
    gc.freeze()  # what the worker inherited is never garbage: keep collections off its copy-on-write pages
    return validator


def _validate_chunk(validator: EventValidator, chunk: _Chunk) -> tuple[list[LineProblem], Counts]:
    """Validate one byte range; line numbers in the findings count from the chunk's first line."""
    counts = Counts()
    try:
        with Path(chunk.name).open("rb") as stream:
            stream.seek(chunk.start)
            size = chunk.end - chunk.start
            compiled = native_decoders(validator.catalog)
            if compiled is None:
                lines = range_lines(stream, size)  # split at b"\n" only, as a file iterates
                findings = list(validate_lines(chunk.name, lines, counts, validator, skips=chunk.skips))
            else:
                read = _NativeLines(stream, size, compiled)
                findings = list(_judge(chunk.name, read, counts, validator, chunk.skips, read))
    except OSError as exc:
        raise InputError(f"{chunk.name}: cannot read: {exc.strerror or exc}") from None
    return findings, counts


def _validate_chunks(  # noqa: PLR0917 - validate_input's arguments, passed on
    name: str,
    size: int,
    jobs: int,
    counts: Counts,
    validator: EventValidator,
    skips: Skips,
    on_read: Callable[[int], None] | None = None,
) -> Iterator[LineProblem]:
    """Validate the chunks of a plain file, here or in worker processes, reporting in file order."""
    chunks = [_Chunk(name, start, end, skips) for start, end in chunk_ranges(name, size, jobs)]
    if jobs == 1 or len(chunks) == 1:
        results: Iterable[tuple[list[LineProblem], Counts]] = (_validate_chunk(validator, chunk) for chunk in chunks)
        yield from _in_file_order(_reading(results, chunks, on_read), counts)
        return
    results = in_order(
        _validate_chunk,
        chunks,
        workers=min(jobs, len(chunks)),
        start=_start_worker,
        start_args=(validator.catalog,),
    )
    try:
        with contextlib.closing(results):
            yield from _in_file_order(_reading(results, chunks, on_read), counts)
    except WorkerDied as exc:
        raise InputError(f"{name}: cannot validate: {exc}") from None


def _reading(
    results: Iterable[tuple[list[LineProblem], Counts]], chunks: list[_Chunk], on_read: Callable[[int], None] | None
) -> Iterator[tuple[list[LineProblem], Counts]]:
    """``results``, each chunk's bytes told to ``on_read`` as its result comes (progress)."""
    for chunk, result in zip(chunks, results, strict=False):
        if on_read is not None:
            on_read(chunk.end - chunk.start)
        yield result


def validate_on(
    engine: Engine,
    names: Iterable[str],
    counts: Counts,
    validator: EventValidator,
    *,
    skips: Skips = _NO_SKIPS,
    progress: InOrder | None = None,
) -> Iterator[LineProblem | Unreadable]:
    """Validate ``names`` on ``engine`` (a Ray cluster): the findings and unreadable inputs in input order.

    An input is a task, read as a stream, so that compressed files and files only the cluster's
    nodes see are validated where they are; a plain file of ``PARALLEL_MIN_BYTES`` or more that this
    machine sees is split in byte ranges at line starts, as ``validate_input`` splits it. Findings,
    counts and failures are those ``validate_input`` gives, input by input (standard input is not an
    engine's to read: validate it with ``validate_input``). ``progress`` (over ``names``) hears each
    byte range as its result comes, and each input as its last part does.
    """
    parts = engine.in_order(
        _validate_part,
        _parts(names, engine.workers, skips),
        start=EventValidator,
        start_args=(validator.catalog,),
        lost=_lost_part,
    )
    lines_before, failed, started = 0, False, False
    with contextlib.closing(parts):
        for part, result in parts:
            if part.first:
                if started and progress is not None:
                    progress.done()
                lines_before, failed, started = 0, False, True
            if part.end is not None and progress is not None:
                progress.read(part.end - part.start)
            if failed:  # a part after one that could not be read: the input is reported already
                continue
            if result.error is None or part.end is None:  # a stream's lines before a failure were read
                for finding in result.findings:
                    yield dataclasses.replace(finding, line=finding.line + lines_before)
                counts.add(result.counts)
            lines_before += result.counts.lines
            if result.error is not None:
                failed = True
                yield Unreadable(part.name, result.error)
    if started and progress is not None:
        progress.done()


def _parts(names: Iterable[str], workers: int, skips: Skips) -> Iterator[_Part]:
    for name in names:
        size = _splittable_size(name)
        try:
            ranges = chunk_ranges(name, size, workers) if size >= PARALLEL_MIN_BYTES else []
        except InputError:
            ranges = []  # the task opens it, and says why it cannot
        if not ranges:
            yield _Part(name, 0, None, skips, first=True)
        for index, (start, end) in enumerate(ranges):
            yield _Part(name, start, end, skips, first=index == 0)


def _validate_part(validator: EventValidator, part: _Part) -> tuple[_Part, _PartResult]:
    """One part of ``validate_on``, on a worker: an error is returned with what was read before it."""
    counts = Counts()
    findings: list[LineProblem] = []
    try:
        if part.end is None:
            findings.extend(validate_lines(part.name, read_lines(part.name), counts, validator, skips=part.skips))
        else:
            findings, counts = _validate_chunk(validator, _Chunk(part.name, part.start, part.end, part.skips))
    except (InputError, OSError) as exc:
        return part, _PartResult(findings, counts, unreadable_reason(part.name, exc))
    return part, _PartResult(findings, counts)


def unreadable_reason(name: str, error: InputError | OSError) -> str:
    """Why input ``name`` could not be read, without its name: one wording, wherever it was read."""
    if isinstance(error, InputError):  # its message starts with the name
        return str(error).removeprefix(f"{printable_name(name)}: ")
    return f"cannot read: {error.strerror or error}"  # a read failure no reader named: the file is this input


def _lost_part(part: _Part, reason: str) -> tuple[_Part, _PartResult]:
    return part, _PartResult([], Counts(), reason)


def _in_file_order(results: Iterable[tuple[list[LineProblem], Counts]], counts: Counts) -> Iterator[LineProblem]:
    """Findings of consecutive chunks, renumbered from chunk lines to file lines."""
    lines_before = 0
    for findings, part in results:
        for finding in findings:
            yield dataclasses.replace(finding, line=finding.line + lines_before)
        lines_before += part.lines
        counts.add(part)
