"""The bridge to stdlib ``logging``: events to the ``logging`` logger "kvlog", and ``formatter()`` for its handlers.

With ``configure(stdlib=True)`` the wrapped logger is a ``logging`` logger, so a server that logs
through ``logging`` (as sglang does) routes kvlog's events with its own handlers; ``formatter()``
renders those events, and any foreign record, as structlog's ``ProcessorFormatter`` does. This is
the one module of the pipeline that knows stdlib records and handlers.
"""

from __future__ import annotations

import logging
import time

import structlog
from structlog.typing import EventDict, Processor, WrappedLogger

from kvlog.emission import _render
from kvlog.emission._levels import ALIASES, NUMBERS
from kvlog.emission._losses import Losses
from kvlog.emission._render import Output
from kvlog.envelope import envelope, utc_timestamp
from kvlog.text.console import console_renderer

#: the ``LogRecord`` attribute with the event a record carries and the JSON text kvlog wrote for it
_RENDERED = "_kvlog_rendered"


class StdlibWriter:
    """The wrapped logger with ``stdlib=True``: hands each event to the ``logging`` logger "kvlog".

    The record is made and handled as ``Logger.info`` would, less the search of the call stack for
    the caller's file and line: that would name this module, never the caller, and costs more than
    rendering the event. Its message is the event (as ``structlog.stdlib.ProcessorFormatter`` wants
    it), and it carries the JSON text already rendered for ``formatter()``. A handler that raises
    (its ``emit`` or its formatter) loses the event, unless strict; handlers that catch their own
    errors report them through ``logging``'s ``handleError`` as usual.
    """

    def __init__(self, logger: logging.Logger, losses: Losses) -> None:
        self.logger = logger
        self.losses = losses

    @classmethod
    def to_kvlog(cls, threshold: int, losses: Losses) -> StdlibWriter:
        """The writer to the logger "kvlog", which is set to let through what ``threshold`` does."""
        logger = logging.getLogger("kvlog")
        logger.setLevel(threshold)
        return cls(logger, losses)

    @property
    def lost(self) -> int:
        """Events lost since ``configure``, in a handler or before it."""
        return self.losses.count

    def _log(self, method: str, event_dict: EventDict, line: str) -> None:
        level = NUMBERS[method]
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


def _foreign_envelope(_logger: WrappedLogger, method: str, event_dict: EventDict) -> EventDict:
    """Level and timestamp for a plain stdlib record, stamped with the time the record was made."""
    record = event_dict.get("_record")
    stamp = utc_timestamp(record.created if isinstance(record, logging.LogRecord) else time.time())
    head = envelope(event_dict.get("event"), None, stamp, ALIASES.get(method, method))
    head.update(event_dict)
    return head


class _Formatter(structlog.stdlib.ProcessorFormatter):
    """``formatter()``: structlog's ``ProcessorFormatter``, writing a kvlog event without copying its record.

    ``ProcessorFormatter`` copies every record and the event in it, then runs its processors, to
    render what kvlog has in hand: a validated event and its JSON text. A record kvlog made is
    written from those (the JSON text as it is, the console wording rendered from the event), which
    is exactly what the processors would write; any other record, or one whose message a filter
    replaced, goes through ``ProcessorFormatter`` as before.
    """

    def __init__(self, output: Output) -> None:
        self.renderer: Processor = _render.json_text if output == "json" else console_renderer
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
