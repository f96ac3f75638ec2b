"""Emission in production (``validation="warn"``) never raises into the server that emits.

An inference server emits from its allocation paths; a log line must not take it down. Tried here
for real: a full disk (/dev/full), a closed stream, a pipe whose reader went away, a stdlib handler
on a full disk, console output to a binary stream, invalid events from 8 threads at once (the
violation reports stay rate-limited and count what they suppressed). A renderer that fails on every
event, which no real input triggers, is the one injected fault.
"""

from __future__ import annotations

import io
import logging
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

import kvlog
from kvlog import emission, events
from kvlog.emission import _render, configure, emit
from kvlog.errors import SchemaViolationError
from kvlog.testing import capture_events

GOOD = events.KvArenaClosed(arena_id="1_0", released_bytes=5)
BAD = events.KvMemoryPoolEnd(avail_bytes=-1)


@pytest.fixture(autouse=True)
def restore_configuration() -> Any:
    yield
    configure(output="json", validation="raise", stream=io.BytesIO())


def closed_stream() -> io.BytesIO:
    stream = io.BytesIO()
    stream.close()
    return stream


@pytest.mark.parametrize("output", ["json", "console"])
@pytest.mark.parametrize("where", ["/dev/full", "closed"])
def test_an_unwritable_stream_loses_the_line_instead_of_raising(where: str, output: str) -> None:
    stream: Any = Path("/dev/full").open("wb", buffering=0) if where == "/dev/full" else closed_stream()  # noqa: SIM115
    configure(output=output, validation="warn", stream=stream)  # type: ignore[arg-type]
    with capture_events() as captured:
        for _ in range(3):
            emit(GOOD)
            emit(BAD)
            kvlog.get_logger().info("kv_arena.closed", arena_id="1_0", released_bytes=1)
    assert len(captured) == 9  # every event went through the pipeline; only the writes failed
    assert emission.lost_events() == 9


def test_raise_mode_still_surfaces_a_write_failure() -> None:
    configure(output="json", validation="raise", stream=closed_stream())
    with pytest.raises(ValueError, match="closed file"):
        emit(GOOD)


def test_a_full_disk_is_said_once_on_stderr_and_events_resume_when_the_disk_has_room(tmp_path: Path) -> None:
    script = textwrap.dedent(
        """
        import resource, sys
        from kvlog import events
        from kvlog.emission import configure, emit
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, resource.RLIM_INFINITY))
        stream = open(sys.argv[1], "wb", buffering=0)
        configure(output="json", validation="warn", stream=stream)
        for _ in range(200):
            emit(events.KvArenaClosed(arena_id="1_0", released_bytes=5))
        stream.seek(0)
        stream.truncate()
        emit(events.KvArenaClosed(arena_id="1_0", released_bytes=6))
        print("alive")
        """
    )
    log = tmp_path / "events.jsonl"
    done = subprocess.run(
        [sys.executable, "-c", script, str(log)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0 and done.stdout == "alive\n", done.stderr
    assert done.stderr.count("kvlog: cannot write events") == 1, done.stderr
    assert "File too large" in done.stderr and "Traceback" not in done.stderr
    assert orjson.loads(log.read_bytes().splitlines()[-1])["released_bytes"] == 6


def test_a_pipe_whose_reader_exited_does_not_break_the_emitter() -> None:
    reader, writer = os.pipe()
    os.close(reader)
    with os.fdopen(writer, "wb", buffering=0) as stream:
        configure(output="json", validation="warn", stream=stream)
        for _ in range(3):
            emit(GOOD)  # EPIPE (Python ignores SIGPIPE)


def test_a_stdlib_handler_on_a_full_disk_does_not_raise(capsys: pytest.CaptureFixture[str]) -> None:
    handler = logging.StreamHandler(Path("/dev/full").open("w"))  # noqa: SIM115 - closed below
    handler.setFormatter(kvlog.emission.formatter())
    logger = logging.getLogger("kvlog")
    logger.addHandler(handler)
    try:
        configure(validation="warn", stdlib=True)
        emit(GOOD)
        emit(BAD)
    finally:
        logger.removeHandler(handler)
        handler.stream.close = lambda: None  # type: ignore[method-assign] # /dev/full fails the final flush too
    assert "No space left on device" in capsys.readouterr().err  # logging's own handleError report


def test_console_output_to_a_binary_stream_writes_text() -> None:
    stream = io.BytesIO()
    configure(output="console", validation="warn", stream=stream)
    emit(events.KvMemoryPoolEnd(avail_bytes=2 << 30))
    assert stream.getvalue().endswith(b"\n") and b"GB" in stream.getvalue()


def test_a_renderer_that_always_fails_drops_the_event_and_does_not_raise(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*_args: object) -> str:
        raise RuntimeError("renderer bug")

    monkeypatch.setattr(_render, "console_line", broken)
    stream = io.BytesIO()
    configure(output="console", validation="warn", stream=stream)
    emit(GOOD)
    emit(BAD)
    assert stream.getvalue() == b""
    assert emission.lost_events() == 2  # each one lost, and counted as lost
    configure(output="console", validation="raise", stream=stream)
    with pytest.raises(SchemaViolationError, match="cannot be written: RuntimeError: renderer bug"):  # tests see it
        emit(GOOD)


def test_violation_reports_from_8_threads_are_rate_limited_and_add_up() -> None:
    stream = io.BytesIO()
    configure(output="json", validation="warn", stream=stream)
    threads, each = 8, 500
    start = threading.Barrier(threads)

    def flood() -> None:
        start.wait()
        for _ in range(each):
            emit(BAD)

    workers = [threading.Thread(target=flood) for _ in range(threads)]
    began = time.monotonic()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    seconds = int(time.monotonic()) - int(began) + 1
    time.sleep(1.05)
    emit(BAD)  # the next report carries the count suppressed since the last one
    reports = [orjson.loads(line) for line in stream.getvalue().splitlines()]
    assert all(report["event"] == "kvlog.schema_violation" for report in reports)
    assert len(reports) <= 10 * (seconds + 1) + 1
    assert len(reports) + sum(report.get("suppressed", 0) for report in reports) == threads * each + 1
