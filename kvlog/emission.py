"""Emitting events: one structlog pipeline, configured once, that validates what it logs.

The chain is: context (ranks) -> level -> envelope (timestamp, pid, version) -> validation ->
taps (test capture) -> renderer. Validation sits before the renderer so that what reaches a file,
a terminal or a stdlib handler has already been checked; in production (``warn``) an invalid
event is replaced by a ``kvlog.schema_violation`` report instead of raising into the caller,
because a log line must never take an inference server down.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import IO, Any, BinaryIO, Literal, cast

import orjson
import structlog
from structlog.typing import EventDict, Processor, WrappedLogger

from kvlog.catalog import Catalog
from kvlog.console import console_renderer
from kvlog.errors import SchemaViolationError
from kvlog.event_base import Event
from kvlog.validation import EventValidator, Violation

ValidationMode = Literal["off", "warn", "drop", "raise"]
Output = Literal["json", "console"]
Level = Literal["debug", "info", "warning", "error", "critical"]

VIOLATION_EVENT = "kvlog.schema_violation"
_MAX_REPORTS_PER_SECOND = 10

_timestamper = structlog.processors.TimeStamper(fmt="iso", utc=True)
_taps: list[Callable[[dict[str, Any]], None]] = []


def _envelope(_logger: WrappedLogger, _method: str, event_dict: EventDict) -> EventDict:
    """Add the envelope fields an event needs and the caller should not have to pass."""
    if "schema_version" not in event_dict:
        version = _state.latest_versions.get(event_dict.get("event"))
        if version is not None:
            event_dict["schema_version"] = version
    event_dict.setdefault("pid", os.getpid())
    return _timestamper(_logger, _method, event_dict)


class _ReportLimiter:
    """Lets through at most a few violation reports a second and counts the rest."""

    def __init__(self, per_second: int) -> None:
        self.per_second = per_second
        self.window = 0
        self.sent = 0
        self.suppressed = 0
        self.lock = threading.Lock()

    def admit(self) -> int | None:
        """The number suppressed since the last report if this one may go out, else None."""
        with self.lock:
            now = int(time.monotonic())
            if now != self.window:
                self.window, self.sent = now, 0
            if self.sent >= self.per_second:
                self.suppressed += 1
                return None
            self.sent += 1
            suppressed, self.suppressed = self.suppressed, 0
            return suppressed


class ValidationProcessor:
    """The structlog processor that enforces the catalog in one of four modes."""

    def __init__(self, mode: ValidationMode, validator: EventValidator) -> None:
        self.mode = mode
        self.validator = validator
        self.limiter = _ReportLimiter(_MAX_REPORTS_PER_SECOND)

    def __call__(self, _logger: WrappedLogger, _method: str, event_dict: EventDict) -> EventDict:
        if self.mode == "off":
            return event_dict
        try:
            if self.validator.is_valid(event_dict):
                return event_dict
            violations = self.validator.violations(event_dict)
        except Exception as exc:  # noqa: BLE001 - a value the validators cannot even read is a violation too
            violations = [Violation("$", f"cannot be validated: {type(exc).__name__}: {exc}")]
        if not violations:
            return event_dict
        if self.mode == "raise":
            errors = [(v.path, v.message) for v in violations]
            raise SchemaViolationError(event_dict.get("event"), event_dict.get("schema_version"), errors)
        suppressed = self.limiter.admit() if self.mode == "warn" else None
        if suppressed is None:
            raise structlog.DropEvent
        return self._report(event_dict, violations, suppressed)

    def _report(self, event_dict: EventDict, violations: list[Violation], suppressed: int) -> EventDict:
        name, version = event_dict.get("event"), event_dict.get("schema_version")
        report: EventDict = {
            "event": VIOLATION_EVENT,
            "schema_version": _state.latest_versions[VIOLATION_EVENT],
            "timestamp": event_dict.get("timestamp"),
            "level": "warning",
            "pid": event_dict.get("pid"),
            "violating_event": name if isinstance(name, str) else None,
            "violating_schema_version": version if type(version) is int else None,
            "errors": [{"path": v.path, "message": v.message} for v in violations],
        }
        if isinstance(event_dict.get("ranks"), dict):
            report["ranks"] = event_dict["ranks"]
        if suppressed:
            report["suppressed"] = suppressed
        return report


def _tap(_logger: WrappedLogger, _method: str, event_dict: EventDict) -> EventDict:
    for tap in _taps:
        tap(dict(event_dict))
    return event_dict


def _json_renderer(_logger: WrappedLogger, _method: str, event_dict: EventDict) -> bytes:
    """orjson, with the event's name first so that people reading raw JSON lines see it first."""
    return orjson.dumps({"event": event_dict.pop("event", None), **event_dict})


class _State:
    """What ``configure`` decided; read by the processors on every event."""

    def __init__(self) -> None:
        self.latest_versions: dict[object, int] = {}
        self.configured = False


_state = _State()


def _renderer(output: Output) -> Processor:
    return _json_renderer if output == "json" else console_renderer


def configure(
    *,
    output: Output = "json",
    validation: ValidationMode = "warn",
    stream: IO[str] | IO[bytes] | None = None,
    stdlib: bool = False,
    level: Level = "debug",
    catalog: Catalog | None = None,
) -> None:
    """Set up structlog for kvlog events, once per process.

    ``output`` picks JSON lines (for machines) or sglang-style lines (for people); ``validation``
    picks what happens to an invalid event: ``raise`` in tests, ``warn`` (default) in production.
    With ``stdlib=True`` events go to the ``logging`` logger ``"kvlog"`` instead of ``stream``; give
    its handlers ``kvlog.formatter(...)`` so each line is rendered once with one timestamp.
    """
    validator = EventValidator(catalog)
    _state.latest_versions = {name: validator.catalog.latest(name) for name in validator.catalog.events()}
    chain: list[Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        _envelope,
        ValidationProcessor(validation, validator),
        _tap,
    ]
    threshold = logging.getLevelNamesMapping()[level.upper()]
    if stdlib:
        chain.append(structlog.stdlib.ProcessorFormatter.wrap_for_formatter)
        factory: Any = structlog.stdlib.LoggerFactory()
        wrapper: Any = structlog.stdlib.BoundLogger
        logging.getLogger("kvlog").setLevel(threshold)
    else:
        chain.append(_renderer(output))
        target = stream if stream is not None else sys.stderr
        factory = _bytes_factory(target) if output == "json" else structlog.PrintLoggerFactory(target)  # type: ignore[arg-type]
        wrapper = structlog.make_filtering_bound_logger(threshold)
    structlog.configure(
        processors=chain, wrapper_class=wrapper, logger_factory=factory, cache_logger_on_first_use=False
    )
    _state.configured = True


def _bytes_factory(stream: IO[Any]) -> structlog.BytesLoggerFactory:
    binary = cast(BinaryIO, getattr(stream, "buffer", stream))
    return structlog.BytesLoggerFactory(binary)


def formatter(output: Output = "json") -> logging.Formatter:
    """A ``logging.Formatter`` for stdlib handlers: renders kvlog events and foreign records alike."""
    return structlog.stdlib.ProcessorFormatter(
        processor=_renderer(output),
        foreign_pre_chain=[structlog.stdlib.add_log_level, _timestamper],
    )


def get_logger(**initial: Any) -> Any:
    """The structlog logger kvlog events go through (configured with defaults on first use)."""
    if not _state.configured:
        configure()
    return structlog.get_logger("kvlog", **initial)


def emit(event: Event, level: Level = "info") -> None:
    """Log a typed catalog event at ``level``."""
    getattr(get_logger(), level)(event.EVENT, schema_version=event.VERSION, **event.fields())


def bind_ranks(**ranks: int) -> None:
    """Tag every event this context emits with its parallelism ranks, e.g. ``bind_ranks(tp=0, dp=1)``."""
    structlog.contextvars.bind_contextvars(ranks={tag.lower(): rank for tag, rank in ranks.items()})


def add_tap(tap: Callable[[dict[str, Any]], None]) -> None:
    """Call ``tap`` with a copy of every event after validation, before rendering."""
    _taps.append(tap)


def remove_tap(tap: Callable[[dict[str, Any]], None]) -> None:
    """Stop calling ``tap``."""
    _taps.remove(tap)


__all__ = ["bind_ranks", "configure", "emit", "formatter", "get_logger"]
