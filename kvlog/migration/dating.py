"""Completing a timestamp that a line prints only in part: what the file around it tells, said so.

sglang 0.2.14 to 0.3.3.post1 printed the time of day alone, and vLLM prints month, day and time but
never a year. An event needs a whole RFC 3339 timestamp, so the missing part is taken from the
context: the last line of the file that printed a whole date, else (for a year) the year the file
last changed in, or the year before for a date later than that change. ``migrated.inferred.timestamp``
says where it came from. When nothing tells it, the epoch's date or year stands for it, and the
provenance says that too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kvlog.envelope import InferenceRule
from kvlog.migration.ops import mark_inferred

_EPOCH = "1970-01-01"


@dataclass
class DateContext:
    """What one input tells of dates: its last dated line (timestamp, line number) and when its file last changed.

    ``file_modified`` is an RFC 3339 UTC timestamp (``2026-12-03T10:00:00``).
    """

    last_dated: tuple[str, int] | None = None
    file_modified: str | None = None


def complete(event: dict[str, Any], partial: str, context: DateContext) -> None:
    """Give ``event`` the whole timestamp of which its line printed ``partial`` (``HH:MM:SS`` or ``MM-DDTHH:MM:SS``)."""
    rule = InferenceRule.DATE_NOT_ON_LINE
    no_year = "T" in partial
    missing = "year" if no_year else "date"
    if context.last_dated is not None:
        stamp, line = context.last_dated
        event["timestamp"] = f"{stamp[:5]}{partial}Z" if no_year else f"{stamp[:10]}T{partial}Z"
        evidence = f"the line prints no {missing}; the {missing} of the last line that printed one"
        mark_inferred(event, "timestamp", rule, evidence, line)
        return
    if no_year and context.file_modified is not None:
        year = int(context.file_modified[:4])
        if f"{partial}" > context.file_modified[5:]:
            year -= 1  # a line is never written after its file last changed: the year before
        event["timestamp"] = f"{year:04d}-{partial}Z"
        changed = context.file_modified[:10]
        evidence = f"the line prints no year; that of the file's last change ({changed}), or the one before"
        mark_inferred(event, "timestamp", rule, evidence)
        return
    event["timestamp"] = f"{_EPOCH[:5]}{partial}Z" if no_year else f"{_EPOCH}T{partial}Z"
    stands = _EPOCH[:4] if no_year else _EPOCH
    evidence = f"the line prints no {missing} and nothing before it tells it: {stands} stands for it"
    mark_inferred(event, "timestamp", rule, evidence)
