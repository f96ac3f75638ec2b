"""Running a migration over many inputs: where each output goes, workers across files, dead letters.

The CLI decides *what* to do; this module does it for each input, in order, either in this process
or in ``jobs`` worker processes (one file per task; outputs for standard output and dead letters are
staged in temporary files and joined in input order, so ``--jobs`` never changes the result).
"""

from __future__ import annotations

import multiprocessing
import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import orjson

from kvlog.errors import KvlogError
from kvlog.inputs import STDIN, InputError, open_binary
from kvlog.migration.engine import Migrator, Options
from kvlog.migration.files import atomic_output, stdout_binary
from kvlog.migration.report import Report
from kvlog.migration.steps import load_chain

_COPY_BLOCK = 1 << 20


@dataclass(frozen=True)
class Target:
    """Where one input's output goes: ``stdout``, a ``file`` (atomic), the input itself, or nowhere."""

    kind: str  # "stdout" | "file" | "in_place" | "discard"
    path: Path | None = None
    backup_suffix: str | None = None


@dataclass(frozen=True)
class Task:
    """One input and where its output goes."""

    name: str
    target: Target


@dataclass
class Outcome:
    """What happened to one input."""

    name: str
    report: Report
    error: str | None = None
    staged_output: str | None = None
    staged_dead: str | None = None


def run_tasks(
    tasks: list[Task],
    options: Options,
    *,
    migrations: Path | None,
    jobs: int,
    dead_letter: IO[bytes] | None,
    progress: Callable[[int], None],
) -> Iterator[Outcome]:
    """Migrate every task, yielding outcomes in input order."""
    migrator = Migrator(load_chain(migrations), options)  # here first: a broken chain or option fails once, here
    if jobs <= 1 or len(tasks) <= 1 or any(task.name == STDIN for task in tasks):
        for task in tasks:
            yield _run(migrator, task, dead_letter, progress, stage=False)
        return
    context = multiprocessing.get_context("spawn" if os.name != "posix" else "fork")
    with context.Pool(min(jobs, len(tasks)), initializer=_init_worker, initargs=(options, migrations)) as pool:
        for outcome in pool.imap(_run_in_worker, [(task, dead_letter is not None) for task in tasks]):
            _unstage(outcome, dead_letter)
            progress(_size(outcome.name))
            yield outcome


_worker: Migrator | None = None


def _init_worker(options: Options, migrations: Path | None) -> None:
    global _worker  # noqa: PLW0603 - one migrator per worker process, built once
    _worker = Migrator(load_chain(migrations), options)


def _run_in_worker(arguments: tuple[Task, bool]) -> Outcome:
    task, want_dead = arguments
    assert _worker is not None
    with ExitStack() as stack:
        dead = stack.enter_context(_staging("dead")) if want_dead else None
        outcome = _run(_worker, task, dead, lambda _: None, stage=True)
        if dead is not None:
            outcome.staged_dead = dead.name
        return outcome


def _run(
    migrator: Migrator, task: Task, dead_letter: IO[bytes] | None, progress: Callable[[int], None], stage: bool
) -> Outcome:
    def dead(record: dict[str, Any]) -> None:
        if dead_letter is not None:
            dead_letter.write(orjson.dumps(record) + b"\n")

    staged: str | None = None
    try:
        with _open_output(task, stage) as out, open_binary(task.name) as stream:
            if stage and task.target.kind == "stdout":
                staged = out.name
            report = migrator.migrate(task.name, _Counting(task.name, stream, progress), out, dead)
    except KvlogError as exc:
        return Outcome(task.name, Report(), str(exc), staged)
    except OSError as exc:
        where = task.target.path or task.name
        return Outcome(task.name, Report(), f"{where}: {exc.strerror or exc}", staged)
    return Outcome(task.name, report, None, staged)


def _open_output(task: Task, stage: bool) -> AbstractContextManager[IO[bytes]]:
    target = task.target
    if target.kind == "stdout":
        return _staging("out") if stage else nullcontext(stdout_binary())
    if target.kind == "discard":
        return Path(os.devnull).open("wb")
    path = Path(task.name) if target.kind == "in_place" else target.path
    assert path is not None
    return atomic_output(path, target.backup_suffix if target.kind == "in_place" else None)


@contextmanager
def _staging(kind: str) -> Iterator[IO[bytes]]:
    with tempfile.NamedTemporaryFile(prefix=f"kvlog-migrate-{kind}-", delete=False) as handle:
        yield handle


def _unstage(outcome: Outcome, dead_letter: IO[bytes] | None) -> None:
    for staged, sink in ((outcome.staged_output, stdout_binary()), (outcome.staged_dead, dead_letter)):
        if staged is None:
            continue
        if sink is not None:
            with Path(staged).open("rb") as source:
                while block := source.read(_COPY_BLOCK):
                    sink.write(block)
        Path(staged).unlink()


def _size(name: str) -> int:
    try:
        return 0 if name == STDIN else Path(name).stat().st_size
    except OSError:
        return 0


class _Counting:
    """A read-only stream that reports how much was read (for the progress bar) and names its input in errors."""

    def __init__(self, name: str, stream: IO[bytes], progress: Callable[[int], None]) -> None:
        self._name = name
        self._stream = stream
        self._progress = progress
        self._read = 0

    def read(self, size: int = -1) -> bytes:
        try:
            data = self._stream.read(size)
        except Exception as exc:  # noqa: BLE001 - gzip and zstd raise assorted types for a corrupt stream
            raise InputError(f"{self._name}: cannot read after {self._read} bytes: {exc}") from None
        self._read += len(data)
        self._progress(len(data))
        return data
