"""Emission at its edges: the report rate limit second by second, a caller's own version, a logger kept
across a reconfiguration, the count of lost events on the writer, one rendering per stdlib line.

The rate limit is checked against a clock the test moves (``time.monotonic`` in ``kvlog.emission``), so the
exact budget of reports per second and the count a later report carries are pinned without sleeping.
"""

from __future__ import annotations

import gc
import inspect
import io
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import orjson
import pytest
from foundation_samples import fields

import kvlog
from kvlog import emission, events
from kvlog.emission import _render, configure, emit, lost_events
from kvlog.schema.event_validator import EventValidator

GOOD = events.KvArenaClosed(arena_id="1_0", released_bytes=5)
BAD = events.KvMemoryPoolEnd(avail_bytes=-1)
VALIDATOR = EventValidator()


@pytest.fixture(autouse=True)
def restore_configuration() -> Iterator[None]:
    saved = emission.get_config()
    yield
    emission.restore(saved)


def lines_of(stream: io.BytesIO) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in stream.getvalue().splitlines()]


class Clock:
    """``time.monotonic`` as the test sets it."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize("start", [1000, 0], ids=["any second", "the clock's first second"])
def test_ten_violation_reports_a_second_go_out_and_the_next_report_counts_the_rest(
    monkeypatch: pytest.MonkeyPatch, start: int
) -> None:
    clock = Clock(start + 0.2)
    monkeypatch.setattr(time, "monotonic", clock)
    stream = io.BytesIO()
    configure(output="json", validation="warn", stream=stream)
    for _ in range(13):
        emit(BAD)
    first_second = lines_of(stream)
    assert [line["event"] for line in first_second] == ["kvlog.schema_violation"] * 10
    assert all("suppressed" not in line for line in first_second)
    clock.now = start + 0.9  # the same second: still over budget
    emit(BAD)
    assert len(lines_of(stream)) == 10
    clock.now = start + 1.0  # a new second: a new budget, and the first report says how many were held back
    emit(BAD)
    emit(BAD)
    later = lines_of(stream)[10:]
    assert [line.get("suppressed") for line in later] == [4, None]
    assert all(VALIDATOR.violations(line) == [] for line in later)
    for _ in range(9):  # the rest of this second's budget (8), then one over
        emit(BAD)
    clock.now = start + 2.5
    emit(BAD)
    assert [line.get("suppressed") for line in lines_of(stream)[20:]] == [1]
    assert lost_events() == 0


def test_a_get_logger_caller_that_names_an_older_version_is_validated_and_written_at_that_version() -> None:
    stream = io.BytesIO()
    configure(output="json", validation="raise", stream=stream)
    old = fields("kv_pool.allocation", 1)
    kvlog.get_logger().info("kv_pool.allocation", schema_version=1, **old)
    kvlog.get_logger().info("kv_pool.allocation", **fields("kv_pool.allocation", 2))
    first, latest = lines_of(stream)
    assert first["schema_version"] == 1
    assert {key: first[key] for key in old} == old
    assert latest["schema_version"] == 2
    assert VALIDATOR.violations(first) == [] and VALIDATOR.violations(latest) == []
    with pytest.raises(kvlog.SchemaViolationError):  # the named version is the one validated
        kvlog.get_logger().info("kv_pool.allocation", schema_version=2, **old)


def test_a_logger_kept_across_a_reconfiguration_still_writes_to_its_own_file(tmp_path: Path) -> None:
    """The pipeline holds the text stream it was given: dropping it would close the file under the writer."""
    first, second = tmp_path / "first.log", tmp_path / "second.log"
    configure(output="json", validation="raise", stream=first.open("w"))
    kept = kvlog.get_logger()
    configure(output="json", validation="raise", stream=second.open("w"))
    gc.collect()
    kept.info("kv_arena.closed", arena_id="1_0", released_bytes=1)
    kvlog.get_logger().info("kv_arena.closed", arena_id="2_0", released_bytes=2)
    assert [orjson.loads(line)["arena_id"] for line in first.read_text().splitlines()] == ["1_0"]
    assert [orjson.loads(line)["arena_id"] for line in second.read_text().splitlines()] == ["2_0"]


def test_the_writer_a_logger_wraps_counts_the_events_lost_as_lost_events_does() -> None:
    closed = io.BytesIO()
    closed.close()
    configure(output="json", validation="warn", stream=closed)
    emit(GOOD)
    kvlog.get_logger().info("kv_arena.closed", arena_id="1_0", released_bytes=1)
    assert lost_events() == 2
    assert kvlog.get_logger()._logger.lost == 2  # structlog's wrapped logger: kvlog's writer


def test_the_stdlib_writer_counts_the_events_its_handlers_lost() -> None:
    class Failing(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            raise OSError(28, "No space left on device")

    logger = logging.getLogger("kvlog")
    handlers, propagate = list(logger.handlers), logger.propagate
    logger.handlers[:] = [Failing()]
    logger.propagate = False
    try:
        configure(validation="warn", stdlib=True)
        emit(GOOD)
        emit(GOOD, level="error")
        assert lost_events() == 2
        assert kvlog.get_logger()._logger.lost == 2
    finally:
        logger.handlers[:] = handlers
        logger.propagate = propagate


@pytest.mark.parametrize("output", ["json", "console"])
def test_an_event_reaching_a_stdlib_handler_is_serialised_once(monkeypatch: pytest.MonkeyPatch, output: str) -> None:
    """``formatter()`` writes the JSON text kvlog rendered before the handlers, not a second serialisation."""
    calls: list[object] = []

    def dumps(value: object, *args: Any, **kwargs: Any) -> bytes:
        calls.append(value)
        return orjson.dumps(value, *args, **kwargs)

    monkeypatch.setattr(_render, "orjson", SimpleNamespace(dumps=dumps, OPT_APPEND_NEWLINE=orjson.OPT_APPEND_NEWLINE))
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(kvlog.formatter(output))  # type: ignore[arg-type]
    logger = logging.getLogger("kvlog")
    handlers, propagate = list(logger.handlers), logger.propagate
    logger.handlers[:] = [handler]
    logger.propagate = False
    try:
        configure(validation="raise", stdlib=True)
        emit(GOOD)
    finally:
        logger.handlers[:] = handlers
        logger.propagate = propagate
    written = stream.getvalue()
    assert len(calls) == 1
    if output == "json":
        assert orjson.loads(written)["arena_id"] == GOOD.arena_id
    else:
        assert written.rstrip("\n").endswith("KvVmmArena[1_0] closed: released=5 B")


@pytest.mark.parametrize("stdlib", [False, True])
def test_an_event_at_exactly_the_configured_level_is_written(stdlib: bool) -> None:
    stream = io.StringIO()
    logger = logging.getLogger("kvlog")
    handlers, propagate = list(logger.handlers), logger.propagate
    if stdlib:
        handler = logging.StreamHandler(stream)
        handler.setFormatter(kvlog.formatter("json"))
        logger.handlers[:] = [handler]
        logger.propagate = False
    try:
        configure(validation="raise", level="warning", stdlib=stdlib, stream=None if stdlib else stream)
        emit(GOOD, level="info")
        emit(GOOD, level="warning")
        kvlog.get_logger().info("kv_arena.closed", arena_id="1_0", released_bytes=1)
        kvlog.get_logger().warning("kv_arena.closed", arena_id="1_0", released_bytes=2)
    finally:
        logger.handlers[:] = handlers
        logger.propagate = propagate
    written = [orjson.loads(line) for line in stream.getvalue().splitlines()]
    assert [(line["level"], line["released_bytes"]) for line in written] == [("warning", 5), ("warning", 2)]


def test_a_stdlib_pipeline_at_debug_passes_debug_events_whatever_the_root_logger_lets_through() -> None:
    """kvlog sets its own logger's level: the root's default (warning) must not hide kvlog's debug events."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(kvlog.formatter("json"))
    logger, root = logging.getLogger("kvlog"), logging.getLogger()
    handlers, propagate, level, root_level = list(logger.handlers), logger.propagate, logger.level, root.level
    logger.handlers[:] = [handler]
    logger.propagate = False
    logger.setLevel(logging.NOTSET)
    root.setLevel(logging.WARNING)
    try:
        configure(validation="raise", level="debug", stdlib=True)
        emit(GOOD, level="debug")
    finally:
        logger.handlers[:] = handlers
        logger.propagate = propagate
        logger.setLevel(level)
        root.setLevel(root_level)
    assert orjson.loads(stream.getvalue())["level"] == "debug"


def test_what_the_application_wrote_to_a_text_file_before_configure_comes_first(tmp_path: Path) -> None:
    """JSON lines go to the text stream's buffer: the text still held in the stream is flushed first."""
    path = tmp_path / "server.log"
    stream = path.open("w")
    stream.write("server starting\n")
    configure(output="json", validation="raise", stream=stream)
    emit(GOOD)
    lines = path.read_text().splitlines()
    assert lines[0] == "server starting"
    assert orjson.loads(lines[1])["arena_id"] == GOOD.arena_id


class Records(logging.Handler):
    """Keeps the records the ``kvlog`` logger hands its handlers."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def test_the_stdlib_bridge_hands_each_level_and_each_structlog_method_on_as_a_record_of_that_level() -> None:
    handler = Records()
    logger = logging.getLogger("kvlog")
    handlers, propagate = list(logger.handlers), logger.propagate
    logger.handlers[:] = [handler]
    logger.propagate = False
    try:
        configure(validation="warn", stdlib=True)
        for level in emission.LEVELS:
            emit(GOOD, level=level)
        kvlog.get_logger().msg("kv_arena.closed", arena_id="1_0", released_bytes=1)
        kvlog.get_logger().exception("kv_arena.closed", arena_id="1_0", released_bytes=2)
    finally:
        logger.handlers[:] = handlers
        logger.propagate = propagate
    levels = [record.levelname for record in handler.records]
    assert levels == ["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL", "INFO", "ERROR"]  # then msg, exception
    assert lost_events() == 0
    for record in handler.records:  # no caller is looked up: what Logger._log records without one
        assert (record.pathname, record.lineno, record.funcName) == ("(unknown file)", 0, "(unknown function)")


def test_the_configuration_before_configure_states_the_defaults_the_first_event_configures() -> None:
    blank = emission.EmissionConfig()
    defaults = {name: parameter.default for name, parameter in inspect.signature(configure).parameters.items()}
    assert {name: getattr(blank, name) for name in defaults} == defaults
    assert not blank.configured
