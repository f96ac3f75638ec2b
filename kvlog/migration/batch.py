"""Running a migration over many inputs: where each output goes, workers across files, dead letters.

``kvlog.commands.migrate`` decides *what* to do; this module does it for each input, in order,
either in this process or on an engine (``--jobs`` worker processes, or a Ray cluster): one file per
task, because context inference is per file; outputs for standard output and dead letters are staged
in temporary files and joined in input order, so the engine never changes the result.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, closing, contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Protocol

import orjson

from kvlog.errors import KvlogError, NamesOptions
from kvlog.io.compression import codec_of, decompressed
from kvlog.io.errors import InputError, OutputError, WorkerDied
from kvlog.io.inplace import InPlace
from kvlog.io.inputs import STDIN, open_raw
from kvlog.io.outputs import NamedSink, atomic_output, remove_stale_temporaries, stdout_binary
from kvlog.io.progress import Advance, InOrder, read_in_task
from kvlog.io.stopping import held_back, off_the_books, on_the_books, stop_on_signals
from kvlog.migration.engine import DeadLetter, MigrateOptions, Migrator
from kvlog.migration.plan import Task
from kvlog.migration.records import Downstream
from kvlog.migration.report import MigrationReport
from kvlog.migration.steps import load_chain

if TYPE_CHECKING:  # kvlog.io.workers imports multiprocessing: a one-file run does without it
    from kvlog.io.workers import Engine

_COPY_BLOCK = 1 << 20


@dataclass
class InputResult:
    """What happened to one input."""

    name: str
    report: MigrationReport
    #: why the input was not migrated; a ``NamesOptions`` is kept whole, for its caller to spell its options
    error: str | NamesOptions | None = None
    #: what became of the file, where there is more to say than the counts (``--in-place``)
    note: str | None = None
    staged_output: str | None = None
    staged_dead: str | None = None


class Taker(Downstream, Protocol):
    """A consumer of the records themselves (``plot``, ``summarize``): each event and each dead letter, as made.

    Records do not cross a process boundary: a taker takes them in the process that runs the engine.
    """

    def dead_letter(self, letter: dict[str, Any], /) -> None: ...


def run_tasks(
    tasks: list[Task],
    migrator: Migrator,
    *,
    migrations: Path | None,
    engine: Engine | None,
    dead_letter: IO[bytes] | None,
    progress: Advance,
    stdout: IO[bytes] | None = None,
    taker: Taker | None = None,
) -> Iterator[InputResult]:
    """Migrate every task, yielding results in input order.

    ``migrator`` is built by the caller from the chain in ``migrations``, so that a broken chain or an
    option it refuses fails once, before anything is opened; each worker builds its own from the same
    directory and ``migrator.options``. ``engine`` runs the tasks (``None``: this process, one after
    the other; standard input is always read here). Output for standard output goes to ``stdout``
    (default: the process's own). ``progress`` hears the files done and their bytes on disk as the
    run goes (``kvlog.io.progress``): read by read here and on a cluster, a file at a time from
    worker processes; each total is reached exactly, a failed input counting as done. ``taker``, where
    given, takes every event and dead letter instead of ``stdout`` and ``dead_letter``: the tasks then
    run in this process, whatever ``engine``.
    """
    wants_stdout = taker is None and any(task.destination.kind == "stdout" for task in tasks)
    sink = _standard_output(stdout) if wants_stdout else None
    tally = InOrder((task.name for task in tasks), progress)
    if taker is not None or engine is None or (engine.local and len(tasks) <= 1) or any(t.name == STDIN for t in tasks):
        for task in tasks:
            result = _run(migrator, task, dead_letter, tally.read, staging=None, stdout=sink, taker=taker)
            tally.done()
            yield result
        return
    with _staging_directory() as staging:
        results = engine.in_order(
            _run_in_worker,
            [(task, dead_letter is not None) for task in tasks],
            start=_start_worker,
            # a worker elsewhere stages in a directory of its own; its files come back through the engine
            start_args=(migrator.options, migrations, staging if engine.local else None),
            streamed=("staged_output", "staged_dead"),
            lost=_lost,
            on_read=tally.read,
        )
        written: list[Path] = []  # the outputs of the tasks done, whose writers have all ended
        try:
            with closing(results):
                for task, result in zip(tasks, results, strict=True):
                    if not engine.local and task.destination.path is not None:
                        written.append(task.destination.path)
                    _unstage(result, sink, dead_letter)
                    tally.done()
                    yield result
        except WorkerDied as exc:
            raise WorkerDied(f"{exc}; the inputs not reported above were not migrated") from None
        finally:
            # a node killed while writing left its temporary beside the output (the retry wrote it):
            # swept once for all outputs, each directory listed once, not once a file
            remove_stale_temporaries(*written)


def _lost(arguments: tuple[Task, bool], reason: str) -> InputResult:
    """The result of a task its engine lost for good: the input is named as failed, as a local failure is."""
    task, _ = arguments
    return InputResult(task.name, MigrationReport(), f"{task.name}: {reason}")


#: the names of the files a worker stages, in a run's staging directory or a cluster machine's temporary one
STAGED_PREFIX = "kvlog-staged-"


@dataclass(frozen=True)
class _Worker:
    """What a worker process keeps for all its files: its migrator, and where it stages its outputs."""

    migrator: Migrator
    staging: Path


def _start_worker(options: MigrateOptions, migrations: Path | None, staging: Path | None) -> _Worker:
    """A worker's migrator; ``staging`` is the driver's directory, or ``None`` on a machine of a cluster.

    A local worker removes its temporaries and exits at once on Ctrl-C or SIGTERM; a cluster's worker
    process is its engine's to stop, often by SIGKILL when the cluster goes down, so it stages its files
    in the machine's temporary directory itself, each removed once the engine has streamed it back: a
    directory of its own would outlive every worker so stopped (an exit hook never runs on SIGKILL).
    """
    if staging is None:
        staging = Path(tempfile.gettempdir())
    else:
        stop_on_signals(worker=True)
    return _Worker(Migrator(load_chain(migrations), options), staging)


@contextmanager
def _staging_directory() -> Iterator[Path]:
    """A private directory for the workers' staged outputs: removed whole, however the run ends."""
    with held_back():
        staging = Path(tempfile.mkdtemp(prefix="kvlog-migrate-"))
        on_the_books(staging)
    try:
        yield staging
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        off_the_books(staging)


def _run_in_worker(worker: _Worker, arguments: tuple[Task, bool]) -> InputResult:
    task, want_dead = arguments
    with ExitStack() as stack:
        dead = stack.enter_context(_staging(worker.staging, "dead")) if want_dead else None
        result = _run(worker.migrator, task, dead, read_in_task, staging=worker.staging, stdout=None)
        if dead is not None:
            result.staged_dead = dead.name
        return result


def _run(  # noqa: PLR0917 - one task's state, passed on as it is
    migrator: Migrator,
    task: Task,
    dead_letter: IO[bytes] | None,
    progress: Callable[[int], None],
    staging: Path | None,
    stdout: IO[bytes] | None,
    taker: Taker | None = None,
) -> InputResult:
    def written(record: dict[str, Any]) -> None:
        if dead_letter is not None:
            dead_letter.write(orjson.dumps(record) + b"\n")

    dead = written if taker is None else taker.dead_letter
    staged: str | None = None
    try:
        if task.destination.kind == "in_place":
            report, note = _run_in_place(migrator, task, dead, progress)
            return InputResult(task.name, report, note=note)
        # the input is opened first: see kvlog.io.inplace
        with _opened(task.name) as (raw, stream):
            counted = _Counting(task.name, stream, progress, raw)
            if taker is not None:  # the records themselves, in this process: nothing to encode, nothing to open
                return InputResult(task.name, migrator.take(task.name, counted, taker, dead))
            with _open_output(task, staging, stdout) as out:
                if staging is not None and task.destination.kind == "stdout":
                    staged = out.name
                report = migrator.migrate(task.name, counted, out, dead)
    except KvlogError as exc:
        error = exc if isinstance(exc, NamesOptions) else str(exc)
        return InputResult(task.name, MigrationReport(), error, staged_output=staged)
    except OSError as exc:  # what no wrapper could attribute (the wrappers name inputs and outputs)
        return InputResult(task.name, MigrationReport(), f"{task.name}: {exc.strerror or exc}", staged_output=staged)
    return InputResult(task.name, report, staged_output=staged)


def _run_in_place(
    migrator: Migrator, task: Task, dead: DeadLetter, progress: Callable[[int], None]
) -> tuple[MigrationReport, str]:
    assert task.destination.backup_suffix is not None
    replacement = InPlace(task.name, task.destination.backup_suffix)
    try:
        codec = codec_of(replacement.source, task.name)  # written back as it was read: gzip stays gzip
        with (
            replacement.output() as temporary,
            codec.read(replacement.source, task.name) as stream,
            codec.write(NamedSink(temporary, task.name), task.name) as out,  # type: ignore[arg-type]
        ):
            report = migrator.migrate(task.name, _Counting(task.name, stream, progress, replacement.source), out, dead)
        return report, replacement.replace(changed=report.changed_lines > 0)
    finally:
        replacement.discard()
        replacement.close()


def _open_output(task: Task, staging: Path | None, stdout: IO[bytes] | None) -> AbstractContextManager[IO[bytes]]:
    """Where a task's output goes; in a worker (``staging`` given), output for standard output is staged there."""
    destination = task.destination
    if destination.kind == "stdout":
        if staging is not None:
            return _staging(staging, "out")
        assert stdout is not None, "run_tasks opens standard output for a task that writes there"
        return nullcontext(stdout)
    if destination.kind == "discard":
        return Path(os.devnull).open("wb")
    if destination.kind == "store":  # an object, made once complete: no directory to create (kvlog.io.store)
        assert destination.uri is not None
        return atomic_output(destination.uri)
    assert destination.path is not None
    try:
        destination.path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"{destination.path.parent}: cannot create the directory: {exc.strerror}") from None
    return atomic_output(destination.path)


def _standard_output(stream: IO[bytes] | None) -> IO[bytes]:
    """``stream``, else the process's standard output, its write errors naming it "standard output"."""
    if stream is None:
        if sys.stdout is None:  # started with descriptor 1 closed (`>&-`)
            raise OutputError("standard output: cannot write: standard output is closed")
        stream = stdout_binary()
    return NamedSink(stream, "standard output")  # type: ignore[return-value]


@contextmanager
def _staging(directory: Path, kind: str) -> Iterator[IO[bytes]]:
    """A worker's output for standard output or the dead letters, joined in input order by the parent.

    It is kept when the input fails part-way: a run in one process has written those lines already,
    and ``--jobs`` must not change the output (nor lose the input's name to a missing staged file).
    A local run's staging directory is removed whole when the run ends, however it ends; a cluster
    worker's files are removed as its engine streams them back (``_start_worker``).
    """
    with tempfile.NamedTemporaryFile(prefix=f"{STAGED_PREFIX}{kind}-", dir=directory, delete=False) as handle:
        yield NamedSink(handle, handle.name)  # type: ignore[misc]


def _unstage(result: InputResult, stdout: IO[bytes] | None, dead_letter: IO[bytes] | None) -> None:
    for staged, sink in ((result.staged_output, stdout), (result.staged_dead, dead_letter)):
        if staged is None:
            continue
        if sink is not None:
            with Path(staged).open("rb") as source:
                while block := source.read(_COPY_BLOCK):
                    sink.write(block)
        Path(staged).unlink()


@contextmanager
def _opened(name: str) -> Iterator[tuple[IO[bytes] | None, IO[bytes]]]:
    """The file as it is on disk (``None`` for standard input) and its content, decompressed."""
    if name == STDIN:
        yield None, sys.stdin.buffer
        return
    with open_raw(name) as raw, decompressed(raw, name) as stream:
        yield raw, stream


class _Counting:
    """A read-only stream that names its input in errors and reports, for progress, how far its file was read.

    Progress counts bytes on disk (``raw``'s position: a ``.gz`` is counted as the compressed bytes it
    took), so that a run's total is the inputs' sizes; standard input and a pipe report nothing.
    """

    def __init__(self, name: str, stream: IO[bytes], progress: Callable[[int], None], raw: IO[bytes] | None) -> None:
        self._name = name
        self._stream = stream
        self._progress = progress
        self._raw = raw if raw is not None and raw.seekable() else None
        self._read = 0
        self._reported = 0

    def read(self, size: int = -1) -> bytes:
        try:
            data = self._stream.read(size)
        except Exception as exc:  # noqa: BLE001 - gzip and zstd raise assorted types for a corrupt stream
            raise InputError(f"{self._name}: cannot read after {self._read} bytes: {exc}") from None
        self._read += len(data)
        if self._raw is not None:
            position = self._raw.tell()
            if position > self._reported:
                self._progress(position - self._reported)
                self._reported = position
        return data
