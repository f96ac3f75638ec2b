"""One OpenTelemetry export: events as log records, memory series as metrics, through the SDK's own pipeline.

kvlog writes no protocol code: records go through the SDK's ``LoggerProvider`` and a
``BatchLogRecordProcessor``, metrics through a ``MeterProvider`` whose reader collects the observable
instruments of ``kvlog.otel.instruments``. ``export()`` wires both to the OTLP/HTTP exporters; an
``OtelExport`` takes any SDK exporter and reader (the console or in-memory ones, in a test or a demo).

An export is an observer of ``kvlog follow`` as a ``MemorySeries`` is (``observe``, ``count_unparsed``,
``count_violations``). Who feeds the series decides whether the export does: an export made without
one owns its own and feeds it from those calls and from the emission tap; a series passed in is the
caller's to feed (``kvlog follow`` feeds one series for its Prometheus endpoint and its OTLP export
alike), and the export only reads it, so nothing is counted twice.
"""

from __future__ import annotations

import atexit
import threading
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any, Self
from urllib.parse import urlsplit

from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor, LogRecordExporter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader
from opentelemetry.util.types import AttributeValue

from kvlog import __version__, emission
from kvlog.errors import OptionError
from kvlog.metrics.series import MemorySeries, this_process
from kvlog.otel import instruments
from kvlog.otel.log_records import log_record
from kvlog.otel.resource import resource

#: the instrumentation scope of kvlog's records and instruments
SCOPE = "kvlog"


class OtelExport:
    """Exports events handed to ``observe`` (and, once tapped, every event kvlog emits) and the memory series.

    Use it as a context manager, or call ``close()``: that flushes what is batched and shuts the
    providers down. The SDK's environment variables (``OTEL_BLRP_*``, ``OTEL_ATTRIBUTE_COUNT_LIMIT``,
    ``OTEL_EXPORTER_OTLP_HEADERS``, ...) apply as usual.
    """

    def __init__(
        self,
        log_exporter: LogRecordExporter,
        metric_reader: MetricReader,
        *,
        service_name: str | None = None,
        resource_attributes: Mapping[str, AttributeValue] | None = None,
        series: MemorySeries | None = None,
    ) -> None:
        self.resource = resource(service_name, resource_attributes)
        self.series = series if series is not None else MemorySeries()
        self._feeds_series = series is None
        # The SDK's own exit handlers would flush without a bound (the process then waits out a collector
        # that is down, ~40 s); the export's handler is its bounded close().
        self._loggers = LoggerProvider(resource=self.resource, shutdown_on_exit=False)
        self._loggers.add_log_record_processor(BatchLogRecordProcessor(log_exporter))
        self._logger = self._loggers.get_logger(SCOPE, __version__)
        self._meters = MeterProvider(metric_readers=[metric_reader], resource=self.resource, shutdown_on_exit=False)
        instruments.register(self._meters.get_meter(SCOPE, __version__), self.series)
        self._tap: Callable[[dict[str, Any]], None] | None = None
        self._closed = False
        self._dropped = 0
        self._dropped_lock = threading.Lock()
        atexit.register(self.close)

    def observe(self, event: Mapping[str, Any], *, instance: str) -> None:
        """Export one event (a dict as kvlog writes it) from the log source ``instance`` (``kvlog follow``: its path).

        ``instance`` is the record's ``kvlog.server_instance`` attribute and the series'
        ``server_instance`` label. The series is fed too if the export owns it (see the module's docstring).
        """
        self._logger.emit(log_record(event, instance=instance))
        if self._feeds_series:
            self.series.observe(event, instance=instance)

    def count_unparsed(self, lines: int, *, instance: str) -> None:
        """Count log lines of ``instance`` that gave no event, in the series if the export owns it."""
        if self._feeds_series:
            self.series.count_unparsed(lines, instance=instance)

    def count_violations(self, count: int, *, instance: str) -> None:
        """Count events of ``instance`` that failed validation, in the series if the export owns it."""
        if self._feeds_series:
            self.series.count_violations(count, instance=instance)

    def tap(self, *, instance: str | None = None) -> Self:
        """Export every event kvlog emits from now on, until ``close()``; ``instance`` defaults to ``host:pid``.

        The tap sees what is written (``kvlog.emission.add_tap``): a violation report in place of an
        invalid event. An export has one tap: tapping again is an error.
        """
        if self._tap is not None:
            raise OptionError("this export already exports emitted events: it has one tap")
        source = instance if instance is not None else this_process()

        def export_emitted(event: dict[str, Any]) -> None:
            try:
                self.observe(event, instance=source)
            except Exception:  # noqa: BLE001 - a tap that raises would lose the event from the log itself
                with self._dropped_lock:  # emitting threads tap at once
                    self._dropped += 1

        self._tap = export_emitted
        emission.add_tap(export_emitted)
        return self

    @property
    def dropped(self) -> int:
        """Emitted events the tap could not export: counted, never raised into the code that emitted them."""
        return self._dropped

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Send what is batched now: the pending records, and the series as they are; False if that timed out."""
        logs = self._loggers.force_flush(timeout_millis)
        return self._meters.force_flush(timeout_millis) and logs

    def close(self, timeout_s: float = 5.0) -> bool:
        """Stop the tap, flush, and shut the providers down (their exporters with them), within ``timeout_s``.

        Returns False when that did not finish in time: what was still batched is then given up on. The
        SDK alone waits for an unreachable collector up to 30 s for the records and 30 s more for the
        metrics, retrying, and ``kvlog follow`` closes its export when told to stop; so the shutdown
        runs in a daemon thread that is waited for only ``timeout_s``. Closing twice does nothing.
        """
        if self._closed:
            return True
        self._closed = True
        atexit.unregister(self.close)
        if self._tap is not None:
            emission.remove_tap(self._tap)
        closing = threading.Thread(target=self._shut_down, name="kvlog-otel-close", daemon=True)
        closing.start()
        closing.join(timeout_s)
        return not closing.is_alive()

    def _shut_down(self) -> None:
        try:
            self._loggers.shutdown()  # flushes the batch first
            self._meters.shutdown()  # collects and exports once more first
        except Exception:  # noqa: BLE001 - a reader that failed to shut down has nothing left to export; no traceback
            return

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, _type: type[BaseException] | None, _value: BaseException | None, _traceback: TracebackType | None
    ) -> None:
        self.close()


def export(
    endpoint: str | None = None,
    *,
    service_name: str | None = None,
    resource_attributes: Mapping[str, AttributeValue] | None = None,
    series: MemorySeries | None = None,
    export_interval_s: float = 10.0,
) -> OtelExport:
    """An export over OTLP/HTTP (protobuf) to ``endpoint``, a collector's base URL such as ``http://127.0.0.1:4318``.

    Records go to ``<endpoint>/v1/logs``, metrics to ``<endpoint>/v1/metrics``, every
    ``export_interval_s`` seconds. Without ``endpoint`` the SDK's variables say where
    (``OTEL_EXPORTER_OTLP_ENDPOINT``, or per signal ``OTEL_EXPORTER_OTLP_LOGS_ENDPOINT`` and
    ``OTEL_EXPORTER_OTLP_METRICS_ENDPOINT``), else ``http://localhost:4318``. ``service_name`` defaults
    to ``OTEL_SERVICE_NAME``, else ``kvlog``.
    """
    if endpoint is not None:
        parts = urlsplit(endpoint)
        if parts.scheme not in {"http", "https"} or not parts.hostname:
            raise OptionError("{endpoint} {given}: expected an http:// or https:// URL", given=repr(endpoint))
    if not export_interval_s > 0:
        raise OptionError("{export_interval_s} {given}: expected a number of seconds above 0", given=export_interval_s)
    base = endpoint.rstrip("/") if endpoint is not None else None
    logs = OTLPLogExporter(endpoint=f"{base}/v1/logs" if base else None)
    metrics = OTLPMetricExporter(endpoint=f"{base}/v1/metrics" if base else None)
    reader = PeriodicExportingMetricReader(metrics, export_interval_millis=export_interval_s * 1000)
    return OtelExport(logs, reader, service_name=service_name, resource_attributes=resource_attributes, series=series)
