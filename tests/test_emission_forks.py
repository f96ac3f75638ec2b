"""Emission never hangs a forked child and never raises into the caller outside ``raise`` mode (issue 9).

Fork: another thread holds one of the emission path's locks at the moment of ``fork()`` (the writer's,
held for real by a stream whose write blocks until released; the others acquired by a thread), then
the child emits. Before the fix the child waited forever on the writer's lock. Tried with
``os.fork()`` and with multiprocessing's ``fork`` context.

Write path: every exception type a stream or handler raises in the field (``RuntimeError`` from a
re-entrant buffered write, ``queue.Full`` from a queue-backed stream, ``BrokenPipeError``,
``UnicodeEncodeError``, ``ValueError``, ``KeyError``, an application's own ``Exception``), raised
where it happens: the stream's write or flush, a stdlib handler's emit or its formatter, the
renderer. Each must lose the event, say so once on stderr and count it in ``lost_events()``.
"""

from __future__ import annotations

import io
import linecache
import logging
import multiprocessing
import os
import queue
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from functools import cached_property
from pathlib import Path
from typing import Any

import orjson
import pytest

import kvlog
from kvlog import emission, events
from kvlog.emission import _render, configure, emit, lost_events
from kvlog.schema.event_validator import EventValidator
from kvlog.text.console import console_line

GOOD = events.KvArenaClosed(arena_id="1_0", released_bytes=5)
BAD = events.KvMemoryPoolEnd(avail_bytes=-1)
CHILD_MARK = "child_0"
#: how long a child may take before it counts as hung (generous: the machine is shared)
HANG_AFTER_S = 30.0


@pytest.fixture(autouse=True)
def restore_configuration() -> Iterator[None]:
    yield
    configure(output="json", validation="raise", stream=io.BytesIO())


class BlockingStream(io.RawIOBase):
    """Appends to a file descriptor; a write from the thread named ``holder`` blocks until released."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.entered = threading.Event()
        self.release = threading.Event()

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        if threading.current_thread().name == "holder":
            self.entered.set()
            self.release.wait()
        return os.write(self.fd, bytes(data))


def _hold(lock: Any, held: threading.Event, release: threading.Event) -> None:
    with lock:
        held.set()
        release.wait()


def _validator_cache_lock() -> Any:
    descriptor = vars(EventValidator)["_rs_registry"]
    assert isinstance(descriptor, cached_property)
    return getattr(descriptor, "lock", threading.Lock())  # Python >= 3.12 has none: nothing to hold


#: how a thread comes to hold each lock of the emission path when the process forks
HOLDERS: dict[str, Callable[[BlockingStream], Any]] = {
    "writer (a write in progress)": lambda stream: None,
    "violation report limiter": lambda stream: _pipeline().processors[1].limiter.lock,
    "lost-event counter": lambda stream: _pipeline().losses.lock,
    "validator cache (cached_property)": lambda stream: _validator_cache_lock(),
}


def _pipeline() -> Any:
    emitter = emission.get_config()._emitter  # the locks are the pipeline's own: no public way to hold them
    assert emitter is not None
    return emitter.pipeline


def _child_emits() -> None:
    """In the child: emit a valid and an invalid event, then a fresh pipeline (new validator) emits too."""
    emit(events.KvArenaClosed(arena_id=CHILD_MARK, released_bytes=1))
    emit(BAD)
    kvlog.get_logger().info("kv_arena.closed", arena_id=CHILD_MARK, released_bytes=2)


def _start_holder(stream: BlockingStream, holder: str) -> tuple[threading.Thread, threading.Event]:
    lock = HOLDERS[holder](stream)
    if lock is None:
        thread = threading.Thread(target=emit, args=(GOOD,), name="holder", daemon=True)
        held = stream.entered
        release = stream.release
    else:
        held, release = threading.Event(), stream.release
        thread = threading.Thread(target=_hold, args=(lock, held, release), name="holder", daemon=True)
    thread.start()
    assert held.wait(HANG_AFTER_S)
    return thread, release


def _wait_or_kill(pid: int) -> int | None:
    """The child's exit status, or None (after killing it) if it did not exit in time: it hung."""
    deadline = time.monotonic() + HANG_AFTER_S
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.02)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return None


def _child_lines(log: Path, pid: int) -> list[dict[str, Any]]:
    lines = [orjson.loads(line) for line in log.read_bytes().splitlines()]
    return [line for line in lines if line.get("pid") == pid]


@pytest.mark.parametrize("holder", list(HOLDERS))
def test_a_forked_child_emits_while_another_thread_held_a_lock_of_the_emission_path(
    tmp_path: Path, holder: str
) -> None:
    log = tmp_path / "events.jsonl"
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    stream = BlockingStream(fd)
    configure(output="json", validation="warn", stream=stream)  # type: ignore[arg-type]
    emit(GOOD)  # the pipeline is warm: validators compiled
    thread, release = _start_holder(stream, holder)
    try:
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            try:
                if holder.startswith("validator"):
                    configure(output="json", validation="warn", stream=stream)  # type: ignore[arg-type]
                _child_emits()
            finally:
                os._exit(0 if lost_events() == 0 else 3)
        status = _wait_or_kill(pid)
    finally:
        release.set()
        thread.join()
        os.close(fd)
    assert status == 0, "the child hung on a lock held at fork" if status is None else f"child exit {status}"
    child = _child_lines(log, pid)
    assert [line["event"] for line in child] == ["kv_arena.closed", "kvlog.schema_violation", "kv_arena.closed"]


def _fill(fd: int) -> None:
    """Fill a pipe, so that the next write to it blocks until someone reads."""
    os.set_blocking(fd, False)
    try:
        while True:
            os.write(fd, b"#" * 65536)
    except BlockingIOError:
        pass
    finally:
        os.set_blocking(fd, True)


def _blocked_in_write(thread: threading.Thread) -> bool:
    """Whether ``thread`` sits in the writer's call into the stream (its write or its flush)."""
    frame = sys._current_frames().get(thread.ident or -1)
    while frame is not None:
        line = linecache.getline(frame.f_code.co_filename, frame.f_lineno)
        if "self._write(line)" in line or "self._flush()" in line:
            return True
        frame = frame.f_back
    return False


def _wait_until_blocked_in_write(thread: threading.Thread) -> None:
    """Until ``thread`` is seen twice, a while apart, in its write: then it waits on the pipe."""
    deadline = time.monotonic() + HANG_AFTER_S
    seen = 0
    while seen < 2:
        assert time.monotonic() < deadline, "the writer never blocked"
        seen = seen + 1 if _blocked_in_write(thread) else 0
        time.sleep(0.05)


@pytest.mark.parametrize(("mode", "output"), [("wb", "json"), ("w", "console")])
def test_a_forked_child_emits_while_another_thread_is_blocked_writing_to_a_full_pipe(mode: str, output: str) -> None:
    """The lock of the stream itself (``io.BufferedWriter``'s), held in a write to a pipe nobody reads yet.

    Console output to a text stream writes through the ``io.TextIOWrapper``, whose buffer holds the lock.
    """
    reader, writer = os.pipe()
    stream = os.fdopen(writer, mode)
    configure(output=output, validation="warn", stream=stream)  # type: ignore[arg-type]
    _fill(writer)
    holder = threading.Thread(target=emit, args=(GOOD,), daemon=True)
    holder.start()
    _wait_until_blocked_in_write(holder)
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            emit(events.KvArenaClosed(arena_id=CHILD_MARK, released_bytes=1))
        finally:
            os._exit(0 if lost_events() == 0 else 3)
    drained: list[bytes] = []
    drain = threading.Thread(target=lambda: drained.extend(iter(lambda: os.read(reader, 65536), b"")), daemon=True)
    drain.start()
    status = _wait_or_kill(pid)
    holder.join()
    stream.close()
    drain.join()
    os.close(reader)
    assert status == 0, "the child hung on the stream's lock" if status is None else f"child exit {status}"
    lines = [line for line in b"".join(drained).replace(b"#", b"").decode().splitlines() if line]
    arenas = [
        orjson.loads(line)["arena_id"] if output == "json" else line.split("KvVmmArena[")[1].split("]")[0]
        for line in lines
    ]
    assert arenas in ([GOOD.arena_id, CHILD_MARK], [CHILD_MARK, GOOD.arena_id])


def test_a_multiprocessing_fork_child_emits_while_the_parent_is_writing(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    stream = BlockingStream(fd)
    configure(output="console", validation="warn", stream=stream)  # type: ignore[arg-type]
    thread, release = _start_holder(stream, "writer (a write in progress)")
    child = multiprocessing.get_context("fork").Process(target=_child_emits)
    try:
        child.start()
        child.join(HANG_AFTER_S)
        hung = child.is_alive()
        if hung:
            child.kill()
            child.join()
    finally:
        release.set()
        thread.join()
        os.close(fd)
    assert not hung, "the child hung on the writer's lock"
    assert child.exitcode == 0
    lines = log.read_text().splitlines()
    assert sum(f"KvVmmArena[{CHILD_MARK}] closed" in line for line in lines) == 2
    assert any("kvlog.schema_violation" in line for line in lines)


# -- the write path absorbs every exception outside raise mode --------------------------------------------


class CustomError(Exception):
    """An application's own exception class, raised by its stream."""


EXCEPTIONS: dict[str, Callable[[], Exception]] = {
    "RuntimeError": lambda: RuntimeError("reentrant call inside <_io.BufferedWriter name='<stderr>'>"),
    "queue.Full": queue.Full,
    "ValueError": lambda: ValueError("I/O operation on closed file."),
    "UnicodeEncodeError": lambda: UnicodeEncodeError("ascii", "é", 0, 1, "ordinal not in range(128)"),
    "BrokenPipeError": lambda: BrokenPipeError(32, "Broken pipe"),
    "CustomError": lambda: CustomError("the application's stream is shutting down"),
    "KeyError": lambda: KeyError("avail_bytes"),
}
WHERE = ("write", "flush", "handler.emit", "handler.format", "renderer")


class Fault:
    """One switchable fault: raises a fresh exception of the chosen kind while ``on``."""

    def __init__(self, make: Callable[[], Exception]) -> None:
        self.make = make
        self.on = True

    def check(self) -> None:
        if self.on:
            raise self.make()


class FaultyStream(io.StringIO):
    def __init__(self, fault: Fault, where: str) -> None:
        super().__init__()
        self.fault, self.where = fault, where

    def write(self, text: str) -> int:
        if self.where == "write":
            self.fault.check()
        return super().write(text)

    def flush(self) -> None:
        if self.where == "flush":
            self.fault.check()


class FaultyHandler(logging.Handler):
    """A handler that does not catch its own errors, as many third-party handlers do not."""

    def __init__(self, fault: Fault, where: str) -> None:
        super().__init__()
        self.fault, self.where = fault, where
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if self.where == "handler.emit":
            self.fault.check()
        self.lines.append(self.format(record))


class FaultyFormatter(logging.Formatter):
    def __init__(self, fault: Fault) -> None:
        super().__init__()
        self.fault = fault
        self.inner = kvlog.formatter("console")

    def format(self, record: logging.LogRecord) -> str:
        self.fault.check()
        return self.inner.format(record)


@pytest.fixture
def kvlog_logger() -> Iterator[logging.Logger]:
    logger = logging.getLogger("kvlog")
    handlers, propagate = list(logger.handlers), logger.propagate
    logger.propagate = False
    yield logger
    logger.handlers[:] = handlers
    logger.propagate = propagate


def _configure_faulty(where: str, fault: Fault, logger: logging.Logger, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Configure warn mode with the fault in place; return what collects the lines written."""
    if where.startswith("handler."):
        handler = FaultyHandler(fault, where)
        handler.setFormatter(FaultyFormatter(fault) if where == "handler.format" else kvlog.formatter("console"))
        logger.addHandler(handler)
        configure(validation="warn", stdlib=True)
        return handler
    if where == "renderer":
        real = console_line

        def renderer(event: Any) -> str:
            fault.check()
            return real(event)

        monkeypatch.setattr(_render, "console_line", renderer)
    stream = FaultyStream(fault, where)
    configure(output="console", validation="warn", stream=stream)
    return stream


def _written(sink: Any) -> str:
    return "\n".join(sink.lines) if isinstance(sink, FaultyHandler) else sink.getvalue()


@pytest.mark.parametrize("where", WHERE)
@pytest.mark.parametrize("kind", list(EXCEPTIONS))
def test_warn_mode_absorbs_any_exception_of_the_write_path_says_it_once_and_counts_it(
    kind: str,
    where: str,
    kvlog_logger: logging.Logger,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    fault = Fault(EXCEPTIONS[kind])
    sink = _configure_faulty(where, fault, kvlog_logger, monkeypatch)
    for _ in range(2):  # a failing renderer asks for violation reports: stay under their rate limit (10/s)
        emit(GOOD)
        emit(BAD)  # its violation report is lost the same way
        kvlog.get_logger().info("kv_arena.closed", arena_id="1_0", released_bytes=7)
    assert lost_events() == 6
    reports = [line for line in capfd.readouterr().err.splitlines() if line.startswith("kvlog: cannot write")]
    assert len(reports) == 1
    assert type(EXCEPTIONS[kind]()).__name__ in reports[0]
    fault.on = False  # the stream recovers: events get through again
    emit(events.KvArenaClosed(arena_id="1_0", released_bytes=11))
    assert "released=11 B" in _written(sink)
    fault.on = True  # a new run of failures is said again, once
    emit(GOOD)
    emit(GOOD)
    assert lost_events() == 8
    assert capfd.readouterr().err.count("kvlog: cannot write") == 1


def test_a_name_kvlogs_own_processors_cannot_look_up_becomes_a_violation_report() -> None:
    """``get_logger().info(["a", "list"])``: the envelope's version lookup raised TypeError into the caller."""
    stream = io.BytesIO()
    configure(output="json", validation="warn", stream=stream)
    kvlog.get_logger().info(["not", "a", "name"])
    (report,) = [orjson.loads(line) for line in stream.getvalue().splitlines()]
    assert report["event"] == "kvlog.schema_violation"
    assert report["violating_event"] is None
    assert lost_events() == 0


@pytest.mark.parametrize("where", ["write", "flush", "handler.emit"])
def test_raise_mode_still_raises_what_the_stream_or_handler_raised(where: str, kvlog_logger: logging.Logger) -> None:
    fault = Fault(EXCEPTIONS["RuntimeError"])
    if where == "handler.emit":
        handler = FaultyHandler(fault, where)
        handler.setFormatter(kvlog.formatter("console"))
        kvlog_logger.addHandler(handler)
        configure(validation="raise", stdlib=True)
    else:
        configure(output="console", validation="raise", stream=FaultyStream(fault, where))
    with pytest.raises(RuntimeError, match="reentrant call"):
        emit(GOOD)
    fault.on = False
    with pytest.raises(kvlog.SchemaViolationError):
        emit(BAD)
    assert lost_events() == 0
