"""The console renderer: each event as the line an operator knows from sglang.

Lines keep sglang's ``[YYYY-mm-dd HH:MM:SS TP0] message`` prefix (``kvlog.text.prefix.SGLANG``) so
that people (and their habits) read them as before, but the message is today's truthful wording from
``kvlog.text.wording``.
Events without a wording fall back to ``name key=value ...`` so nothing is ever hidden; a field
without a value is left out rather than printed as ``None``.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from typing import Any

from kvlog import envelope
from kvlog.text.prefix import SGLANG
from kvlog.text.wording import render_message

_QUIET_LEVELS = ("info", "debug")


class _LastPrefix:
    """The prefix of the last line, by what it depends on: the timestamp's second and the ranks.

    A server's consecutive events share both, and building the prefix cost a fifth of rendering a
    line. The ranks are keyed by their ``repr``, which tells apart what equality does not and the
    prefix does (their order, ``1`` from ``True`` or ``1.0``). One entry, replaced whole, so threads
    never see a prefix with another line's key.
    """

    def __init__(self) -> None:
        self.last: tuple[tuple[Any, str], str] | None = None

    def build(self, timestamp: Any, ranks: Any) -> str:
        key = (timestamp[:19] if timestamp else "", repr(ranks) if ranks else "")
        last = self.last
        if last is not None and last[0] == key:
            return last[1]
        prefix = SGLANG.build(timestamp, ranks)
        self.last = (key, prefix)
        return prefix


_prefix = _LastPrefix()


def console_line(event: Mapping[str, Any]) -> str:
    """The whole console line for one event."""
    message = render_message(event)
    if message is None:
        fields = " ".join(f"{k}={v}" for k, v in event.items() if k not in envelope.FIELDS and v is not None)
        message = f"{event.get('event')} {fields}".rstrip()
    level = event.get("level")
    if level not in _QUIET_LEVELS and level is not None:
        message = f"{str(level).upper()} {message}"
    return _prefix.build(event.get("timestamp"), event.get("ranks")) + message


def console_renderer(_logger: object, _method: str, event: MutableMapping[str, Any]) -> str:
    """Structlog processor: the last in the chain when rendering for people."""
    return console_line(event)
