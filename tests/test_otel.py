"""OpenTelemetry export: events as log records and memory series as metrics, as a collector receives them.

Three levels, each with real parts: the SDK's in-memory exporter and reader (what the SDK holds);
a loopback HTTP server that decodes the OTLP/HTTP protobuf bodies the real exporters POST (the wire
format); and the same bodies relayed by a real OpenTelemetry collector, Rotel (PyPI ``rotel``, which
ships its binary), so a collector's own decoding and re-encoding keeps every field we rely on.
"""

from __future__ import annotations

import gzip
import importlib.util
import io
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
from follow_helpers import append, corpus_text, following, lines_of, wait_for
from follow_helpers import migrated as events_of_log
from google.protobuf.message import Message
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest, ExportLogsServiceResponse
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.sdk.metrics.export import Gauge, MetricsData, Sum
from otel_helpers import in_memory

import kvlog
from kvlog import events
from kvlog.commands import follow, migrate
from kvlog.emission import get_config, restore
from kvlog.errors import KvlogError, OptionError
from kvlog.follow.state import FollowState
from kvlog.follow.state import load as load_state
from kvlog.metrics import METRICS, MemorySeries
from kvlog.otel import export
from kvlog.otel.log_records import timestamp_ns

CORPUS = Path(__file__).parent / "corpus"
REPO = Path(__file__).parent.parent
SEVERITY = {"debug": 5, "info": 9, "warning": 13, "error": 17, "critical": 21}
UCUM = {"bytes": "By", "tokens": "{token}", "1": "1"}


def migrated(log: str) -> list[dict[str, Any]]:
    out = io.BytesIO()
    migrate(str(CORPUS / log), only_events=True, stdout=out)
    return [json.loads(line) for line in out.getvalue().splitlines()]


def fed(events_: list[dict[str, Any]], instance: str) -> MemorySeries:
    series = MemorySeries()
    for event in events_:
        series.observe(event, instance=instance)
    return series


def points(data: MetricsData | None) -> dict[str, tuple[str, str, list[tuple[dict[str, Any], float]]]]:
    """name -> (unit, kind, [(attributes, value)]) of every metric an in-memory reader collected."""
    assert data is not None
    found = {}
    for resource_metrics in data.resource_metrics:
        for scope_metrics in resource_metrics.scope_metrics:
            assert scope_metrics.scope.name == "kvlog"
            for metric in scope_metrics.metrics:
                kind = "counter" if isinstance(metric.data, Sum) else "gauge"
                if isinstance(metric.data, Sum):
                    assert metric.data.is_monotonic
                else:
                    assert isinstance(metric.data, Gauge)
                values = [(dict(p.attributes or {}), p.value) for p in metric.data.data_points]
                found[metric.name] = (metric.unit or "", kind, values)
    return found


# -- log records, in memory -----------------------------------------------------------------------


def test_migrated_events_become_records_named_timed_and_levelled_as_the_event() -> None:
    corpus = migrated("gen2_2025.log")
    exporter, logs, _ = in_memory()
    before = time.time_ns()
    with exporter:
        for event in corpus:
            exporter.observe(event, instance="/var/log/sglang/gen2.log")
        assert exporter.force_flush()
        records = logs.get_finished_logs()
    assert len(records) == len(corpus)
    for event, readable in zip(corpus, records, strict=True):
        record = readable.log_record
        assert record.event_name == event["event"]
        assert record.body is None  # the conventions: an event's details are attributes, not a body
        assert record.timestamp == timestamp_ns(event["timestamp"])
        assert record.observed_timestamp is not None and record.observed_timestamp >= before
        assert record.severity_text == event["level"]
        assert record.severity_number is not None and record.severity_number.value == SEVERITY[event["level"]]
        attributes = dict(record.attributes or {})
        assert attributes["kvlog.schema_version"] == event["schema_version"]
        assert attributes["kvlog.server_instance"] == "/var/log/sglang/gen2.log"
        for tag, rank in event.get("ranks", {}).items():
            assert attributes[f"kvlog.ranks.{tag}"] == rank
        assert attributes["kvlog.migrated.line"] == event["migrated"]["line"]
        assert attributes["kvlog.migrated.steps"] == tuple(event["migrated"]["steps"])
        for field, value in event.items():
            if field.endswith("_bytes") and value is not None:
                assert attributes[f"kvlog.{field}"] == value and type(attributes[f"kvlog.{field}"]) is int
            if value is None:  # "not known" is an absent attribute, never a made-up value
                assert f"kvlog.{field}" not in attributes
        for field, half_width in event["migrated"].get("uncertainty_bytes", {}).items():
            assert attributes[f"kvlog.migrated.uncertainty_bytes.{field}"] == half_width


def test_the_first_record_of_a_corpus_exactly() -> None:
    first = migrated("gen2_2025.log")[0]
    exporter, logs, _ = in_memory()
    with exporter:
        exporter.observe(first, instance="gen2.log")
        exporter.force_flush()
        (readable,) = logs.get_finished_logs()
    assert first["timestamp"] == "2025-06-03T11:20:41Z"
    assert readable.log_record.timestamp == 1_748_949_641 * 10**9
    assert dict(readable.log_record.attributes or {}) == {
        "kvlog.schema_version": 1,
        "kvlog.ranks.pp": 1,
        "kvlog.ranks.tp": 0,
        "kvlog.avail_bytes": 84_396_107_366,
        "kvlog.migrated.source_format": "sglang-text/2025-01",
        "kvlog.migrated.file": str(CORPUS / "gen2_2025.log"),
        "kvlog.migrated.line": 2,
        "kvlog.migrated.steps": ("sglang-text/2025-01",),
        "kvlog.migrated.inferred.timestamp.rule": "naive-time-as-utc",
        "kvlog.migrated.inferred.timestamp.evidence": "sglang prints local time without a zone; read as UTC",
        "kvlog.migrated.uncertainty_bytes.avail_bytes": 5_368_710,
        "kvlog.server_instance": "gen2.log",
    }


@pytest.mark.parametrize("level", list(SEVERITY))
def test_each_level_has_its_severity_number(level: str) -> None:
    exporter, logs, _ = in_memory()
    with exporter:
        exporter.observe({"event": "x.y", "timestamp": "2026-01-01T00:00:00Z", "level": level}, instance="i")
        exporter.force_flush()
        (readable,) = logs.get_finished_logs()
    assert readable.log_record.severity_number is not None
    assert (readable.log_record.severity_number.value, readable.log_record.severity_text) == (SEVERITY[level], level)


@pytest.mark.parametrize(
    ("timestamp", "expected"),
    [
        ("2026-03-10T07:46:59.123456789Z", 1_773_128_819_123_456_789),  # nanoseconds kept exactly
        ("2026-03-10T07:46:59.5+00:00", 1_773_128_819_500_000_000),
        ("2026-02-30T00:00:00Z", None),  # no such day
        ("2026-03-10T07:46:59+01:00", None),  # not UTC: the schema's timestamps never are
        ("2026-03-10 07:46:59", None),
        (None, None),
    ],
)
def test_timestamps_are_read_exactly_or_left_to_the_observed_time(timestamp: str | None, expected: int | None) -> None:
    exporter, logs, _ = in_memory()
    with exporter:
        exporter.observe({"event": "x.y", "timestamp": timestamp, "level": "info"}, instance="i")
        exporter.force_flush()
        (readable,) = logs.get_finished_logs()
    assert readable.log_record.timestamp == expected


def test_values_otlp_cannot_hold_as_they_are_become_strings_not_errors() -> None:
    event = {
        "event": "kv_pool.allocation",
        "timestamp": "2026-01-01T00:00:00Z",
        "level": "info",
        "k_bytes": 2**63 - 1,
        "v_bytes": 2**64 + 1,  # beyond int64: OTLP's integers cannot hold it, its digits are kept
        "page_bytes": 2**63,  # the first integer beyond int64, as the last within it is k_bytes
        "arena_ids": ["a", "b"],
        "ext": {
            "negative": -(2**63),
            "below": -(2**63) - 1,
            "ratio": 0.5,
            "flag": True,
            "none": None,
            "empty": [],
            "flags": [True, False],
            "sizes": [1, 2**70],
            "edges": [2**63 - 1, 2**63],
            "ends": [-(2**63), 2**63 - 1],  # both ends of int64 are still int64s: an array
            "mixed": [1, "a"],
            "layers": [{"index": 0, "bytes": 2**65}],
            "deep": {"deeper": {"deepest": "x"}},
        },
    }
    exporter, logs, _ = in_memory()
    with exporter:
        exporter.observe(event, instance="i")
        exporter.force_flush()
        (readable,) = logs.get_finished_logs()
    attributes = dict(readable.log_record.attributes or {})
    assert attributes["kvlog.k_bytes"] == 2**63 - 1
    assert attributes["kvlog.v_bytes"] == "18446744073709551617"
    assert attributes["kvlog.page_bytes"] == "9223372036854775808"
    assert attributes["kvlog.arena_ids"] == ("a", "b")
    assert attributes["kvlog.ext.negative"] == -(2**63)
    assert attributes["kvlog.ext.below"] == str(-(2**63) - 1)
    assert attributes["kvlog.ext.ratio"] == 0.5
    assert attributes["kvlog.ext.flag"] is True
    assert "kvlog.ext.none" not in attributes
    assert attributes["kvlog.ext.empty"] == ()
    assert attributes["kvlog.ext.flags"] == (True, False)
    assert json.loads(attributes["kvlog.ext.sizes"]) == [1, 2**70]  # one value beyond int64: the array as JSON
    assert json.loads(attributes["kvlog.ext.edges"]) == [2**63 - 1, 2**63]
    assert attributes["kvlog.ext.ends"] == (-(2**63), 2**63 - 1)
    assert json.loads(attributes["kvlog.ext.mixed"]) == [1, "a"]
    assert json.loads(attributes["kvlog.ext.layers"]) == [{"index": 0, "bytes": 2**65}]
    assert attributes["kvlog.ext.deep.deeper.deepest"] == "x"


# -- resource --------------------------------------------------------------------------------------


def test_resource_names_service_host_process_and_instance(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)
    monkeypatch.delenv("OTEL_RESOURCE_ATTRIBUTES", raising=False)
    first, second = in_memory()[0], in_memory(resource_attributes={"deployment.environment.name": "staging"})[0]
    with first, second:
        attributes = dict(first.resource.attributes)
        assert attributes["service.name"] == "kvlog"
        assert attributes["host.name"] == socket.gethostname()
        assert attributes["process.pid"] == os.getpid()
        assert attributes["telemetry.sdk.language"] == "python"
        assert second.resource.attributes["deployment.environment.name"] == "staging"
        assert second.resource.attributes["service.instance.id"] != attributes["service.instance.id"]


def test_resource_environment_overrides_kvlogs_defaults_and_the_caller_overrides_both(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "host.name=from-env,team=kv")
    monkeypatch.setenv("OTEL_SERVICE_NAME", "sglang-prod")
    exporter = in_memory()[0]
    called = in_memory(service_name="sglang-canary", resource_attributes={"team": "memory"})[0]
    with exporter, called:
        assert exporter.resource.attributes["service.name"] == "sglang-prod"
        assert exporter.resource.attributes["host.name"] == "from-env"
        assert exporter.resource.attributes["team"] == "kv"
        assert called.resource.attributes["service.name"] == "sglang-canary"
        assert called.resource.attributes["team"] == "memory"


def test_records_carry_the_resource() -> None:
    exporter, logs, _ = in_memory(service_name="sglang-a")
    with exporter:
        exporter.observe({"event": "x.y", "level": "info"}, instance="i")
        exporter.force_flush()
        (readable,) = logs.get_finished_logs()
    assert readable.resource.attributes["service.name"] == "sglang-a"
    assert readable.instrumentation_scope is not None
    assert (readable.instrumentation_scope.name, readable.instrumentation_scope.version) == ("kvlog", kvlog.__version__)


# -- metrics, in memory ----------------------------------------------------------------------------


def assert_metrics_are_the_series(found: dict[str, Any], series: MemorySeries) -> None:
    expected: dict[str, list[tuple[dict[str, Any], float]]] = {}
    for metric, labels, value in series.samples():
        expected.setdefault(metric.name, []).append((labels, value))
    assert expected, "the corpus moved no series"
    for metric in METRICS:
        if metric.name not in expected:
            assert metric.name not in found  # no series, no data points
            continue
        unit, kind, values = found[metric.name]
        assert (unit, kind) == (UCUM[metric.unit], metric.kind)
        assert sorted(values, key=repr) == sorted(expected[metric.name], key=repr)
        assert all(type(value) is int for _, value in values)  # bytes, tokens and counts are whole


def test_gauges_and_counters_carry_the_series_values() -> None:
    corpus = [*migrated("gen2_2025.log"), *migrated("hybrid_swa_2026.log")]
    exporter, _, reader = in_memory()
    with exporter:
        for event in corpus:
            exporter.observe(event, instance="node-1")
        found = points(reader.get_metrics_data())
    assert_metrics_are_the_series(found, fed(corpus, "node-1"))
    assert found["kvlog_events_total"][2]  # counted, with the series' own labels
    assert {"event", "server", "server_instance"} == set(found["kvlog_events_total"][2][0][0])


def test_a_series_passed_in_is_read_not_fed() -> None:
    corpus = migrated("gen2_2025.log")
    series = fed(corpus, "node-1")
    exporter, logs, reader = in_memory(series=series)
    with exporter:
        for event in corpus:  # records only: the caller feeds its series (kvlog follow, for Prometheus too)
            exporter.observe(event, instance="node-1")
        exporter.force_flush()
        found = points(reader.get_metrics_data())
        assert len(logs.get_finished_logs()) == len(corpus)
    assert_metrics_are_the_series(found, fed(corpus, "node-1"))


def test_lines_and_violations_count_in_the_series_the_export_owns_and_not_twice_in_a_callers() -> None:
    owning, _, owning_reader = in_memory()
    series = MemorySeries()
    reading, _, reading_reader = in_memory(series=series)
    with owning, reading:
        for observer in (owning, reading, series):  # kvlog follow's observers: a caller's series and its export
            observer.count_unparsed(3, instance="a.log")
            observer.count_violations(2, instance="a.log")
        for reader in (owning_reader, reading_reader):
            found = points(reader.get_metrics_data())
            assert found["kvlog_unparsed_lines_total"][2] == [({"server_instance": "a.log"}, 3)]
            assert found["kvlog_schema_violations_total"][2] == [({"server_instance": "a.log"}, 2)]


class CountingSeries(MemorySeries):
    def __init__(self) -> None:
        super().__init__()
        self.snapshots = 0

    def samples(self) -> list[Any]:
        self.snapshots += 1
        return super().samples()


def test_one_collection_reads_one_snapshot_of_the_series() -> None:
    series = CountingSeries()
    for event in migrated("gen2_2025.log"):
        series.observe(event, instance="i")
    exporter, _, reader = in_memory(series=series)
    with exporter:
        for collections in (1, 2, 3):
            reader.get_metrics_data()
            assert series.snapshots == collections  # not one per instrument: no two moments in one export


# -- the emission tap ------------------------------------------------------------------------------


@pytest.fixture
def emitted() -> Iterator[io.StringIO]:
    saved = get_config()
    stream = io.StringIO()
    kvlog.configure(stream=stream, validation="raise")
    try:
        yield stream
    finally:
        restore(saved)


def test_tap_exports_what_kvlog_emits_until_closed(emitted: io.StringIO) -> None:
    exporter, logs, reader = in_memory()
    exporter.tap(instance="engine-0")
    kvlog.bind_ranks(tp=1)
    try:
        kvlog.emit(events.WeightsLoadBegin(avail_bytes=80 << 30))
        kvlog.emit(
            events.KvPoolAllocation(
                pool=None,
                label=None,
                layout="mla",
                dtype="fp8_e4m3",
                num_tokens=1 << 20,
                allocation_state="allocated",
                committed_bytes=None,
                kv_bytes=40 << 30,
            ),
            "warning",
        )
        exporter.force_flush()
        records = [r.log_record for r in logs.get_finished_logs()]
        found = points(reader.get_metrics_data())
        exporter.close()
        kvlog.emit(events.WeightsLoadBegin(avail_bytes=1))
    finally:
        kvlog.bind_ranks()
    written = [json.loads(line) for line in emitted.getvalue().splitlines()]
    assert len(written) == 3  # the log itself is untouched, before and after the tap
    assert [r.event_name for r in records] == ["weights.load_begin", "kv_pool.allocation"]
    for record, line in zip(records, written[:2], strict=True):
        assert record.timestamp == timestamp_ns(line["timestamp"])
        assert dict(record.attributes or {})["kvlog.pid"] == os.getpid()
        assert dict(record.attributes or {})["kvlog.ranks.tp"] == 1
        assert dict(record.attributes or {})["kvlog.server_instance"] == "engine-0"
    assert records[1].severity_text == "warning"
    assert dict(records[1].attributes or {})["kvlog.kv_bytes"] == 40 << 30
    ((labels, size),) = found["kvlog_kv_pool_bytes"][2]  # the export's own series, fed by the tap
    assert (labels["tp"], labels["server"], labels["server_instance"], size) == ("1", "kvlog", "engine-0", 40 << 30)


def test_a_failing_export_never_costs_the_log_its_line(emitted: io.StringIO, monkeypatch: pytest.MonkeyPatch) -> None:
    exporter = in_memory()[0]

    def broken(*_args: Any, **_kwargs: Any) -> None:
        raise RuntimeError("broken series")

    with exporter.tap():
        monkeypatch.setattr(exporter.series, "observe", broken)
        kvlog.emit(events.WeightsLoadBegin(avail_bytes=1))
        kvlog.emit(events.WeightsLoadBegin(avail_bytes=2))
    assert [json.loads(line)["avail_bytes"] for line in emitted.getvalue().splitlines()] == [1, 2]
    assert exporter.dropped == 2
    assert kvlog.emission.lost_events() == 0


def test_one_tap_per_export(emitted: io.StringIO) -> None:
    exporter = in_memory()[0]
    with exporter:
        exporter.tap()
        with pytest.raises(OptionError, match="one tap"):
            exporter.tap()


# -- choosing the endpoint, and the extra ----------------------------------------------------------


@pytest.mark.parametrize("endpoint", ["127.0.0.1:4318", "grpc://collector:4317", "http://", "file:///tmp/x"])
def test_an_endpoint_that_is_no_http_url_is_refused(endpoint: str) -> None:
    with pytest.raises(OptionError, match="expected an http:// or https:// URL"):
        export(endpoint)


def test_without_the_extra_the_error_says_what_to_install() -> None:
    script = (
        "import sys\n"
        "sys.modules['opentelemetry'] = None\n"  # what an environment without the extra imports
        "import kvlog.otel\n"
        "from kvlog.errors import KvlogError\n"
        "try:\n"
        "    kvlog.otel.export('http://127.0.0.1:4318')\n"
        "except KvlogError as exc:\n"
        "    print(exc)\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=REPO)
    assert result.stdout.strip() == "OpenTelemetry export needs the otel extra: pip install 'kvlog[otel]'"
    assert issubclass(kvlog.otel.OtelExtraMissing, KvlogError)


# -- the wire: real OTLP/HTTP exporters, a loopback receiver that decodes what they POST --------------


class Receiver:
    """An OTLP/HTTP receiver on loopback: decodes each POST to /v1/logs and /v1/metrics with the OTLP protos."""

    KINDS: ClassVar[dict[str, tuple[type[Message], type[Message]]]] = {
        "/v1/logs": (ExportLogsServiceRequest, ExportLogsServiceResponse),
        "/v1/metrics": (ExportMetricsServiceRequest, ExportMetricsServiceResponse),
    }

    def __init__(self) -> None:
        self.requests: dict[str, list[Any]] = {path: [] for path in self.KINDS}
        self.content_types: set[str] = set()
        self.arrived = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                kind = receiver.KINDS.get(self.path)
                if kind is None:
                    self.send_error(404)
                    return
                request, response = kind
                decoded = request.FromString(body)
                reply = response().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)
                with receiver.arrived:
                    receiver.content_types.add(self.headers.get("Content-Type", ""))
                    receiver.requests[self.path].append(decoded)
                    receiver.arrived.notify_all()

            def log_message(self, *_args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def records(self) -> list[tuple[dict[str, Any], Any]]:
        """(resource attributes, log record) of every record received."""
        return [
            (attributes_of(resource_logs.resource.attributes), record)
            for request in self.requests["/v1/logs"]
            for resource_logs in request.resource_logs
            for scope_logs in resource_logs.scope_logs
            for record in scope_logs.log_records
        ]

    def metrics(self) -> dict[str, Any]:
        """The last data received of each metric, by name."""
        return {
            metric.name: metric
            for request in self.requests["/v1/metrics"]
            for resource_metrics in request.resource_metrics
            for scope_metrics in resource_metrics.scope_metrics
            for metric in scope_metrics.metrics
        }

    def wait_for_records(self, count: int) -> None:
        """Until ``count`` records and one metrics export arrived (a relay sends them on in its own time)."""
        with self.arrived:
            done = self.arrived.wait_for(
                lambda: len(self.records()) >= count and self.requests["/v1/metrics"], timeout=60
            )
        assert done, f"{len(self.records())} of {count} records, {len(self.requests['/v1/metrics'])} metrics exports"


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    receiver = Receiver()
    receiver.thread.start()
    try:
        yield receiver
    finally:
        receiver.server.shutdown()
        receiver.server.server_close()


def value_of(value: AnyValue) -> Any:
    which = value.WhichOneof("value")
    if which == "array_value":
        return tuple(value_of(item) for item in value.array_value.values)
    return getattr(value, which) if which else None


def attributes_of(pairs: Any) -> dict[str, Any]:
    return {pair.key: value_of(pair.value) for pair in pairs}


def assert_received(receiver: Receiver, corpus: list[dict[str, Any]], series: MemorySeries, service: str) -> None:
    """What a collector gets: every event as its record, the resource, and the series as metrics."""
    received = receiver.records()
    assert len(received) == len(corpus)
    by_line = {}
    for _, record in received:
        attributes = attributes_of(record.attributes)
        by_line[attributes["kvlog.migrated.file"], attributes["kvlog.migrated.line"]] = record
    for event in corpus:
        record = by_line[event["migrated"]["file"], event["migrated"]["line"]]
        attributes = attributes_of(record.attributes)
        assert record.event_name == event["event"]
        assert record.time_unix_nano == timestamp_ns(event["timestamp"])
        assert record.observed_time_unix_nano > 0
        assert (record.severity_number, record.severity_text) == (SEVERITY[event["level"]], event["level"])
        for field, value in event.items():
            if isinstance(value, int):
                assert attributes[f"kvlog.{field}"] == value  # int_value: byte counts arrive as integers
    resource, _ = received[0]
    assert resource["service.name"] == service
    assert resource["process.pid"] == os.getpid()
    assert resource["host.name"] == socket.gethostname()
    assert resource["service.instance.id"]
    metrics = receiver.metrics()
    for metric, labels, value in series.samples():
        data = metrics[metric.name]
        assert data.unit == UCUM[metric.unit]
        kind = data.WhichOneof("data")
        assert kind == ("sum" if metric.kind == "counter" else "gauge")
        values = {
            tuple(sorted(attributes_of(point.attributes).items())): point.as_int
            for point in getattr(data, kind).data_points
        }
        assert values[tuple(sorted(labels.items()))] == value


def test_real_otlp_http_exporters_send_what_a_collector_decodes(receiver: Receiver) -> None:
    corpus = migrated("gen3_dtype_2026.log")
    exporter = export(receiver.url, service_name="sglang-gen3", export_interval_s=3600)
    with exporter:
        for event in corpus:
            exporter.observe(event, instance="gen3.log")
        assert exporter.force_flush()
    receiver.wait_for_records(len(corpus))
    assert receiver.content_types == {"application/x-protobuf"}
    assert_received(receiver, corpus, fed(corpus, "gen3.log"), "sglang-gen3")


def test_the_endpoint_defaults_to_the_sdks_environment_variable(
    receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url)
    corpus = migrated("gen1_early_2025.log")
    with export(export_interval_s=3600) as exporter:
        for event in corpus:
            exporter.observe(event, instance="gen1.log")
    receiver.wait_for_records(len(corpus))  # close() flushed the records and exported the metrics once more
    assert_received(receiver, corpus, fed(corpus, "gen1.log"), "kvlog")


# -- through a real collector ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def rotel() -> str:
    spec = importlib.util.find_spec("rotel")
    agent = (
        Path(spec.submodule_search_locations[0]) / "rotel-agent" if spec and spec.submodule_search_locations else None
    )
    if agent is None or not agent.is_file():
        if os.environ.get("CI"):
            pytest.fail(
                "the Rotel collector is not installed, and CI must run the collector proof (the dev extra has it)"
            )
        pytest.skip("the Rotel collector is not installed (pip install rotel==0.0.1a15)")
    return str(agent)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def collector(rotel: str, receiver: Receiver, tmp_path: Path) -> Iterator[str]:
    """A Rotel collector on loopback: OTLP/HTTP in, OTLP/HTTP out to ``receiver``; yields its base URL."""
    port, errors = free_port(), tmp_path / "rotel.err"
    with errors.open("w") as stderr:  # the child keeps its own copy
        process = subprocess.Popen(
            [
                rotel,
                "start",
                "--otlp-http-endpoint",
                f"127.0.0.1:{port}",
                "--otlp-grpc-endpoint",
                f"127.0.0.1:{free_port()}",
                "--exporter",
                "otlp",
                "--otlp-exporter-protocol",
                "http",
                "--otlp-exporter-endpoint",
                receiver.url,
                "--pid-file",
                str(tmp_path / "rotel.pid"),
                "--log-file",
                str(tmp_path / "rotel.log"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    try:
        for _ in range(600):  # up to a minute for the listener; the test itself waits on no clock
            if process.poll() is not None:
                pytest.fail(f"rotel exited with {process.returncode}: {errors.read_text()}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        else:
            pytest.fail("rotel did not listen within a minute")
        yield f"http://127.0.0.1:{port}"
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def test_a_real_collector_receives_and_relays_every_field(collector: str, receiver: Receiver) -> None:
    corpus = [*migrated("gen2_2025.log"), *migrated("postcapture_after_fix_2026_09.log")]
    exporter = export(collector, service_name="sglang-relayed", export_interval_s=3600)
    with exporter:
        for event in corpus:
            exporter.observe(event, instance="relayed.log")
        assert exporter.force_flush()
    receiver.wait_for_records(len(corpus))
    assert_received(receiver, corpus, fed(corpus, "relayed.log"), "sglang-relayed")


def test_kvlog_follow_feeds_an_export_the_events_it_writes(receiver: Receiver, tmp_path: Path) -> None:
    log = tmp_path / "gen2.log"
    log.write_bytes((CORPUS / "gen2_2025.log").read_bytes())
    expected = [{**event, "migrated": {**event["migrated"], "file": str(log)}} for event in migrated("gen2_2025.log")]
    stop = threading.Event()
    with export(receiver.url, export_interval_s=3600) as exporter:
        run = threading.Thread(
            target=follow,
            args=([str(log)],),
            kwargs={"exports": [exporter], "stop": stop, "stdout": io.BytesIO(), "hold_s": 0.5},
        )
        run.start()
        try:
            with receiver.arrived:  # the batch goes out on its own schedule; no clock decides the test
                receiver.arrived.wait_for(lambda: len(receiver.records()) >= len(expected), timeout=60)
        finally:
            stop.set()
            run.join()
    receiver.wait_for_records(len(expected))
    assert_received(receiver, expected, fed(expected, str(log)), "kvlog")


def test_a_restarted_follow_sends_the_collector_each_event_once(
    collector: str, receiver: Receiver, tmp_path: Path
) -> None:
    """``--otlp-endpoint`` with ``--state`` and ``--new-only``: history rebuilds the gauges; no record leaves twice.

    The log's lines before the first start are never sent; the restart reads the whole log again (for
    the context and the gauges) and sends only the lines written after the state. A last record sent
    through the same collector afterwards tells when everything before it has been relayed.
    """
    log, out, state = tmp_path / "server.log", tmp_path / "events.jsonl", tmp_path / "state.json"
    log.write_text(corpus_text("gen2_2025.log"))
    history = len(events_of_log(log))
    for appended in ("gen3_dtype_2026.log", "hybrid_swa_2026.log"):
        with following(log, out, state=state, new_only=True, otlp_endpoint=collector, hold_s=0.5) as run:
            wait_for(lambda: bool((load_state(state) or FollowState()).files), what="the first pass")
            append(log, corpus_text(appended))
            run.wait_events(len(events_of_log(log)) - history)
    with export(collector, export_interval_s=3600) as last:
        last.observe(migrated("gen1_early_2025.log")[0], instance="last")
    with receiver.arrived:
        assert receiver.arrived.wait_for(lambda: any(map(is_last, receiver.records())), timeout=60)
    sent = [
        attributes_of(record.attributes) for resource, record in receiver.records() if not is_last((resource, record))
    ]
    written = [json.loads(line)["migrated"] for line in lines_of(out)]
    assert len(written) == len(events_of_log(log)) - history > 0
    assert sorted((record["kvlog.migrated.file"], record["kvlog.migrated.line"]) for record in sent) == sorted(
        (event["file"], event["line"]) for event in written
    )


def is_last(received: tuple[dict[str, Any], Any]) -> bool:
    return bool(attributes_of(received[1].attributes)["kvlog.server_instance"] == "last")
