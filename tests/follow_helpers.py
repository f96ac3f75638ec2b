"""Running ``kvlog.commands.follow`` beside a test that writes the log, and the logs to write."""

from __future__ import annotations

import io
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson

from kvlog import commands
from kvlog.commands._migrate import migrator_for
from kvlog.follow.follower import EventOutput, Follower
from kvlog.io.tailing import Tailer
from kvlog.migration.candidates import MAX_LINE_BYTES
from kvlog.migration.engine import MigrateOptions

CORPUS = Path(__file__).resolve().parent / "corpus"
#: sglang logs whose lines all carry their date (no event's date depends on when the file last changed)
DATED_LOGS = (
    "gen2_2025.log",
    "gen3_dtype_2026.log",
    "hybrid_swa_2026.log",
    "postcapture_before_fix_2026_07.log",
    "postcapture_after_fix_2026_09.log",
)
#: ends every run: whatever waits for a later line is released, as at the end of a migrated file
RUN_END = "[2026-10-01 00:00:00] server_args=ServerArgs(model_path='end')\n"


def corpus_text(*names: str) -> str:
    """The corpus logs ``names`` one after another, then a line that ends their runs."""
    return "".join((CORPUS / name).read_text() for name in names) + RUN_END


def migrated(path: Path) -> list[bytes]:
    """What ``kvlog migrate --only-events`` makes of ``path``: the events a follower must write, in order."""
    out = io.BytesIO()
    outcome = commands.migrate(str(path), only_events=True, stdout=out)
    assert outcome.exit_status == 0, outcome.problems
    return out.getvalue().splitlines()


def canonical(lines: list[bytes]) -> Counter[bytes]:
    """Events as a multiset, the name of the file each came from left out (a rotated file has two names)."""
    counted: Counter[bytes] = Counter()
    for line in lines:
        event = orjson.loads(line)
        event["migrated"].pop("file", None)
        counted[orjson.dumps(event, option=orjson.OPT_SORT_KEYS)] += 1
    return counted


def wait_for(condition: Callable[[], bool], timeout: float = 30.0, what: str = "the follower") -> None:
    """Wait (bounded) until ``condition`` holds, failing with ``what`` if it never does."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.02)


def lines_of(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines() if path.exists() else []


class Running:
    """A follow run in a thread: its output file, its notices, and how to stop it."""

    def __init__(self, output: Path) -> None:
        self.output = output
        self.stop = threading.Event()
        self.notices: list[str] = []
        self.outcome: Any = None
        self.error: BaseException | None = None

    def events(self) -> list[bytes]:
        return lines_of(self.output)

    def decoded(self) -> list[dict[str, Any]]:
        return [orjson.loads(line) for line in self.events()]

    def wait_events(self, count: int, timeout: float = 30.0) -> list[bytes]:
        wait_for(lambda: len(self.events()) >= count, timeout, f"{count} events (have {len(self.events())})")
        return self.events()


@contextmanager
def following(paths: Any, output: Path, **options: Any) -> Iterator[Running]:
    """``kvlog.commands.follow(paths, output=output, **options)`` in a thread, stopped at the block's end."""
    running = Running(output)

    def run() -> None:
        try:
            running.outcome = commands.follow(
                paths, output=output, stop=running.stop, on_notice=running.notices.append, **options
            )
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            running.error = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield running
    finally:
        running.stop.set()
        thread.join(30)
    assert not thread.is_alive(), "the follower did not stop"
    if running.error is not None:
        raise running.error


def append(path: Path, text: str | bytes) -> None:
    data = text.encode() if isinstance(text, str) else text
    with path.open("ab") as stream:
        stream.write(data)


class Clock:
    """A monotonic clock the test moves by hand: the hold's time runs out when the test says so, not after a sleep."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Passes:
    """A follower driven pass by pass in the test's thread, as ``kvlog follow`` drives it between waits.

    Library calls only (no thread, no wait): each ``poll()`` is one pass of the tailer, then the held
    events whose time ran out, then a commit. Events on standard output land in ``stdout``.
    """

    def __init__(
        self,
        patterns: Any,
        output: Path | None = None,
        *,
        drain_s: float = 5.0,
        max_open: int | None = None,
        **options: Any,
    ) -> None:
        self.stdout = io.BytesIO()
        self.notices: list[str] = []
        self.clock = Clock()
        self.output = EventOutput(None if output is None else str(output), self.stdout)
        self.follower = Follower(
            migrator_for(None, MigrateOptions(only_events=True)),
            self.output,
            clock=self.clock,
            on_notice=self.notices.append,
            **options,
        )
        named = (patterns,) if isinstance(patterns, str) else tuple(patterns)
        self.tailer = Tailer(named, max_line_bytes=MAX_LINE_BYTES, drain_s=drain_s, max_open=max_open)

    def poll(self) -> bool:
        """One pass; whether a file has more to read than one pass reads."""
        behind = self.tailer.poll(self.follower)
        self.follower.started = True
        self.follower.expire()
        self.output.commit()
        return behind

    def events(self) -> list[bytes]:
        return self.stdout.getvalue().splitlines()

    def close(self) -> None:
        self.tailer.close()
        self.output.close()


@contextmanager
def passes(patterns: Any, output: Path | None = None, **options: Any) -> Iterator[Passes]:
    """``Passes`` over ``patterns``, closed at the block's end."""
    driven = Passes(patterns, output, **options)
    try:
        yield driven
    finally:
        driven.close()
