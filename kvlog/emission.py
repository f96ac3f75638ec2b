"""Emitting events: one structlog pipeline, configured once, that validates what it logs.

The chain is: envelope (version, timestamp, level, pid, ranks, in ``kvlog.envelope``'s order, which
migrated events have too) -> validation -> renderer, which also feeds the taps (test capture) with
exactly what it wrote. Validation sits before the renderer so that what reaches a file, a terminal
or a stdlib handler has already been checked; in production (``warn``) an invalid event is replaced
by a ``kvlog.schema_violation`` report instead of raising into the caller, because a log line must
never take an inference server down.

kvlog builds its own structlog logger rather than reconfiguring structlog globally, so an
application that uses structlog for its own logs keeps its configuration. ``get_logger()`` returns
that logger; ``emit()`` drives the same processor chain itself (all but the first step, which adds
the envelope to a typed event more cheaply), without structlog's per-call context copying, which
keeps an emitted, validated event cheaper than the f-string line it replaces (see BENCHMARKS.md).
Ranks live in one context variable rather than structlog's contextvars, so reading them costs one
lookup and no other context can leak fields into a schema-checked event.

Outside ``raise`` mode nothing in the write path raises into the caller: whatever a stream, a stdlib
handler, a renderer or one of kvlog's processors raises loses that one event, is said once on stderr
and counted (``lost_events()``). A forked child gets fresh locks, as stdlib ``logging`` does, so a
fork while another thread was writing cannot leave the child's ``emit()`` waiting forever.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import sys
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import cached_property
from typing import IO, Any, Literal, ParamSpec

import orjson
import structlog
from structlog.typing import EventDict, Processor, WrappedLogger

from kvlog.envelope import envelope, ordered, utc_timestamp
from kvlog.errors import SchemaViolationError
from kvlog.event_base import Event
from kvlog.schema.catalog import Catalog, catalog_version
from kvlog.schema.event_validator import EventValidator, Violation
from kvlog.text.console import console_line, console_renderer

ValidationMode = Literal["off", "warn", "drop", "raise"]
Output = Literal["json", "console"]
LogLevel = Literal["debug", "info", "warning", "error", "critical"]

VIOLATION_EVENT = "kvlog.schema_violation"
LEVELS: tuple[LogLevel, ...] = ("debug", "info", "warning", "error", "critical")
_MAX_REPORTS_PER_SECOND = 10
#: structlog method names that are not level names
_LEVEL_ALIASES = {"warn": "warning", "exception": "error", "fatal": "critical", "failure": "error", "err": "error"}

_P = ParamSpec("_P")
_taps: list[Callable[[dict[str, Any]], None]] = []
_ranks: ContextVar[dict[str, int] | None] = ContextVar("kvlog_ranks", default=None)


_pid = [os.getpid()]


class _Locked:
    """Something that holds a lock on the emission path and takes a new one in a forked child.

    A lock another thread held at the moment of ``fork()`` stays held forever in the child, where
    that thread does not exist.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        _locked.add(self)

    def after_fork(self) -> None:
        """Start the child with the lock free."""
        self.lock = threading.Lock()


_locked: weakref.WeakSet[_Locked] = weakref.WeakSet()


def _reinit_after_fork() -> None:
    """In a forked child: the child's pid, and every lock of the emission path free again.

    ``cached_property`` (Python < 3.12) computes under a lock of its own, shared by every validator.
    """
    _pid[0] = os.getpid()
    for owner in list(_locked):
        owner.after_fork()
    for attribute in vars(EventValidator).values():
        if isinstance(attribute, cached_property) and hasattr(attribute, "lock"):
            attribute.lock = threading.RLock()


os.register_at_fork(after_in_child=_reinit_after_fork)


def _typed_envelope(_logger: WrappedLogger, level: str, event_dict: EventDict) -> EventDict:
    """The envelope of an ``emit()``ed event, put in front of its fields in one new dict.

    ``emit`` passes what the typed event's ``to_dict()`` built (name, version, its fields, ``ext``
    last) and a level name: nothing to look up, nothing a caller could have put in the envelope's
    place. Building the dict once in the written order is the cheapest way to that order: the
    server's hot path never sorts keys.
    """
    stamp = utc_timestamp(time.time())
    head = envelope(event_dict["event"], event_dict["schema_version"], stamp, level, _pid[0], _ranks.get())
    head.update(event_dict)  # the name and version keep their places in the head
    return head


class _CallerEnvelope:
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
        level = _LEVEL_ALIASES.get(method, method)
        head = envelope(name, version, utc_timestamp(time.time()), level, _pid[0], _ranks.get())
        return ordered({**event_dict, **head})


def _foreign_envelope(_logger: WrappedLogger, method: str, event_dict: EventDict) -> EventDict:
    """Level and timestamp for a plain stdlib record, stamped with the time the record was made."""
    record = event_dict.get("_record")
    stamp = utc_timestamp(record.created if isinstance(record, logging.LogRecord) else time.time())
    head = envelope(event_dict.get("event"), None, stamp, _LEVEL_ALIASES.get(method, method))
    head.update(event_dict)
    return head


class _ReportLimiter(_Locked):
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


class _Finisher:
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
            line = render(logger, method, event_dict)  # not even the report renders: a lost event (_Guarded)
        for tap in _taps:
            tap(dict(event_dict))
        if self.for_handlers:
            return (event_dict, line), {}  # structlog's bound logger calls the writer with these arguments
        return line


def _json_line(_logger: WrappedLogger, _method: str, event_dict: EventDict) -> bytes:
    """One JSON line, newline included (orjson appends it without a copy)."""
    return orjson.dumps(event_dict, option=orjson.OPT_APPEND_NEWLINE)


def _json_text(_logger: WrappedLogger, _method: str, event_dict: EventDict) -> str:
    """JSON for text targets (stdlib handlers, text streams), without the newline they add."""
    return orjson.dumps(event_dict).decode()


class _Losses(_Locked):
    """Events lost to a failure of the write path, and whether the current run of failures was said.

    The event is the server's diagnostics, not its work: outside ``raise`` mode a failure loses the
    event instead of raising into the code that emitted it. The first failure after a success is
    said once on the interpreter's own stderr; ``count`` is what was lost since ``configure``.
    """

    def __init__(self, *, strict: bool) -> None:
        super().__init__()
        self.strict = strict
        self.count = 0
        self.failing = False

    def attempt(self, write: Callable[_P, object], *args: _P.args, **kwargs: _P.kwargs) -> None:
        """Run one write of an event: a failure loses the event (raised instead when strict).

        The write's arguments are passed along rather than closed over: no function is made per event.
        """
        try:
            write(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - raised again when strict (failed)
            self.failed(exc)
        else:
            self.failing = False

    def failed(self, exc: Exception) -> None:
        """A failure of the write path: raised again when strict, else the event is lost (and counted)."""
        if self.strict:
            raise exc
        self.lose(exc)

    def lose(self, exc: Exception) -> None:
        """Count one lost event; say why on stderr if the previous event got through."""
        with self.lock:
            self.count += 1
            first, self.failing = not self.failing, True
        if first and sys.__stderr__ is not None:
            with contextlib.suppress(Exception):
                reason = f"{type(exc).__name__}: {exc}"
                print(f"kvlog: cannot write events ({reason}); dropping them until it can", file=sys.__stderr__)


class _Guarded:
    """The processor chain run as one step that, unless strict, turns any failure into a lost event.

    ``emit()`` and the structlog logger both run it, so every way into the pipeline has the same guard;
    a processor's ``DropEvent`` (a deliberate drop) is not a failure.
    """

    def __init__(self, processors: list[Processor], losses: _Losses) -> None:
        self.processors = processors
        self.losses = losses

    def __call__(self, logger: WrappedLogger, method: str, event_dict: Any) -> Any:
        try:
            for processor in self.processors:
                event_dict = processor(logger, method, event_dict)
        except Exception as exc:  # noqa: BLE001 - raised again when strict (_Losses.failed)
            self.losses.failed(exc)
            raise structlog.DropEvent from None
        return event_dict


class _LineWriter(_Locked):
    """The wrapped logger: writes each rendered line (bytes or str, newline included) and flushes it.

    A line that cannot be written (a full disk, a closed file or pipe, a stream that raises anything
    else) is lost and counted by ``losses``, unless strict.
    """

    def __init__(self, stream: IO[Any], owner: IO[Any], losses: _Losses) -> None:
        super().__init__()
        self.owner = owner  # held: a text wrapper that is garbage-collected closes the buffer we write to
        self.stream = stream
        self._write = stream.write
        self._flush = stream.flush
        self.losses = losses

    def after_fork(self) -> None:
        """Also write through a fresh buffer on the same file descriptor, if the stream is a file's.

        ``io``'s buffered streams have a lock of their own, which Python cannot re-create: held by a
        thread blocked in a write at the fork (a full pipe, a slow disk), it would stop the child's
        first line. The parent's unflushed bytes stay the parent's to write.
        """
        super().after_fork()
        fresh = _reopened(self.stream)
        if fresh is not None:
            self.stream, self._write, self._flush = fresh, fresh.write, fresh.flush

    @property
    def lost(self) -> int:
        """Events lost since ``configure``, in writing or before it."""
        return self.losses.count

    def msg(self, line: bytes | str) -> None:
        """Write and flush one line (``_Losses.attempt``, spelled out: this runs for every event written)."""
        with self.lock:
            try:
                self._write(line)
                self._flush()
            except Exception as exc:  # noqa: BLE001 - raised again when strict (_Losses.failed)
                self.losses.failed(exc)
            else:
                self.losses.failing = False

    debug = info = warning = error = critical = exception = msg


def _reopened(stream: IO[Any]) -> IO[Any] | None:
    """A new buffered stream, of the same kind, on ``stream``'s file descriptor; None if it has none."""
    if not isinstance(stream, io.BufferedWriter | io.BufferedRandom | io.TextIOWrapper):
        return None
    try:
        raw = io.FileIO(stream.fileno(), "w", closefd=False)
    except (OSError, ValueError):  # no descriptor (or closed): nothing of Python's to re-create
        return None
    if isinstance(stream, io.TextIOWrapper):
        return io.TextIOWrapper(io.BufferedWriter(raw), encoding=stream.encoding, errors=stream.errors)
    return io.BufferedWriter(raw)


#: the ``LogRecord`` attribute with the event a record carries and the JSON text kvlog wrote for it
_RENDERED = "_kvlog_rendered"


class _StdlibWriter:
    """The wrapped logger with ``stdlib=True``: hands each event to the ``logging`` logger "kvlog".

    The record is made and handled as ``Logger.info`` would, less the search of the call stack for
    the caller's file and line: that would name this module, never the caller, and costs more than
    rendering the event. Its message is the event (as ``structlog.stdlib.ProcessorFormatter`` wants
    it), and it carries the JSON text already rendered for ``formatter()``. A handler that raises
    (its ``emit`` or its formatter) loses the event, unless strict; handlers that catch their own
    errors report them through ``logging``'s ``handleError`` as usual.
    """

    def __init__(self, logger: logging.Logger, losses: _Losses) -> None:
        self.logger = logger
        self.losses = losses

    @property
    def lost(self) -> int:
        """Events lost since ``configure``, in a handler or before it."""
        return self.losses.count

    def _log(self, method: str, event_dict: EventDict, line: str) -> None:
        level = _LEVEL_NUMBERS[method]
        if self.logger.isEnabledFor(level):
            self.losses.attempt(self._handle, method, level, event_dict, line)

    def _handle(self, method: str, level: int, event_dict: EventDict, line: str) -> None:
        logger = self.logger
        fn, lno, func = "(unknown file)", 0, "(unknown function)"  # what Logger._log says without a caller
        record = logger.makeRecord(logger.name, level, fn, lno, event_dict, (), None, func)
        attributes = record.__dict__  # what makeRecord's ``extra`` would set, without its checks for clashes
        attributes["_logger"], attributes["_name"], attributes[_RENDERED] = self, method, (event_dict, line)
        logger.handle(record)

    def debug(self, event_dict: EventDict, line: str) -> None:
        self._log("debug", event_dict, line)

    def info(self, event_dict: EventDict, line: str) -> None:
        self._log("info", event_dict, line)

    def warning(self, event_dict: EventDict, line: str) -> None:
        self._log("warning", event_dict, line)

    def error(self, event_dict: EventDict, line: str) -> None:
        self._log("error", event_dict, line)

    def critical(self, event_dict: EventDict, line: str) -> None:
        self._log("critical", event_dict, line)

    exception = error
    msg = info


_LEVEL_NUMBERS: dict[str, int] = {name: logging.getLevelNamesMapping()[name.upper()] for name in LEVELS}


def _console_line(_logger: WrappedLogger, _method: str, event_dict: EventDict) -> str:
    return console_line(event_dict) + "\n"


def _target(stream: IO[str] | IO[bytes], output: Output) -> tuple[IO[Any], Processor]:
    """Where lines go and the renderer that writes them there: bytes if the stream takes bytes."""
    if output == "console":
        if isinstance(stream, io.RawIOBase | io.BufferedIOBase):
            return stream, lambda lg, m, ed: _console_line(lg, m, ed).encode()
        return stream, _console_line
    if isinstance(stream, io.TextIOBase):
        buffer = getattr(stream, "buffer", None)
        if buffer is None:
            return stream, lambda lg, m, ed: _json_text(lg, m, ed) + "\n"
        stream.flush()
        return buffer, _json_line
    return stream, _json_line


class _Emitter:
    """Runs a typed event through the processor chain and hands the result to the output.

    The chain structlog runs for ``get_logger()`` calls, after the envelope; driving it directly skips
    the bound logger's context copy and keyword re-packing, the largest cost left on the emission path.
    Its three steps (envelope, validation, rendering) are called one after the other, under the
    guard ``_Guarded`` puts around them (a failure raised when strict, else one lost event), rather
    than by ``_Guarded``'s loop: a server pays for each call on its hot path.
    """

    def __init__(self, pipeline: _Guarded, target: Any, threshold: int, *, stdlib: bool) -> None:
        self.pipeline = pipeline
        stamp, validate, finish = pipeline.processors
        self.envelope: Callable[..., Any] = stamp
        self.validate: Callable[..., Any] = validate
        self.finish: Callable[..., Any] = finish
        self.losses = pipeline.losses
        self.target = target
        self.stdlib = stdlib
        self.enabled = {name: _LEVEL_NUMBERS[name] >= threshold for name in LEVELS}

    def __call__(self, event: Event, level: LogLevel) -> None:
        if not self.enabled[level]:
            return
        target = self.target
        event_dict = event.to_dict()  # outside the guard, as before: a broken event raises into its maker
        try:
            rendered = self.finish(
                target, level, self.validate(target, level, self.envelope(target, level, event_dict))
            )
        except structlog.DropEvent:
            return
        except Exception as exc:  # noqa: BLE001 - raised again when strict (_Losses.failed)
            self.losses.failed(exc)
            return
        if self.stdlib:
            args, _ = rendered
            getattr(target, level)(*args)
        else:
            target.msg(rendered)


@dataclass(frozen=True, slots=True, eq=False)
class EmissionConfig:
    """One setup of the pipeline: what ``configure`` was given, and what it built from that.

    ``get_config()`` returns the setup in force and ``restore()`` puts one back, as structlog's
    ``get_config()`` and ``configure()`` do, so that a test or a tool that reconfigures kvlog for a
    while leaves the process as it found it. Restoring puts back that very pipeline (its stream, its
    compiled validators, its count of lost events), not a new one built from the same arguments;
    two configurations are equal only if they are the same one.
    """

    output: Output = "json"
    validation: ValidationMode = "warn"
    stream: IO[str] | IO[bytes] | None = None
    stdlib: bool = False
    level: LogLevel = "debug"
    catalog: Catalog | None = None
    _logger: Any = field(default=None, repr=False)
    _emitter: _Emitter | None = field(default=None, repr=False)
    _losses: _Losses | None = field(default=None, repr=False)

    @property
    def configured(self) -> bool:
        """False before the first ``configure()``: the first event then configures the defaults."""
        return self._emitter is not None


class _State:
    """The configuration in force, replaced whole (one attribute), read by ``emit`` on every event."""

    def __init__(self) -> None:
        self.config = EmissionConfig()


_state = _State()


def configure(
    *,
    output: Output = "json",
    validation: ValidationMode = "warn",
    stream: IO[str] | IO[bytes] | None = None,
    stdlib: bool = False,
    level: LogLevel = "debug",
    catalog: Catalog | None = None,
) -> None:
    """Set up kvlog's structlog pipeline; calling it again replaces the previous setup.

    ``output`` picks JSON lines (for machines) or sglang-style lines (for people); ``validation``
    picks what happens to an invalid event: ``raise`` in tests, ``warn`` (default) in production.
    With ``stdlib=True`` events go to the ``logging`` logger ``"kvlog"`` instead of ``stream``; give
    its handlers ``kvlog.formatter(...)`` so each line is rendered once with one timestamp.
    """
    validator = EventValidator(catalog)
    latest = {name: validator.catalog.latest(name) for name in validator.catalog.events()}
    validating = ValidationProcessor(validation, validator)
    losses = _Losses(strict=validation == "raise")
    chain: list[Processor] = [validating]  # after the envelope, which emit() and structlog callers add apart
    threshold = logging.getLevelNamesMapping()[level.upper()]
    target: _LineWriter | _StdlibWriter
    if stdlib:
        chain.append(_Finisher(validating, _json_text, for_handlers=True))
        stdlib_logger = logging.getLogger("kvlog")
        stdlib_logger.setLevel(threshold)
        target = _StdlibWriter(stdlib_logger, losses)
    else:
        owner = stream if stream is not None else sys.stderr
        writable, renderer = _target(owner, output)
        chain.append(_Finisher(validating, renderer))
        target = _LineWriter(writable, owner, losses)
    logged = _Guarded([_CallerEnvelope(latest), *chain], losses)
    logger = structlog.wrap_logger(
        target, processors=[logged], wrapper_class=structlog.make_filtering_bound_logger(threshold)
    ).bind()
    emitter = _Emitter(_Guarded([_typed_envelope, *chain], losses), target, threshold, stdlib=stdlib)
    _state.config = EmissionConfig(
        output, validation, stream, stdlib, level, catalog, _logger=logger, _emitter=emitter, _losses=losses
    )


def get_config() -> EmissionConfig:
    """The configuration in force, to give back to ``restore()`` later."""
    return _state.config


def restore(config: EmissionConfig) -> None:
    """Put back a configuration ``get_config()`` returned: the same pipeline, writing where it wrote.

    A configuration from before the first ``configure()`` puts kvlog back to unconfigured: the next
    event configures the defaults again.
    """
    _state.config = config


class _Formatter(structlog.stdlib.ProcessorFormatter):
    """``formatter()``: structlog's ``ProcessorFormatter``, writing a kvlog event without copying its record.

    ``ProcessorFormatter`` copies every record and the event in it, then runs its processors, to
    render what kvlog has in hand: a validated event and its JSON text. A record kvlog made is
    written from those (the JSON text as it is, the console wording rendered from the event), which
    is exactly what the processors would write; any other record, or one whose message a filter
    replaced, goes through ``ProcessorFormatter`` as before.
    """

    def __init__(self, output: Output) -> None:
        self.renderer: Processor = _json_text if output == "json" else console_renderer
        self.output = output
        super().__init__(
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, self.renderer],
            foreign_pre_chain=[_foreign_envelope],
        )

    def format(self, record: logging.LogRecord) -> str:
        rendered = record.__dict__.get(_RENDERED)
        if rendered is None or rendered[0] is not record.msg:
            return super().format(record)
        event_dict, line = rendered
        if self.output == "json":
            return line  # type: ignore[no-any-return]
        return self.renderer(self.logger, record.__dict__.get("_name", ""), event_dict)  # type: ignore[return-value]


def formatter(output: Output = "json") -> logging.Formatter:
    """A ``logging.Formatter`` for stdlib handlers: renders kvlog events and foreign records alike."""
    return _Formatter(output)


def get_logger(**initial: Any) -> Any:
    """The structlog logger kvlog events go through (configured with defaults on first use)."""
    if _state.config._logger is None:
        configure()
    logger = _state.config._logger
    return logger.bind(**initial) if initial else logger


def emit(event: Event, level: LogLevel = "info") -> None:
    """Log a typed catalog event at ``level``."""
    emitter = _state.config._emitter
    if emitter is None:
        configure()
        emitter = _state.config._emitter
        assert emitter is not None
    emitter(event, level)


def lost_events() -> int:
    """Events lost since the last ``configure`` because writing them failed (never raised, outside ``raise``)."""
    losses = _state.config._losses
    return losses.count if losses is not None else 0


def bind_ranks(**ranks: int) -> None:
    """Tag every event this context emits with its parallelism ranks, e.g. ``bind_ranks(tp=0, dp=1)``.

    Each call replaces the ranks of the current context (thread or asyncio task); ``bind_ranks()``
    with none clears them.
    """
    _ranks.set({tag.lower(): rank for tag, rank in ranks.items()} or None)


def add_tap(tap: Callable[[dict[str, Any]], None]) -> None:
    """Call ``tap`` with a copy of every event as it is written, once validated and rendered.

    The tap sees what the renderer wrote: a violation report in place of an invalid event or of one
    that could not be rendered, nothing for a dropped one. Taps run before the line reaches the
    stream or the stdlib handlers, so an event whose write then fails is still seen (and counted by
    ``lost_events()``).
    """
    _taps.append(tap)


def remove_tap(tap: Callable[[dict[str, Any]], None]) -> None:
    """Stop calling ``tap``."""
    _taps.remove(tap)


__all__ = [
    "EmissionConfig",
    "bind_ranks",
    "configure",
    "emit",
    "formatter",
    "get_config",
    "get_logger",
    "lost_events",
    "restore",
]
