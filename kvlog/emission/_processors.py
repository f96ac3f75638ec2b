"""The processors of the chain: envelope, validation, and the finisher that renders and feeds the taps.

Validation sits before the renderer so that what reaches a file, a terminal or a stdlib handler has
already been checked; in production (``warn``) an invalid event is replaced by a
``kvlog.schema_violation`` report instead of raising into the caller. The processors transform an
event dict and know nothing of where its line goes (``_output``, ``_stdlib``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any, Literal

import structlog
from structlog.typing import EventDict, Processor, WrappedLogger

from kvlog.emission._context import bound_ranks
from kvlog.emission._forks import Locked, current_pid
from kvlog.emission._levels import ALIASES
from kvlog.emission._taps import taps
from kvlog.envelope import envelope, ordered, utc_timestamp
from kvlog.errors import SchemaViolationError
from kvlog.schema.catalog import catalog_version
from kvlog.schema.event_validator import EventValidator, Violation

ValidationMode = Literal["off", "warn", "drop", "raise"]

VIOLATION_EVENT = "kvlog.schema_violation"
_MAX_REPORTS_PER_SECOND = 10


def typed_envelope(_logger: WrappedLogger, level: str, event_dict: EventDict) -> EventDict:
    """The envelope of an ``emit()``ed event, put in front of its fields in one new dict.

    ``emit`` passes what the typed event's ``to_dict()`` built (name, version, its fields, ``ext``
    last) and a level name: nothing to look up, nothing a caller could have put in the envelope's
    place. Building the dict once in the written order is the cheapest way to that order: the
    server's hot path never sorts keys.
    """
    stamp = utc_timestamp(time.time())
    head = envelope(event_dict["event"], event_dict["schema_version"], stamp, level, current_pid[0], bound_ranks.get())
    head.update(event_dict)  # the name and version keep their places in the head
    return head


class CallerEnvelope:
    """The envelope of an event logged through ``get_logger()``, whose caller wrote its keys.

    structlog puts the name last and keeps the caller's order, which may include ``ext`` anywhere
    or an envelope field of the caller's own: the event is put in the written order by
    ``kvlog.envelope.ordered``, and what kvlog stamps (time, level, pid, bound ranks) wins over
    the caller's value. The version, when the caller gave none, is the event's latest.
    """

    def __init__(self, latest_versions: Mapping[str, int]) -> None:
        self.latest_versions = latest_versions

    def __call__(self, _logger: WrappedLogger, method: str, event_dict: EventDict) -> EventDict:
        name = event_dict.get("event")
        if "schema_version" in event_dict:
            version = event_dict["schema_version"]
        else:  # a name that is not a string (a caller's list) has no version: validation reports it
            version = self.latest_versions.get(name) if isinstance(name, str) else None
        level = ALIASES.get(method, method)
        head = envelope(name, version, utc_timestamp(time.time()), level, current_pid[0], bound_ranks.get())
        return ordered({**event_dict, **head})


class _ReportLimiter(Locked):
    """Lets through at most a few violation reports a second and counts the rest."""

    def __init__(self, per_second: int) -> None:
        super().__init__()
        self.per_second = per_second
        self.window = 0
        self.sent = 0
        self.suppressed = 0

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
        self.report_version = validator.catalog.latest(VIOLATION_EVENT)
        self.limiter = _ReportLimiter(_MAX_REPORTS_PER_SECOND)
        self._checks: dict[tuple[object, object], Callable[[object], bool]] = {}

    def __call__(self, _logger: WrappedLogger, _method: str, event_dict: EventDict) -> EventDict:
        if self.mode == "off":
            return event_dict
        try:
            key = (event_dict["event"], event_dict.get("schema_version"))
            check = self._checks.get(key)
            if check is None:
                check = self._checks[key] = self.validator.fast_check(*key)
            if check(event_dict):
                return event_dict
            violations = self.validator.violations(event_dict)
        except Exception as exc:  # noqa: BLE001 - a value the validators cannot even read is a violation too
            violations = [Violation("$", f"cannot be validated: {type(exc).__name__}: {exc}")]
        return self.reject(event_dict, violations or [Violation("$", "rejected by the compiled validator")])

    def reject(self, event_dict: EventDict, violations: list[Violation]) -> EventDict:
        """What the mode says to do with an invalid event: raise, drop it, or return its report."""
        if self.mode == "raise":
            errors = [(v.path, v.message) for v in violations]
            raise SchemaViolationError(event_dict.get("event"), event_dict.get("schema_version"), errors)
        suppressed = self.limiter.admit() if self.mode != "drop" else None
        if suppressed is None:
            raise structlog.DropEvent
        return self._report(event_dict, violations, suppressed)

    def _report(self, event_dict: EventDict, violations: list[Violation], suppressed: int) -> EventDict:
        name, version = event_dict.get("event"), event_dict.get("schema_version")
        fields = {
            "violating_event": name if isinstance(name, str) else None,
            "violating_schema_version": catalog_version(version),
            "errors": [{"path": v.path, "message": v.message} for v in violations],
        }
        timestamp, pid, ranks = event_dict["timestamp"], event_dict.get("pid"), event_dict.get("ranks")
        report: EventDict = envelope(VIOLATION_EVENT, self.report_version, timestamp, "warning", pid=pid) | fields
        if isinstance(ranks, dict) and ranks:
            with_ranks = (
                envelope(VIOLATION_EVENT, self.report_version, timestamp, "warning", pid=pid, ranks=ranks) | fields
            )
            if self.validator.is_valid(with_ranks):  # ranks the caller got wrong must not sink the report
                report = with_ranks
        if suppressed:
            report["suppressed"] = suppressed
        return report


class Finisher:
    """The last step: render the event, turning a value that cannot be written into a violation report.

    The compiled validator accepts a few values the JSON writer rejects (integers beyond 64 bits,
    non-string keys under ``ext``); trying the real rendering and falling back only on failure costs
    nothing on the normal path. Taps are called here, with what is actually written.

    For stdlib handlers (``for_handlers``) the rendering is the JSON text ``formatter("json")``
    writes, handed on with the event: the handlers' formatter writes it as it is instead of
    serialising the event a second time, and renders the console wording from the event.
    """

    def __init__(self, validation: ValidationProcessor, render: Processor, *, for_handlers: bool = False) -> None:
        self.validation = validation
        self.render = render
        self.for_handlers = for_handlers

    def __call__(self, logger: WrappedLogger, method: str, event_dict: EventDict) -> Any:
        render = self.render
        try:
            line = render(logger, method, event_dict)
        except Exception as exc:  # noqa: BLE001 - an unwritable value must not raise into the caller
            violation = Violation("$", f"cannot be written: {type(exc).__name__}: {exc}")
            event_dict = self.validation.reject(event_dict, [violation])
            line = render(logger, method, event_dict)  # not even the report renders: a lost event (Guarded)
        for tap in taps:
            tap(dict(event_dict))
        if self.for_handlers:
            return (event_dict, line), {}  # structlog's bound logger calls the writer with these arguments
        return line
