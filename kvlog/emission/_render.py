"""Renderers: the structlog processors that turn a finished event into the text or bytes written.

JSON goes through orjson (bytes, for a binary stream: no encoding step), the console wording through
``kvlog.text.console``; which one a stream gets is ``_output.target``'s choice.
"""

from __future__ import annotations

from typing import Literal

import orjson
from structlog.typing import EventDict, WrappedLogger

from kvlog.text.console import console_line

#: what ``configure(output=...)`` and ``formatter(...)`` write: JSON lines for machines, the wording for people
Output = Literal["json", "console"]


def json_line(_logger: WrappedLogger, _method: str, event_dict: EventDict) -> bytes:
    """One JSON line, newline included (orjson appends it without a copy)."""
    return orjson.dumps(event_dict, option=orjson.OPT_APPEND_NEWLINE)


def json_text(_logger: WrappedLogger, _method: str, event_dict: EventDict) -> str:
    """JSON for text targets (stdlib handlers, text streams), without the newline they add."""
    return orjson.dumps(event_dict).decode()


def json_text_line(logger: WrappedLogger, method: str, event_dict: EventDict) -> str:
    """JSON for a text stream with no binary buffer under it, newline included."""
    return json_text(logger, method, event_dict) + "\n"


def console_text_line(_logger: WrappedLogger, _method: str, event_dict: EventDict) -> str:
    """The sglang-style wording of an event, newline included."""
    return console_line(event_dict) + "\n"


def console_bytes_line(logger: WrappedLogger, method: str, event_dict: EventDict) -> bytes:
    """The sglang-style wording for a binary stream."""
    return console_text_line(logger, method, event_dict).encode()
