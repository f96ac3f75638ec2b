"""What the live handler must not lose, and what it counts when it does: odd messages, failed writes."""

from __future__ import annotations

import contextlib
import errno
import io
import logging
import os
import sys
import threading
from pathlib import Path

import pytest
from follow_helpers import wait_for
from test_integrate_handler import START_UP, attached, decoded

import kvlog.integrate.handler as handler_module
from kvlog.integrate.handler import EventHandler
from kvlog.integrate.servers import SGLANG


def open_paths() -> list[str]:
    """What this process's descriptors name now (others' threads may open files meanwhile: compare by name)."""
    named = []
    for descriptor in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # closed since the listing
            named.append(os.readlink(f"/proc/self/fd/{descriptor}"))
    return named


class _ReaderFellBehind(io.StringIO):
    """Standard error as a non-blocking pipe whose reader fell behind once (EAGAIN), and then caught up."""

    def __init__(self) -> None:
        super().__init__()
        self.refused = False

    def write(self, text: str) -> int:
        if text.startswith('{"event"') and not self.refused:
            self.refused = True
            raise BlockingIOError(errno.EAGAIN, os.strerror(errno.EAGAIN))
        return super().write(text)


def test_an_output_that_failed_once_is_given_up_said_and_the_later_events_dropped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Never a silent loss, nor events written on past a hole: the first failed write ends the process's events."""
    stderr = _ReaderFellBehind()
    monkeypatch.setattr(sys, "stderr", stderr)
    handler = EventHandler(SGLANG, "-", ranks={"tp": 0})
    for message in START_UP:
        handler.handle(logging.makeLogRecord({"name": "sglang.srt", "msg": message, "levelno": logging.INFO}))
    handler.close()
    failure = BlockingIOError(errno.EAGAIN, os.strerror(errno.EAGAIN))
    assert stderr.getvalue().splitlines() == [
        f"kvlog: standard error: cannot write events: {failure}; this process's events are dropped",
        f"kvlog: {len(START_UP)} records dropped (the queue was full or the events could not be written)",
    ]
    assert (handler.written, handler.dropped) == (0, len(START_UP))


def test_a_message_holding_a_lone_surrogate_is_written_escaped_and_loses_no_record(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A ``str`` can hold what UTF-8 cannot encode; the batch it came in must not be lost with it."""
    logger, handler, events = attached(tmp_path)
    for message in START_UP:
        logger.info(message.replace("type=LlamaFor", "type=Llama\ud800\udc80For"))
    handler.close()
    written = decoded(events)
    assert len(written) == len(START_UP)
    load_end = next(e for e in written if e["event"] == "weights.load_end")
    assert load_end["model_class"] == "Llama\\ud800\\udc80ForCausalLM"
    assert (handler.written, handler.dropped) == (len(START_UP), 0)
    assert capsys.readouterr().err == ""


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full, a file whose every flush fails")
def test_events_lost_in_a_flush_that_failed_count_as_dropped_not_written(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Writes to a full disk are buffered and fail only when flushed: what the buffer held is dropped."""
    handler = EventHandler(SGLANG, "/dev/full", ranks={"tp": 0})
    for message in START_UP:
        handler.handle(logging.makeLogRecord({"name": "sglang.srt", "msg": message, "levelno": logging.INFO}))
    handler.close()
    assert (handler.written, handler.dropped) == (0, len(START_UP))
    said = capsys.readouterr().err.splitlines()
    assert said[0].startswith("kvlog: /dev/full: cannot write events: [Errno 28]")
    assert said[1:] == [
        f"kvlog: {len(START_UP)} records dropped (the queue was full or the events could not be written)"
    ]


def test_records_beyond_a_full_queue_are_dropped_and_counted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The server's thread never waits: while the worker is busy, what the queue cannot hold is dropped."""
    busy = threading.Event()

    class _Busy(handler_module._Reading):
        def __init__(self, handler: EventHandler) -> None:
            busy.wait()  # the worker is held here until the records are queued
            super().__init__(handler)

    monkeypatch.setattr(handler_module, "_Reading", _Busy)
    logger, handler, events = attached(tmp_path, queue_records=1)
    for message in START_UP[:3]:
        logger.info(message)
    busy.set()
    handler.close()
    assert [e["event"] for e in decoded(events)] == ["weights.load_begin"]
    assert (handler.written, handler.dropped) == (1, 2)
    assert (
        capsys.readouterr().err == "kvlog: 2 records dropped (the queue was full or the events could not be written)\n"
    )


def test_migrations_that_cannot_load_drop_the_records_and_closing_does_not_raise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken() -> None:
        raise ValueError("no chain")

    monkeypatch.setattr(handler_module, "load_chain", broken)
    logger, handler, events = attached(tmp_path)
    for message in START_UP[:2]:
        logger.info(message)
    handler.close()
    assert not events.exists()
    assert (handler.written, handler.dropped) == (0, 2)
    assert capsys.readouterr().err.splitlines() == [
        "kvlog: cannot read records (ValueError: no chain); this process's records are dropped",
        "kvlog: 2 records dropped (the queue was full or the events could not be written)",
    ]


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full, a file whose every write fails")
def test_events_lost_in_a_write_that_failed_count_as_dropped_each_once(capsys: pytest.CaptureFixture[str]) -> None:
    """One record of many lines: its events overflow the write buffer, and the write itself fails mid-batch."""
    handler = EventHandler(SGLANG, "/dev/full", ranks={"tp": 0})
    lines = 100  # each event is some 400 bytes: the buffer (8 KiB) overflows well before the batch ends
    handler.handle(logging.makeLogRecord({"name": "sglang.srt", "msg": "\n".join([START_UP[0]] * lines)}))
    handler.close()
    assert (handler.written, handler.dropped) == (0, lines)
    said = capsys.readouterr().err.splitlines()
    assert said[0].startswith("kvlog: /dev/full: cannot write events: [Errno 28]")
    assert said[1:] == [f"kvlog: {lines} records dropped (the queue was full or the events could not be written)"]


def test_a_close_that_cannot_wait_for_the_worker_says_what_was_not_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Closing waits at most CLOSE_S (at the server's exit, on its thread): a worker still busy is left, and said."""
    busy = threading.Event()

    class _Busy(handler_module._Reading):
        def __init__(self, handler: EventHandler) -> None:
            busy.wait()  # the worker is held here until the handler is closed
            super().__init__(handler)

    monkeypatch.setattr(handler_module, "_Reading", _Busy)
    monkeypatch.setattr(handler_module, "CLOSE_S", 0.0)
    logger, handler, _ = attached(tmp_path)
    logger.info(START_UP[0])
    worker = handler._worker
    assert worker is not None
    try:
        handler.close()
    finally:
        busy.set()
        worker.join(30)  # it ends on close's wake-up: nothing of it outlives the test
    assert capsys.readouterr().err == "kvlog: closing: the events still being read were not all written\n"


def test_a_record_that_cannot_be_read_is_said_and_the_others_go_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A record rebuilt from another process (a ``QueueHandler``'s, a ``SocketHandler``'s) may carry any time."""
    logger, handler, events = attached(tmp_path)
    said: list[str] = []

    def told() -> bool:
        said.append(capsys.readouterr().err)
        return bool("".join(said))

    handler.handle(logging.makeLogRecord({"name": "sglang.srt", "msg": START_UP[0], "created": float("nan")}))
    wait_for(told, what="the notice of the record that could not be read")
    logger.info(START_UP[1])
    handler.close()
    said.append(capsys.readouterr().err)
    assert "".join(said) == (
        "kvlog: a record could not be read (ValueError: cannot convert float NaN to integer); the others go on\n"
    )
    assert [event["event"] for event in decoded(events)] == ["weights.load_end"]


def test_a_failure_while_closing_is_said_and_never_raised_into_the_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Closing runs inside a server's dictConfig and at its exit: an error there (a file system that reports a
    deferred write error only when the file is closed) is said, and the server goes on."""

    class _Deferred(handler_module._Reading):
        def finish(self) -> None:
            super().finish()
            raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(handler_module, "_Reading", _Deferred)
    logger, handler, events = attached(tmp_path)
    logger.info(START_UP[0])
    handler.close()
    assert capsys.readouterr().err == f"kvlog: closing: OSError: [Errno {errno.EIO}] {os.strerror(errno.EIO)}\n"
    assert [event["event"] for event in decoded(events)] == ["weights.load_begin"]


def _closing_while_another_thread_logs(handler: EventHandler, logger: logging.Logger, message: str) -> threading.Thread:
    """Close on a thread of its own (a dictConfig); once it has woken the busy worker, ``message`` is logged."""
    closing = threading.Thread(target=handler.close)
    closing.start()
    wait_for(lambda: not closing.is_alive() or None in handler._queue.queue, what="close's wake-up of the worker")
    logger.info(message)  # queued behind the wake-up, where the worker stops
    return closing


def _close_once_the_worker_is_held(
    handler: EventHandler, logger: logging.Logger, busy: threading.Event, done: threading.Event
) -> None:
    """The first record held in the worker (``busy``), close while another thread logs the second, then release."""
    logger.info(START_UP[0])
    assert busy.wait(30)
    closing = _closing_while_another_thread_logs(handler, logger, START_UP[1])
    done.set()
    closing.join(30)


def test_records_logged_while_closing_waits_for_the_worker_are_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A dictConfig closes every handler on one thread while the server's other threads log on."""
    busy, done = threading.Event(), threading.Event()

    class _Slow(handler_module._Reading):
        def read(self, records: list[handler_module._Record]) -> None:
            if records and not done.is_set():
                busy.set()
                done.wait(30)  # the worker is held in its first feed until the late record is logged
            super().read(records)

    monkeypatch.setattr(handler_module, "_Reading", _Slow)
    logger, handler, events = attached(tmp_path)
    _close_once_the_worker_is_held(handler, logger, busy, done)
    assert [event["event"] for event in decoded(events)] == ["weights.load_begin", "weights.load_end"]
    assert (handler.written, handler.dropped) == (2, 0)


def test_records_logged_while_closing_waits_are_counted_when_the_migrations_cannot_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    busy, done = threading.Event(), threading.Event()

    def broken() -> None:
        raise ValueError("no chain")

    class _Held(handler_module._Reading):
        def __init__(self, handler: EventHandler) -> None:
            busy.set()
            done.wait(30)  # the worker is held starting its reading until the late record is logged
            super().__init__(handler)

    monkeypatch.setattr(handler_module, "load_chain", broken)
    monkeypatch.setattr(handler_module, "_Reading", _Held)
    logger, handler, _ = attached(tmp_path)
    _close_once_the_worker_is_held(handler, logger, busy, done)
    assert handler.dropped == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "kvlog: 2 records dropped (the queue was full or the events could not be written)"
    )


def test_closing_releases_the_events_file_and_logging_forgets_the_handler(tmp_path: Path) -> None:
    """A server reconfigures its logging many times (each dictConfig closes every handler): nothing may pile up."""
    logger, handler, events = attached(tmp_path)
    handler.set_name("kvlog-events-test")
    logger.info(START_UP[0])
    handler.close()
    logger.removeHandler(handler)
    assert [e["event"] for e in decoded(events)] == ["weights.load_begin"]
    assert str(events) not in open_paths()
    assert "kvlog-events-test" not in logging._handlers  # type: ignore[attr-defined]
