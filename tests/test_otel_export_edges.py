"""The OpenTelemetry export at its edges: fields that are not what a record expects, values OTLP holds only in
part, the data points of figures that are not whole, the tap's source, and an export's options and its end."""

from __future__ import annotations

import dataclasses
import datetime
import enum
import io
import json
import math
import uuid
from typing import Any

import pytest
from opentelemetry._logs import SeverityNumber
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from otel_helpers import in_memory

import kvlog
from kvlog import events
from kvlog.emission import get_config, restore
from kvlog.errors import OptionError
from kvlog.metrics.series import MemorySeries, this_process
from kvlog.otel import OtelExport, export
from kvlog.otel.log_records import log_record, timestamp_ns


def test_a_record_takes_name_time_and_level_from_the_event_and_every_other_field_as_an_attribute() -> None:
    record = log_record(
        {"event": "x.y", "timestamp": "2026-01-01T00:00:00Z", "level": "error", "schema_version": 1},
        instance="a.log",
    )
    assert (record.event_name, record.timestamp) == ("x.y", 1_767_225_600 * 10**9)
    assert (record.severity_number, record.severity_text) == (SeverityNumber.ERROR, "error")
    assert dict(record.attributes or {}) == {"kvlog.schema_version": 1, "kvlog.server_instance": "a.log"}


def test_fields_a_record_cannot_use_are_left_unset_not_guessed() -> None:
    record = log_record({"event": 3, "timestamp": 1767225600, "level": 20})
    assert (record.event_name, record.timestamp, record.severity_number, record.severity_text) == (
        None,
        None,
        None,
        None,
    )
    assert dict(record.attributes or {}) == {}  # no instance given: no kvlog.server_instance


def test_a_level_kvlog_does_not_know_keeps_its_text_with_an_unspecified_severity() -> None:
    record = log_record({"event": "x.y", "level": "trace"})
    assert (record.severity_number, record.severity_text) == (SeverityNumber.UNSPECIFIED, "trace")


@pytest.mark.parametrize(
    ("timestamp", "expected"),
    [
        ("2026-01-01T00:00:00Z", 1_767_225_600_000_000_000),
        ("2026-01-01T00:00:00.1Z", 1_767_225_600_100_000_000),
        ("2026-01-01T00:00:00.000000001+00:00", 1_767_225_600_000_000_001),
        ("2026-01-01T00:00:00.1234567891Z", None),  # below a nanosecond: not the schema's
        ("2026-01-01T00:00:00", None),
        ("x2026-01-01T00:00:00Z", None),
        (1_767_225_600, None),
    ],
)
def test_timestamps_in_nanoseconds(timestamp: object, expected: int | None) -> None:
    assert timestamp_ns(timestamp) == expected


def test_arrays_of_one_kind_are_arrays_and_any_other_list_is_its_json_text() -> None:
    record = log_record(
        {
            "event": "x.y",
            "ratios": [0.5, 1.5],
            "ranks_seen": (0, 1),
            "numbers": [1, 0.5],
            "flags_and_counts": [True, 1],
            "holes": [1, None],
            "names": ["é", 2],
            "ext": {"nothing": None, "empty": {}},
        }
    )
    attributes = dict(record.attributes or {})
    assert attributes == {
        "kvlog.ratios": (0.5, 1.5),
        "kvlog.ranks_seen": (0, 1),
        "kvlog.numbers": "[1,0.5]",
        "kvlog.flags_and_counts": "[true,1]",
        "kvlog.holes": "[1,null]",
        "kvlog.names": '["é",2]',  # UTF-8 as it is, no escapes
    }


def test_subclasses_of_json_scalars_are_sent_as_the_plain_type() -> None:
    class Exact(float):
        pass

    class Text(str):
        pass

    attributes = dict(log_record({"event": "x.y", "ratio": Exact(0.25), "name": Text("a")}).attributes or {})
    assert attributes == {"kvlog.ratio": 0.25, "kvlog.name": "a"}
    assert (type(attributes["kvlog.ratio"]), type(attributes["kvlog.name"])) == (float, str)


@dataclasses.dataclass
class Sized:
    size: int


class Handle:
    def __str__(self) -> str:
        return "handle 7"


def test_a_value_the_writer_cannot_write_is_sent_as_its_text_not_an_error() -> None:
    """A record never fails on a field (the module's promise): what orjson cannot write at all, an object of no
    JSON form or a dataclass holding an integer beyond 64 bits, is sent as its str()."""
    attributes = dict(log_record({"event": "x.y", "handle": Handle(), "sized": Sized(2**70)}).attributes or {})
    assert attributes == {"kvlog.handle": "handle 7", "kvlog.sized": f"Sized(size={2**70})"}


def data_points(reader: InMemoryMetricReader, name: str) -> list[tuple[dict[str, Any], float]]:
    data = reader.get_metrics_data()
    assert data is not None
    return [
        (dict(point.attributes or {}), point.value)
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
        if metric.name == name
        for point in metric.data.data_points
    ]


def test_a_whole_figure_is_an_integer_point_and_a_fraction_stays_a_float() -> None:
    series = MemorySeries()
    exporter, _, reader = in_memory(series=series)
    with exporter:
        for name, size in (("whole", 3.0), ("part", 2.5)):
            series.observe(
                {"event": "kv_pool.allocation", "pool": name, "allocation_state": "allocated", "kv_bytes": size},
                instance="a",
            )
        points = {labels["pool"]: value for labels, value in data_points(reader, "kvlog_kv_pool_bytes")}
    assert points == {"whole": 3, "part": 2.5}
    assert (type(points["whole"]), type(points["part"])) == (int, float)


def test_a_metric_without_a_series_has_no_points() -> None:
    exporter, _, reader = in_memory()
    with exporter:
        exporter.count_unparsed(1, instance="a")
        assert data_points(reader, "kvlog_kv_pool_bytes") == []
        assert data_points(reader, "kvlog_unparsed_lines_total") == [({"server_instance": "a"}, 1)]


@pytest.fixture
def emitting() -> Any:
    saved = get_config()
    kvlog.configure(stream=io.StringIO())
    try:
        yield
    finally:
        restore(saved)


def test_the_tap_names_this_process_unless_told_otherwise(emitting: None) -> None:
    exporter, logs, _ = in_memory()
    with exporter.tap():
        kvlog.emit(events.WeightsLoadBegin(avail_bytes=1))
        exporter.force_flush()
        (readable,) = logs.get_finished_logs()
    assert dict(readable.log_record.attributes or {})["kvlog.server_instance"] == this_process()
    assert exporter.dropped == 0


class Mode(enum.Enum):
    EAGER = "eager"


def test_a_tapped_value_json_has_no_type_for_is_exported_as_the_line_writes_it() -> None:
    """An engine's ext may hold a datetime, a UUID, an enum: the writer turns each into JSON of its own,
    and the record says the same, not Python's text of the object (or that text quoted as JSON)."""
    saved, stream = get_config(), io.StringIO()
    kvlog.configure(stream=stream)
    exporter, logs, _ = in_memory()
    try:
        with exporter.tap():
            started = datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.UTC)
            ext = {"started": started, "run": uuid.UUID(int=1), "mode": Mode.EAGER, "days": [started.date(), 1]}
            kvlog.emit(events.WeightsLoadBegin(avail_bytes=1, ext=ext))
            exporter.force_flush()
            (readable,) = logs.get_finished_logs()
    finally:
        restore(saved)
    written = json.loads(stream.getvalue())["ext"]
    assert written == {
        "started": "2026-01-02T03:04:05+00:00",
        "run": "00000000-0000-0000-0000-000000000001",
        "mode": "eager",
        "days": ["2026-01-02", 1],
    }
    attributes = dict(readable.log_record.attributes or {})
    assert {key: attributes[f"kvlog.ext.{key}"] for key in written} == {
        "started": written["started"],
        "run": written["run"],
        "mode": "eager",
        "days": '["2026-01-02",1]',  # a mixed list is its JSON text, as the line writes it
    }


def test_a_closed_export_closes_once_and_exports_nothing_more(emitting: None) -> None:
    exporter, logs, _ = in_memory()
    exporter.tap(instance="me")
    assert exporter.close() is True
    assert exporter.close() is True
    kvlog.emit(events.WeightsLoadBegin(avail_bytes=1))
    assert logs.get_finished_logs() == ()


def test_force_flush_sends_what_is_batched() -> None:
    exporter, logs, _ = in_memory()
    with exporter:
        exporter.observe({"event": "x.y"}, instance="a")
        assert exporter.force_flush() is True
        assert [readable.log_record.event_name for readable in logs.get_finished_logs()] == ["x.y"]


def test_force_flush_after_close_says_nothing_was_sent() -> None:
    """The records' side is shut down (the metrics' still collects): a flush that sends no record is not a success."""
    exporter, logs, _ = in_memory()
    exporter.close()
    exporter.observe({"event": "x.y"}, instance="a")
    assert exporter.force_flush() is False
    assert logs.get_finished_logs() == ()


class FailingReader(InMemoryMetricReader):
    """A metric reader whose shutdown fails: the export still ends, without a traceback."""

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        raise RuntimeError("cannot shut down")


def test_a_reader_that_fails_to_shut_down_still_lets_the_export_end(capsys: pytest.CaptureFixture[str]) -> None:
    exporter = OtelExport(InMemoryLogRecordExporter(), FailingReader())
    assert exporter.close(timeout_s=30) is True
    assert "Traceback" not in capsys.readouterr().err


@pytest.mark.parametrize("interval", [0, -1.0, math.nan])
def test_an_export_interval_that_is_no_time_is_refused(interval: float) -> None:
    with pytest.raises(OptionError) as raised:
        export("http://127.0.0.1:4318", export_interval_s=interval)
    assert str(raised.value) == f"export_interval_s {interval}: expected a number of seconds above 0"
