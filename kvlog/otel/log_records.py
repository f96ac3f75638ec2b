"""An event as an OpenTelemetry log record, shaped as the semantic conventions shape events.

The conventions say an event is a log record whose ``EventName`` field names it, whose details are
attributes, and which has no body and a severity number (the ``event.name`` attribute is deprecated
for that field); so the event's name goes to ``EventName``, its time and level to the record's own
timestamp and severity, and every other field to an attribute named ``kvlog.<path>``, dotted through
nested objects (``kvlog.ranks.tp``, ``kvlog.migrated.inferred.timestamp.rule``). The prefix keeps
kvlog's fields apart from the conventions' names, as they ask of an application's own attributes.

Backends index flat attributes of scalar type best, and OTLP's integers are int64, so the values are
made to fit rather than sent as nested maps: integers stay integers (byte counts most of all) unless
beyond int64, where the exact figure is kept as a string; a list of scalars of one type is an array;
any other list (of objects, or mixed) is its JSON text; a null field is left out, which is how an
attribute says "not known". Nothing here raises on a value a JSON event can hold: an exporter that
drops an event because one field is odd would hide the event, which is worse than a string.
"""

from __future__ import annotations

import calendar
import json
import re
import time
from collections.abc import Iterator, Mapping
from typing import Any, Final

import orjson
from opentelemetry._logs import LogRecord, SeverityNumber
from opentelemetry.util.types import AttributeValue

#: the namespace of every attribute made from an event's field
PREFIX: Final = "kvlog."
#: the log source a record came from (``observe``'s ``instance``), named as the series' label
INSTANCE_ATTRIBUTE: Final = "kvlog.server_instance"
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
#: kvlog's levels as the log data model's severity numbers (its ranges: DEBUG 5-8, INFO 9-12, ...)
SEVERITIES: Final[Mapping[str, SeverityNumber]] = {
    "debug": SeverityNumber.DEBUG,
    "info": SeverityNumber.INFO,
    "warning": SeverityNumber.WARN,
    "error": SeverityNumber.ERROR,
    "critical": SeverityNumber.FATAL,
}
#: fields the record carries in fields of its own, not as attributes
_IN_RECORD: Final = frozenset({"event", "timestamp", "level"})
#: the envelope's timestamp (schemas/_common.json): RFC 3339 in UTC, up to nanoseconds
_TIMESTAMP = re.compile(
    r"(?P<date>[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2})(?:\.(?P<fraction>[0-9]{1,9}))?(?:Z|\+00:00)"
)


def log_record(event: Mapping[str, Any], *, instance: str | None = None) -> LogRecord:
    """The log record of ``event`` (a dict as kvlog writes it), from the log source ``instance`` if given.

    The observed time is now: when kvlog saw the event, which for a migrated old log is long after it
    happened. A timestamp that is missing or not RFC 3339 UTC leaves the record's unset, which the
    data model says to read as the observed time.
    """
    level = event.get("level")
    name = event.get("event")
    attributes = dict(attributes_of(event))
    if instance is not None:
        attributes[INSTANCE_ATTRIBUTE] = instance
    return LogRecord(
        timestamp=timestamp_ns(event.get("timestamp")),
        severity_number=SEVERITIES.get(level, SeverityNumber.UNSPECIFIED) if isinstance(level, str) else None,
        severity_text=level if isinstance(level, str) else None,
        event_name=name if isinstance(name, str) else None,
        attributes=attributes,
    )


def timestamp_ns(timestamp: object) -> int | None:
    """Nanoseconds since the epoch of an RFC 3339 UTC timestamp, exactly (no float between); None for anything else."""
    if not isinstance(timestamp, str) or (match := _TIMESTAMP.fullmatch(timestamp)) is None:
        return None
    try:  # a date that does not exist (February 30) matches the pattern: strptime says no
        seconds = calendar.timegm(time.strptime(match["date"], "%Y-%m-%dT%H:%M:%S"))
    except ValueError:
        return None
    return seconds * 1_000_000_000 + int((match["fraction"] or "").ljust(9, "0"))


def attributes_of(event: Mapping[str, Any]) -> Iterator[tuple[str, AttributeValue]]:
    """The event's fields, but those the record holds itself, as attributes (see the module's docstring)."""
    for key, value in event.items():
        if key not in _IN_RECORD:
            yield from _flattened(f"{PREFIX}{key}", value)


def _flattened(key: str, value: object) -> Iterator[tuple[str, AttributeValue]]:
    if value is None:
        return
    if isinstance(value, Mapping):
        for name, item in value.items():
            yield from _flattened(f"{key}.{name}", item)
    elif isinstance(value, list | tuple):
        yield key, _array(value)
    elif isinstance(value, bool | int | float | str):
        yield key, _scalar(value)
    else:
        yield from _flattened(key, _as_written(value))


def _scalar(value: bool | int | float | str) -> AttributeValue:
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return int(value) if _INT64_MIN <= value <= _INT64_MAX else str(int(value))
    if isinstance(value, float):
        return float(value)  # kvlog.io.jsonline's ExactFloat, which keeps its text, is a float subclass
    return str(value)


def _array(values: list[Any] | tuple[Any, ...]) -> AttributeValue:
    """A homogeneous array where OTLP has one (all strings, all booleans, all int64s, all floats), else JSON text."""
    kinds = {_kind(item) for item in values}
    if len(kinds) <= 1 and None not in kinds:
        return tuple(_scalar(item) for item in values)
    return _json(values)


def _kind(value: object) -> type | None:
    if isinstance(value, bool):
        return bool
    if isinstance(value, int):
        return int if _INT64_MIN <= value <= _INT64_MAX else None
    for kind in (float, str):
        if isinstance(value, kind):
            return kind
    return None


def _json(value: object) -> str:
    """JSON text of any JSON value, integers of any size written exactly (orjson refuses those beyond 64 bits)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=_as_written)


def _as_written(value: object) -> Any:
    """A value JSON has no type for as kvlog's line holds it: orjson's form, else its ``str()``.

    Taps (``OtelExport.tap``) see the event before it is written, with the values the writer
    turns into JSON itself: a datetime becomes its RFC 3339 text, a UUID its text, an enum its
    value, a dataclass an object. The record says what the line says, not ``str()`` of the
    object (a datetime's text with a space, an enum's ``Mode.EAGER``) nor that text quoted again.
    """
    try:
        return orjson.loads(orjson.dumps(value, default=str))
    except TypeError:  # orjson.JSONEncodeError: an integer beyond 64 bits inside (the writer refuses those too)
        return str(value)
