"""The console renderer: each event as the line an operator knows from sglang.

Lines keep sglang's ``[YYYY-mm-dd HH:MM:SS TP0] message`` prefix so that people (and their habits)
read them as before, but the message is today's truthful wording from ``kvlog.text.wording``.
Events without a wording fall back to ``name key=value ...`` so nothing is ever hidden; a field
without a value is left out rather than printed as ``None``.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from typing import Any

from kvlog.text.wording import render_message

_ENVELOPE = ("event", "schema_version", "timestamp", "level", "pid", "ranks", "migrated", "ext")
_QUIET_LEVELS = ("info", "debug")


def rank_tags(ranks: Mapping[str, int] | None) -> str:
    """``{"dp": 0, "tp": 1}`` -> ``" DP0 TP1"``, the way sglang tags a rank's lines."""
    if not ranks:
        return ""
    return "".join(f" {tag.upper()}{rank}" for tag, rank in ranks.items())


def sglang_timestamp(timestamp: str | None) -> str:
    """RFC 3339 -> sglang's ``YYYY-mm-dd HH:MM:SS`` (still UTC)."""
    if not timestamp:
        return ""
    return timestamp[:19].replace("T", " ")


def console_line(event: Mapping[str, Any]) -> str:
    """The whole console line for one event."""
    message = render_message(event)
    if message is None:
        fields = " ".join(f"{k}={v}" for k, v in event.items() if k not in _ENVELOPE and v is not None)
        message = f"{event.get('event')} {fields}".rstrip()
    level = event.get("level")
    if level not in _QUIET_LEVELS and level is not None:
        message = f"{str(level).upper()} {message}"
    prefix = f"{sglang_timestamp(event.get('timestamp'))}{rank_tags(event.get('ranks'))}"
    return f"[{prefix}] {message}" if prefix else message


def console_renderer(_logger: object, _method: str, event: MutableMapping[str, Any]) -> str:
    """Structlog processor: the last in the chain when rendering for people."""
    return console_line(event)
