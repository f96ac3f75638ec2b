"""Completing a timestamp that a line prints only in part, or not at all: what tells the missing part, said so.

sglang 0.2.14 to 0.3.3.post1 printed the time of day alone, and vLLM prints month, day and time but
never a year. An event needs a whole RFC 3339 timestamp, so the missing part is taken from what
tells it, in this order, and ``migrated.inferred.timestamp`` names the rule and its evidence:

1. ``--year`` (``year-option``): the user knows the year.
2. The last line of the file that printed a whole date (``date-not-on-line``).
3. The release that printed the line (``release-line``): a line a server printed is not older than the
   release, whose version an earlier line of the file names (vLLM's ``vLLM API server version X``,
   ``Initializing a V1 LLM engine (vX) with config``) and whose date ``release_dates`` holds. The year
   is the first in which the line's month and day fall on or after that date and, where the file's
   last change is known, not after it: a line is never written after its file last changed. Where
   several years fit both, the one nearest the release is taken (logs are pasted into bug reports
   while their release is current; vLLM releases every few weeks), and the evidence names the others.
   A development build (``0.10.2.dev378+g…``) is newer than the release before it and, when its
   version says the day it was built (``.d20250829``), than that day.
4. The releases that printed the wordings read so far (``wording-release``): each wording kvlog reads
   was printed by a window of releases, from the first whose code prints it to the last before one that
   no longer does (``wording_windows``, from the harvest). A line is not older than the release before
   the first that prints its wording (the development builds after that one print it too), nor than
   those of the wordings its file printed before it, nor after the file last changed (or today, for
   text no file holds). Of the years whose month and day fit, the first after the release and before
   the window closes (a log is pasted while its release is current); the evidence names the others. A
   file whose wordings the newest release still prints, and whose last change is known, takes its year
   from that change (rule 5), which the window does not contradict; so does a file whose last change
   leaves no year of the window (the change is hard evidence, the window soft).
5. The year the file last changed in, or the year before for a date later than that change
   (``date-not-on-line``).
6. Nothing: 1970 stands for it, and the evidence says so.

A line printing no time at all takes the timestamp of the nearest line before it that has one
(``previous-line-timestamp``, saying so where that one's year was itself inferred), else of the nearest
after it (``next-line-timestamp``); the epoch only when no line of the file tells (``no-timestamp``).

``complete`` is the one entry point for the missing part of a printed time; another source of dates
(a wrapper's own timestamp in front of the server's) is a whole date, given to ``DateContext.dated``.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass
from datetime import UTC, date, datetime
from functools import cache
from typing import Any

from kvlog.envelope import EVIDENCE, InferenceRule
from kvlog.migration.ops import mark_inferred
from kvlog.migration.release_dates import RELEASE_DATES

_EPOCH = "1970-01-01"
#: how many years after its lower bound a month and day may first fall (a 29 February: up to eight)
_HORIZON = 8
_VERSION = re.compile(r"v?(?P<release>[0-9]+(?:\.[0-9]+)*)(?P<rest>\S*)")
_POST = re.compile(r"^\.?post(?P<post>[0-9]+)")
#: the build date vLLM's development versions carry in their local part (``+g4d7fe40fc.d20250829``)
_BUILT = re.compile(r"\.d(?P<year>20[0-9]{2})(?P<month>[01][0-9])(?P<day>[0-3][0-9])\b")

_Key = tuple[tuple[int, ...], int, int]


def _key(release: str, stage: int = 1, post: int = 0) -> _Key:
    """A version's place among releases: its numbers (no trailing zeros), before (0) or at (1) them, its post."""
    numbers = [int(part) for part in release.split(".")]
    while len(numbers) > 1 and numbers[-1] == 0:
        numbers.pop()
    return (tuple(numbers), stage, post)


def _version_key(version: str) -> _Key | None:
    """``version``'s key: a development or pre-release build comes before its release, a post one after."""
    match = _VERSION.fullmatch(version)
    if match is None:
        return None
    rest = match.group("rest").split("+", 1)[0]
    post = _POST.match(rest)
    if post is not None:
        return _key(match.group("release"), 1, int(post.group("post")))
    return _key(match.group("release"), 0 if rest else 1)


@cache
def _table(server: str) -> tuple[list[_Key], list[tuple[str, str]]]:
    """``server``'s releases in version order, sorted when a file first names a version (an empty run never does)."""
    dated = sorted((key, pair) for pair in RELEASE_DATES.get(server, ()) if (key := _version_key(pair[0])) is not None)
    return [key for key, _ in dated], [pair for _, pair in dated]


@dataclass(frozen=True)
class Release:
    """The release that printed a file's lines: the earliest day they can be of, and why."""

    #: ``YYYY-MM-DD``: no line the release printed is older
    since: str
    #: the line that names the release
    line: int
    #: what the evidence says of it (``vLLM 0.10.1, released 2025-08-19``)
    said: str


def release(server: str, version: str, line: int) -> Release | None:
    """The ``Release`` of ``server``'s ``version`` named on ``line`` (None: a version no release table bounds).

    A version between two releases (a development build, a fork's) is not older than the newest
    release before it; one older than every release in the table is not bounded.
    """
    key = _version_key(version)
    keys, pairs = _table(server)
    at = bisect_right(keys, key) if key is not None else 0
    if at == 0:
        return None
    released, since = pairs[at - 1]
    name = "vLLM" if server == "vllm" else server
    if key == keys[at - 1]:
        said = f"{name} {version}, released {since}"
    else:
        said = f"{name} {version}, newer than {released} (released {since})"
    built = _BUILT.search(version)
    if built is not None:
        day = f"{built.group('year')}-{built.group('month')}-{built.group('day')}"
        if day > since:
            since, said = day, f"{name} {version}, built on {day}"
    return Release(since, line, said)


@dataclass(frozen=True)
class Printed:
    """When the releases that printed a file's wordings were current, as the wordings read so far say."""

    #: ``YYYY-MM-DD``: no line is older than the release before the first that printed its wording
    since: str
    #: the line whose wording says it
    line: int
    #: what the evidence says of it (``no vLLM release up to 0.7.3 (released 2025-02-20) prints the wording of line 4``)
    said: str
    #: ``YYYY-MM-DD``: the first release that printed none of the wordings any more; None: the newest does
    until: str | None


def printed(known: Printed | None, server: str, window: tuple[str, str, str | None], line: int) -> Printed:
    """What a file's wordings say once ``line``'s, printed by the releases of ``window``, is read too.

    Every window holds the release that printed the file: the latest start and the earliest end bound
    it. An end before the start (a file of two runs, of two releases) says nothing of the end.
    A window inside what is known already (the common case: a file's wordings alternate) returns
    ``known`` itself, as the fold below would rebuild it (its ``until``, when set, is after its ``since``).
    """
    before, since, until = window
    if known is not None and known.since >= since:
        if until is None or (known.until is not None and known.until <= until):
            return known
        since, line, said = known.since, known.line, known.said
    else:
        name = "vLLM" if server == "vllm" else server
        said = f"no {name} release up to {before} (released {since}) prints the wording of line {line}"
    if known is not None and known.until is not None and (until is None or known.until < until):
        until = known.until
    return Printed(since, line, said, until if until is None or until > since else None)


@dataclass
class DateContext:
    """What one input tells of dates.

    ``file_modified`` is an RFC 3339 UTC timestamp (``2026-12-03T10:00:00``); ``year`` is ``--year``.
    """

    #: the last line that printed a whole date: (timestamp, line number)
    last_dated: tuple[str, int] | None = None
    file_modified: str | None = None
    year: int | None = None
    #: the release that printed the lines, as the last line naming one said
    release: Release | None = None
    #: the last event's timestamp, wherever it came from: (timestamp, line number, whether it was inferred)
    last_stamped: tuple[str, int, bool] | None = None
    #: the releases that printed the wordings read so far
    printed: Printed | None = None

    def dated(self, timestamp: str, line: int) -> None:
        """``line`` printed a whole date: it tells the year of the lines after it, and the time of bare lines."""
        self.last_dated = (timestamp, line)
        self.last_stamped = (timestamp, line, False)


def complete(event: dict[str, Any], partial: str, context: DateContext) -> None:
    """Give ``event`` the whole timestamp of which its line printed ``partial`` (``HH:MM:SS`` or ``MM-DDTHH:MM:SS``)."""
    if "T" in partial:
        _complete_year(event, partial, context)
    elif context.last_dated is not None:
        stamp, line = context.last_dated
        event["timestamp"] = f"{stamp[:10]}T{partial}Z"
        evidence = "the line prints no date; the date of the last line that printed one"
        mark_inferred(event, "timestamp", InferenceRule.DATE_NOT_ON_LINE, evidence, line)
    else:
        event["timestamp"] = f"{_EPOCH}T{partial}Z"
        evidence = f"the line prints no date and nothing before it tells it: {_EPOCH} stands for it"
        mark_inferred(event, "timestamp", InferenceRule.DATE_NOT_ON_LINE, evidence)


def undated(event: dict[str, Any], context: DateContext) -> bool:
    """Give a line that prints no time the nearest earlier line's timestamp; False when no line before has one."""
    if context.last_stamped is None:
        return False
    event["timestamp"], line, guessed = context.last_stamped
    rule = InferenceRule.PREVIOUS_LINE_TIMESTAMP
    evidence = EVIDENCE[rule] + (", whose own date was inferred" if guessed else "")
    mark_inferred(event, "timestamp", rule, evidence, line)
    return True


def follows(event: dict[str, Any], timestamp: str, line: int) -> None:
    """Give a line that prints no time, and follows none that had one, the timestamp of the next line that has one."""
    event["timestamp"] = timestamp
    rule = InferenceRule.NEXT_LINE_TIMESTAMP
    mark_inferred(event, "timestamp", rule, EVIDENCE[rule], line)


def _complete_year(event: dict[str, Any], partial: str, context: DateContext) -> None:
    year, rule, evidence, line = _year(partial, context)
    event["timestamp"] = f"{year:04d}-{partial}Z"
    mark_inferred(event, "timestamp", rule, evidence, line)


def _year(partial: str, context: DateContext) -> tuple[int, InferenceRule, str, int | None]:
    """The year of a line printing ``partial`` (``MM-DDTHH:MM:SS``), the rule, its evidence and its line."""
    if context.year is not None:
        return context.year, InferenceRule.YEAR_OPTION, f"the line prints no year; --year {context.year}", None
    if context.last_dated is not None:
        stamp, line = context.last_dated
        evidence = "the line prints no year; the year of the last line that printed one"
        return int(stamp[:4]), InferenceRule.DATE_NOT_ON_LINE, evidence, line
    if context.release is not None:
        year, evidence = _after_release(partial[:5], context.release, context.file_modified)
        return year, InferenceRule.RELEASE_LINE, evidence, context.release.line
    if context.printed is not None:
        found = _printed_year(partial[:5], context.printed, context.file_modified)
        if found is not None:
            year, evidence = found
            return year, InferenceRule.WORDING_RELEASE, evidence, context.printed.line
    if context.file_modified is not None:
        year = int(context.file_modified[:4])
        if partial > context.file_modified[5:]:
            year -= 1  # a line is never written after its file last changed: the year before
        changed = context.file_modified[:10]
        evidence = f"the line prints no year; that of the file's last change ({changed}), or the one before"
        return year, InferenceRule.DATE_NOT_ON_LINE, evidence, None
    evidence = f"the line prints no year and nothing before it tells it: {_EPOCH[:4]} stands for it"
    return int(_EPOCH[:4]), InferenceRule.DATE_NOT_ON_LINE, evidence, None


def _after_release(month_day: str, printed_by: Release, file_modified: str | None) -> tuple[int, str]:
    """The first year whose ``month_day`` (``MM-DD``) falls on or after the release, and not after the file's change."""
    since = printed_by.since
    first = int(since[:4])
    fitting = [year for year in range(first, first + _HORIZON + 1) if _exists(year, month_day)]
    fitting = [year for year in fitting if f"{year:04d}-{month_day}" >= since]
    evidence = f"the line prints no year; it was printed by {printed_by.said}, so not before it"
    if not fitting:  # no year has that day (a damaged prefix): the release's year, said so
        return first, evidence + f"; no year has the day {month_day}: the release's year stands for it"
    changed = file_modified[:10] if file_modified is not None else None
    if changed is not None:
        bounded = [year for year in fitting if f"{year:04d}-{month_day}" <= changed]
        if not bounded:
            evidence += f"; the file's last change ({changed}) is earlier, which no line of the release can be"
        elif len(bounded) > 1:
            others = ", ".join(str(year) for year in bounded[1:])
            evidence += f", nor after the file's last change ({changed}): {others} would fit too"
            evidence += ", the year nearest the release is taken"
            return bounded[0], evidence
        else:
            evidence += f", nor after the file's last change ({changed})"
            return bounded[0], evidence
    return fitting[0], evidence + f": the first {month_day} since {since}"


def _printed_year(month_day: str, by: Printed, file_modified: str | None) -> tuple[int, str] | None:
    """The year of a line whose wordings ``by`` dates (None: the file's last change tells it, rule 5).

    Of the years that fit the releases' window, the first: a log is pasted while its release is current.
    """
    first = int(by.since[:4])
    fitting = [year for year in range(first, first + _HORIZON + 1) if _exists(year, month_day)]
    fitting = [year for year in fitting if f"{year:04d}-{month_day}" >= by.since]
    if file_modified is not None:
        changed, what = file_modified[:10], "the file's last change"
    else:
        changed, what = datetime.now(UTC).date().isoformat(), "today"  # no line is written in the future
    fitting = [year for year in fitting if f"{year:04d}-{month_day}" <= changed]
    if by.until is None and fitting and file_modified is not None:
        return None  # a wording the newest release still prints: the file's change is nearer the truth
    evidence = f"the line prints no year; {by.said}, only the builds after it, so the line is not older"
    evidence += f", nor after {what} ({changed})"
    if not fitting and file_modified is not None:
        return None  # the window and the file's change conflict: the change is hard evidence, it wins (rule 5)
    if not fitting:  # no year has that day between them: the release's year, said so
        return first, evidence + f"; no year has the day {month_day} between them: {first} stands for it"
    current = [year for year in fitting if by.until is None or f"{year:04d}-{month_day}" < by.until]
    if by.until is not None:
        evidence += f"; no release since {by.until} prints it"
    if not current:
        return fitting[0], evidence + f"; no year has the day before then: {fitting[0]}, the first after"
    if len(current) > 1:
        others = ", ".join(str(year) for year in current[1:])
        evidence += f"; {others} would fit too: the year nearest the release is taken"
    return current[0], evidence


def _exists(year: int, month_day: str) -> bool:
    try:
        date(year, int(month_day[:2]), int(month_day[3:5]))
    except ValueError:
        return False
    return True
