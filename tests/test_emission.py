"""Emission as a library user sees it: what reaches the file, the terminal or the stdlib handler."""

from __future__ import annotations

import io
import json
import logging
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog
from foundation_samples import fields

import kvlog
from kvlog import emission, envelope, events
from kvlog.emission import ValidationMode
from kvlog.schema.event_validator import EventValidator
from kvlog.testing import capture_events

GIB = 1 << 30
VALIDATOR = EventValidator()
TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d")
ALLOCATION = events.KvPoolAllocation(
    pool="MHATokenToKVPool",
    label=None,
    layout="mha",
    allocation_state="va_upper_bound",
    dtype="torch.bfloat16",
    num_tokens=65536,
    k_bytes=GIB,
    v_bytes=GIB,
    committed_bytes=0,
)
READY = events.KvArenaReady(
    arena_id="4242_0",
    backend="cuda",
    device=0,
    reserved_va_bytes=12 * GIB,
    granularity_bytes=2 << 20,
    handle_type="posix_fd",
)


@pytest.fixture(autouse=True)
def _fresh_pipeline() -> Iterator[None]:
    """Each test configures its own pipeline; undo what it did to global logging state."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    kvlog.bind_ranks()
    yield
    kvlog.bind_ranks()
    root.handlers[:] = handlers
    root.setLevel(level)
    structlog.reset_defaults()


def json_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def configure_file(tmp_path: Path, validation: ValidationMode = "raise", output: str = "json") -> Path:
    """Configure output to a file; the pipeline, not the test, keeps the stream open (and flushes each line)."""
    log = tmp_path / "events.log"
    kvlog.configure(output=output, validation=validation, stream=log.open("w"))  # type: ignore[arg-type]
    return log


def test_json_output_is_one_valid_event_per_line_with_the_envelope(tmp_path: Path) -> None:
    log = configure_file(tmp_path)
    kvlog.bind_ranks(TP=0, dp=1)
    typed = [cls(**fields(cls.EVENT, cls.VERSION)) for cls in events.ALL_EVENTS]
    for event in typed:
        kvlog.emit(event)
    kvlog.emit(ALLOCATION, level="warning")
    lines = json_lines(log)
    assert [line["event"] for line in lines] == [e.EVENT for e in typed] + ["kv_pool.allocation"]
    for line, event in zip(lines, [*typed, ALLOCATION], strict=True):
        assert VALIDATOR.violations(line) == []
        assert line["schema_version"] == event.VERSION
        assert {k: line[k] for k in event.fields()} == event.fields()
        assert line["ranks"] == {"tp": 0, "dp": 1}
        assert isinstance(line["pid"], int)
        assert line["timestamp"].endswith("Z")
    assert lines[-1]["level"] == "warning"
    for line in lines:  # the envelope first, as in migrated events: people reading raw lines see it first
        assert list(line)[:6] == list(envelope.HEAD)


def test_untyped_logging_through_get_logger_is_validated_too(tmp_path: Path) -> None:
    log = configure_file(tmp_path, validation="warn")
    logger = kvlog.get_logger()
    logger.info("kv_memory.pool_end", avail_bytes=GIB)
    logger.info("kv_memory.pool_end", avail_gb=1.0)
    first, second = json_lines(log)
    assert first["schema_version"] == 1
    assert VALIDATOR.violations(first) == []
    assert second["event"] == "kvlog.schema_violation"


def test_a_caller_of_get_logger_gets_the_written_order_and_cannot_forge_the_envelope(tmp_path: Path) -> None:
    log = configure_file(tmp_path)
    kvlog.bind_ranks(tp=2)
    logger = kvlog.get_logger()
    logger.info("kv_arena.closed", ext={"engine": "x"}, arena_id="4242_0", released_bytes=1)
    logger.info("kv_arena.closed", arena_id="4242_0", timestamp="forged", pid=-1, ranks={"tp": 9}, released_bytes=1)
    for line in json_lines(log):
        assert VALIDATOR.violations(line) == []
        assert line["ranks"] == {"tp": 2}
        assert line["timestamp"] != "forged" and line["pid"] >= 0
        assert list(line)[:8] == [*envelope.HEAD, "arena_id", "released_bytes"]
        assert list(line)[8:] == (["ext"] if "ext" in line else [])


def test_get_config_and_restore_put_back_the_pipeline_in_force(tmp_path: Path) -> None:
    first, second = io.BytesIO(), io.BytesIO()
    kvlog.configure(output="json", validation="raise", stream=first)
    saved = emission.get_config()
    assert (saved.output, saved.validation, saved.stream, saved.configured) == ("json", "raise", first, True)
    kvlog.configure(output="console", validation="warn", stream=second)
    assert emission.get_config() is not saved
    assert emission.get_config().output == "console"
    emission.restore(saved)
    assert emission.get_config() is saved
    kvlog.emit(events.KvMemoryPoolEnd(avail_bytes=GIB))
    kvlog.get_logger().info("kv_memory.pool_end", avail_bytes=GIB)
    assert second.getvalue() == b""
    assert [json.loads(line)["avail_bytes"] for line in first.getvalue().splitlines()] == [GIB, GIB]
    with pytest.raises(kvlog.SchemaViolationError):  # the restored pipeline validates as it did: raise
        kvlog.emit(events.KvMemoryPoolEnd(avail_bytes=-1))


def test_restoring_the_configuration_from_before_configure_configures_the_defaults_again(
    capsys: pytest.CaptureFixture[str],
) -> None:
    unconfigured = emission.get_config()
    emission.restore(emission.EmissionConfig())
    assert not emission.get_config().configured
    assert emission.lost_events() == 0
    try:
        kvlog.emit(events.KvMemoryPoolEnd(avail_bytes=GIB))  # the default: JSON lines on stderr
        assert json.loads(capsys.readouterr().err)["avail_bytes"] == GIB
        assert emission.get_config().configured
    finally:
        emission.restore(unconfigured)


def test_console_output_prints_todays_sglang_wording(tmp_path: Path) -> None:
    log = configure_file(tmp_path, output="console")
    kvlog.bind_ranks(tp=3)
    kvlog.emit(ALLOCATION)
    kvlog.emit(READY)
    kvlog.emit(events.KvPoolSwaSummary(allocation_state="va_upper_bound", total_bytes=GIB, swa_tokens=4, full_tokens=8))
    kvlog.emit(events.KvArenaClosed(arena_id="4242_0", released_bytes=0), level="error")
    lines = log.read_text().splitlines()
    prefix = r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d TP3\] "
    expected = [
        "KV Cache VA upper bound. dtype: torch.bfloat16, #tokens: 65536, K size: 1.00 GB, V size: 1.00 GB",
        "KvVmmArena[4242_0] ready: device=0 reserved_va=12.0 GiB granularity=2048 KiB handle_type=posix_fd",
        "SWAKVPool VA upper bound: 1.00 GB, swa size: 4, full size: 8",
        "ERROR KvVmmArena[4242_0] closed: released=0 B",
    ]
    assert len(lines) == len(expected)
    for line, message in zip(lines, expected, strict=True):
        assert re.fullmatch(prefix + re.escape(message), line), line


def test_raise_mode_raises_with_the_event_and_its_errors(tmp_path: Path) -> None:
    log = configure_file(tmp_path, validation="raise")
    with pytest.raises(kvlog.SchemaViolationError) as caught:
        kvlog.emit(events.KvMemoryPoolEnd(avail_bytes=-1))
    assert caught.value.event == "kv_memory.pool_end"
    assert caught.value.version == 1
    assert caught.value.errors == [("$.avail_bytes", "-1 is less than the minimum of 0")]
    assert log.read_text() == ""


def test_warn_mode_replaces_an_invalid_event_by_a_valid_violation_report(tmp_path: Path) -> None:
    log = configure_file(tmp_path, validation="warn")
    kvlog.bind_ranks(tp=1)
    with capture_events() as captured:
        kvlog.emit(events.KvPoolSwaSummary(allocation_state="reserved", total_bytes=1, swa_tokens=1, full_tokens=1))  # type: ignore[arg-type]
        kvlog.emit(ALLOCATION)
    report, allocation = json_lines(log)
    assert captured == [report, allocation]
    assert VALIDATOR.violations(report) == []
    assert report["event"] == "kvlog.schema_violation"
    assert report["level"] == "warning"
    assert report["violating_event"] == "kv_pool.swa_summary"
    assert report["violating_schema_version"] == 2
    assert report["errors"] == [
        {"path": "$.allocation_state", "message": "'reserved' is not one of ['va_upper_bound', 'allocated']"}
    ]
    assert report["ranks"] == {"tp": 1}
    assert list(report)[:6] == list(envelope.HEAD)
    assert allocation["event"] == "kv_pool.allocation"


@pytest.mark.parametrize(
    ("label", "fields"),
    [
        ("unserialisable object", {"avail_bytes": object()}),
        ("integer beyond 64 bits", {"avail_bytes": 1 << 80}),
        ("set", {"avail_bytes": {1, 2}}),
        ("bytes", {"avail_bytes": b"\xff"}),
        ("non-string key", {"avail_bytes": 1, "ext": {1: 2}}),
    ],
)
def test_warn_mode_never_raises_into_the_caller(tmp_path: Path, label: str, fields: dict[str, Any]) -> None:
    log = configure_file(tmp_path, validation="warn")
    kvlog.get_logger().info("kv_memory.pool_end", **fields)
    (report,) = json_lines(log)
    assert report["event"] == "kvlog.schema_violation", label
    assert report["violating_event"] == "kv_memory.pool_end"
    assert VALIDATOR.violations(report) == []


def test_drop_mode_drops_and_off_mode_passes_invalid_events_through(tmp_path: Path) -> None:
    log = configure_file(tmp_path, validation="drop")
    with capture_events() as captured:
        kvlog.emit(events.KvMemoryPoolEnd(avail_bytes=-1))
        kvlog.emit(events.KvMemoryPoolEnd(avail_bytes=1))
    assert [line["avail_bytes"] for line in json_lines(log)] == [1]
    assert [event["avail_bytes"] for event in captured] == [1]

    log = configure_file(tmp_path, validation="off")
    kvlog.emit(events.KvMemoryPoolEnd(avail_bytes=-1))
    (line,) = json_lines(log)
    assert line["avail_bytes"] == -1


def test_violation_reports_are_rate_limited_and_count_what_they_suppressed(tmp_path: Path) -> None:
    log = configure_file(tmp_path, validation="warn")
    for _ in range(100):
        kvlog.emit(events.KvMemoryPoolEnd(avail_bytes=-1))
    reports = json_lines(log)
    assert 10 <= len(reports) <= 20, "at most 10 a second (the loop may straddle one second boundary)"
    time.sleep(1.05)
    kvlog.emit(events.KvMemoryPoolEnd(avail_bytes=-1))
    reports = json_lines(log)
    suppressed = sum(report.get("suppressed", 0) for report in reports)
    assert suppressed == 100 - (len(reports) - 1), "every suppressed report is counted by a later one"
    assert suppressed >= 100 - 20


def test_capture_sees_events_after_every_processor(tmp_path: Path) -> None:
    configure_file(tmp_path, validation="raise")
    kvlog.bind_ranks(tp=0, pp=2)
    with capture_events() as captured:
        kvlog.emit(READY, level="debug")
    (event,) = captured
    assert event["event"] == "kv_arena.ready"
    assert event["schema_version"] == 2
    assert event["level"] == "debug"
    assert event["ranks"] == {"tp": 0, "pp": 2}
    assert isinstance(event["pid"], int)
    assert TIMESTAMP.match(event["timestamp"])
    assert VALIDATOR.violations(event) == []
    kvlog.emit(READY)
    assert len(captured) == 1, "capture ends with the block"


def test_bind_ranks_is_per_context_and_lower_cases_tags(tmp_path: Path) -> None:
    configure_file(tmp_path)
    with capture_events() as captured:
        kvlog.emit(READY)
        kvlog.bind_ranks(TP=1, Attn_CP=0)
        kvlog.emit(READY)
    assert "ranks" not in captured[0]
    assert captured[1]["ranks"] == {"tp": 1, "attn_cp": 0}


def test_level_threshold_filters_before_any_work(tmp_path: Path) -> None:
    log = tmp_path / "events.log"
    kvlog.configure(stream=log.open("w"), level="warning", validation="raise")
    with capture_events() as captured:
        kvlog.emit(READY)
        kvlog.emit(READY, level="error")
    assert [event["level"] for event in captured] == ["error"]


def _stdlib_handler(tmp_path: Path, output: str) -> tuple[logging.Handler, Path]:
    """An application's existing handler on the root logger, with its own level and file."""
    path = tmp_path / f"app-{output}.log"
    handler = logging.FileHandler(path)
    handler.setFormatter(kvlog.formatter(output))  # type: ignore[arg-type]
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    return handler, path


def test_stdlib_bridge_json_one_timestamp_no_double_rendering(tmp_path: Path) -> None:
    handler, path = _stdlib_handler(tmp_path, "json")
    kvlog.configure(stdlib=True, validation="raise")
    kvlog.bind_ranks(tp=0)
    kvlog.emit(ALLOCATION)
    logging.getLogger("sglang.srt").warning("Load weight end. mem usage=%.2f GB", 15.5)
    handler.flush()
    raw = path.read_text().splitlines()
    assert len(raw) == 2
    assert all(line.startswith("{") and line.endswith("}") for line in raw), raw
    event, foreign = (json.loads(line) for line in raw)
    assert VALIDATOR.violations(event) == []
    assert event["event"] == "kv_pool.allocation"
    assert event["ranks"] == {"tp": 0}
    assert foreign["event"] == "Load weight end. mem usage=15.50 GB"
    assert foreign["level"] == "warning"
    assert list(event)[:6] == list(envelope.HEAD)
    assert list(foreign) == ["event", "timestamp", "level"], "a foreign record's envelope in the same order"
    for line in raw:
        assert len(TIMESTAMP.findall(line)) == 1, line
        assert line.count('"timestamp"') == 1, line


def test_stdlib_bridge_console_one_timestamp_no_double_rendering(tmp_path: Path) -> None:
    handler, path = _stdlib_handler(tmp_path, "console")
    kvlog.configure(stdlib=True, validation="raise")
    kvlog.emit(ALLOCATION)
    logging.getLogger("sglang.srt").warning("Load weight end. mem usage=%.2f GB", 15.5)
    handler.flush()
    raw = path.read_text().splitlines()
    assert len(raw) == 2
    stamp = r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\] "
    assert re.fullmatch(
        stamp
        + re.escape("KV Cache VA upper bound. dtype: torch.bfloat16, #tokens: 65536, K size: 1.00 GB, V size: 1.00 GB"),
        raw[0],
    ), raw[0]
    assert re.fullmatch(stamp + re.escape("WARNING Load weight end. mem usage=15.50 GB"), raw[1]), raw[1]
    for line in raw:
        assert len(TIMESTAMP.findall(line)) == 1, line


def test_stdlib_bridge_writes_what_a_handler_filter_put_in_the_record(tmp_path: Path) -> None:
    """A filter that replaces a kvlog record's message (redaction) is written, not the JSON kvlog rendered first."""

    def redact(record: logging.LogRecord) -> bool:
        if isinstance(record.msg, dict):
            record.msg = {**record.msg, "pool": "redacted"}
        return True

    handler, path = _stdlib_handler(tmp_path, "json")
    handler.addFilter(redact)
    kvlog.configure(stdlib=True, validation="raise")
    kvlog.emit(ALLOCATION)
    logging.getLogger("sglang.srt").info("foreign")
    handler.flush()
    event, foreign = (json.loads(line) for line in path.read_text().splitlines())
    assert event == {**ALLOCATION.to_dict(), "pool": "redacted"} | {k: event[k] for k in ("timestamp", "level", "pid")}
    assert foreign == {"event": "foreign", "timestamp": foreign["timestamp"], "level": "info"}


def test_stdlib_bridge_respects_the_configured_level(tmp_path: Path) -> None:
    handler, path = _stdlib_handler(tmp_path, "json")
    kvlog.configure(stdlib=True, validation="raise", level="error")
    kvlog.emit(ALLOCATION)
    kvlog.emit(ALLOCATION, level="error")
    handler.flush()
    assert [json.loads(line)["level"] for line in path.read_text().splitlines()] == ["error"]


def test_stdlib_bridge_in_warn_mode_reports_instead_of_raising(tmp_path: Path) -> None:
    handler, path = _stdlib_handler(tmp_path, "json")
    kvlog.configure(stdlib=True, validation="warn")
    kvlog.emit(events.KvMemoryPoolEnd(avail_bytes=-1))
    handler.flush()
    (report,) = (json.loads(line) for line in path.read_text().splitlines())
    assert report["event"] == "kvlog.schema_violation"
    assert VALIDATOR.violations(report) == []


@pytest.mark.parametrize("output", ["json", "console"])
def test_text_and_binary_streams_both_work(output: str) -> None:
    text, binary = io.StringIO(), io.BytesIO()
    for stream in (text, binary):
        kvlog.configure(output=output, validation="raise", stream=stream)  # type: ignore[arg-type]
        kvlog.emit(events.KvMemoryPoolEnd(avail_bytes=40 * GIB))
    written = text.getvalue()
    assert written.endswith("\n") and written.count("\n") == 1
    if output == "json":
        assert json.loads(written)["avail_bytes"] == 40 * GIB
        assert json.loads(binary.getvalue())["avail_bytes"] == 40 * GIB
    else:
        assert written.rstrip("\n").endswith("Memory pool end. avail mem=40.00 GB")
        assert binary.getvalue().decode().split("] ", 1)[1] == written.split("] ", 1)[1]
