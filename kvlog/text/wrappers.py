"""The envelope around a server's line: what a terminal, a runtime, a journal, a CI runner or a paste put round it.

People read logs through ``docker logs --timestamps``, ``kubectl logs``, journald, a CI job's page,
k9s or Ray's driver, and paste them into issues as markdown or as the HTML a terminal copied. Each
puts its own text around the line the server printed, and none of it is the server's: a server's
prefix (``kvlog.text.prefix``) is only read once it is peeled. ``peel`` is the one stage that does
it, for every known wrapper, nested, in any order: it returns the server's line, the kinds it took
off (outer first: ``migrated.steps`` names them, ``wrapper/<kind>``), the text it took off before and after the
line, its colour aside (which ``--format text`` writes back around the event's line), and the instant a wrapper's own
timestamp names (docker, Kubernetes and CI print a UTC instant with a year, which a vLLM prefix lacks).

Most lines carry no wrapper: ``peel`` answers None for a line that starts the way a server's prefix
starts and holds no escape, tag or suffix a wrapper leaves, after a handful of substring tests.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cache

from kvlog.envelope import Wrapper

#: how a server's own line starts (sglang's dated or rank prefix, vLLM's process tag or level): no wrapper before it
_SERVER_START = re.compile(
    r"\[[0-9]{4}-[0-9]{2}-[0-9]{2} |\[[0-9]{2}:|\[[A-Z]|\([A-Za-z]|(?:INFO|DEBUG|WARNING|ERROR|CRITICAL) "
)

_INSTANT = (
    r"(?P<date>[0-9]{4}-[0-9]{2}-[0-9]{2})[T ](?P<clock>[0-9]{2}:[0-9]{2}:[0-9]{2})(?:[.,](?P<fraction>[0-9]{1,9}))?"
    r"(?P<zone>Z|[+-][0-9]{2}:?[0-9]{2})"
)
#: an escape sequence: CSI (SGR colours, erase-line) and OSC; or an SGR whose ESC a paste lost
_ESCAPE = r"\x1b\[[0-9;:?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]{0,256}(?:\x07|\x1b\\)|\[[0-9]{1,3}(?:;[0-9]{1,3}){0,8}m"
_HTML_TAG = r"</?(?:font|span|b)\b[^<>]{0,256}>"
#: wrappers that open a line, tried in this order at each step of the peel: (kind, pattern)
_OPENERS: tuple[tuple[Wrapper, str], ...] = (
    (Wrapper.CARRIAGE_RETURN, r"\r+"),
    # Buildkite's timestamp, as its raw log holds it (an APC escape, its ESC and BEL perhaps lost in a paste)
    (Wrapper.TIMESTAMP, r"\x1b?_bk;t=(?P<epoch_ms>[0-9]{10,16})\x07?"),
    # journald and syslog: ``Dec 07 10:00:00 host vllm[123]: ``; journalctl -o short-iso's dated one;
    (
        Wrapper.SYSLOG,
        (
            r"(?:(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) [ 0-9][0-9] "
            r"[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,6})?"
            f"|{_INSTANT}) "
            # the program's name starts with a letter: ``Rank 0: max_total_num_token=`` behind docker's stamp is
            # sglang's line, not a host ``Rank`` and a program ``0``
            r"[^\s:\[\]]{1,255} [A-Za-z_][\w.@/-]{0,63}(?:\[[0-9]{1,10}\])?: "
        ),
    ),
    # docker logs --timestamps, kubectl logs --timestamps, GitHub Actions (RFC 3339), a CRI log file's stream and
    # tag (``stdout F``), GitLab's stream code (``00O+``), a bracketed one (Buildkite's and other CI pages)
    (
        Wrapper.TIMESTAMP,
        f"(?:{_INSTANT}|\\[{_INSTANT.replace('?P<', '?P<b_')}\\])(?: (?:stdout|stderr) [FP]| [0-9]{{2}}[OE]\\+?)? ",
    ),
    # k9s draws its frame on both sides of a line: ``│ INFO … │`` (the right side, if there, goes with it)
    (Wrapper.BORDER, r"[│┃║] ?"),
    (Wrapper.QUOTE, r"> ?"),
    (Wrapper.INDENT, r"[ \t]+"),
)
#: carriage returns as a terminal shows them (``^M``), pasted after a line
_CARETS = r"(?:\^M)+$"
_BORDER_END = r" *[│┃║] *$"
#: Ray's log deduplication: `` [repeated 3x across cluster]``, once with its note on how to turn it off
_RAY_REPEATED = r" *\[repeated [0-9]{1,9}x across cluster\](?: \(Ray deduplicates logs by default\.[^()]{0,400}\))? *$"


#: what each opener's first character can be (``_OPENERS``'s order): an opener is compiled and tried only on
#: a text that starts so, as a line that starts as a server's does starts no opener but a bracketed timestamp
_OPENER_STARTS: tuple[str, ...] = (
    "\r",
    "\x1b_",
    "JFMASOND0123456789",
    "0123456789[",
    "│┃║",
    ">",
    " \t",
)


@cache
def _compiled(pattern: str, flags: int = 0) -> re.Pattern[str]:
    """Each expression of a line that has a wrapper, compiled on the first line that needs it: most logs have none.

    Compiling them at import was a tenth of ``kvlog migrate``'s regular-expression work at start-up, and
    compiling them all on a log's first line with a ``<`` or ``[0`` in it (a progress bar's ``[00:00<00:00``)
    a tenth of what the dense benchmark's lines cost beyond 1fdc331's.
    """
    return re.compile(pattern, flags)


@dataclass(frozen=True, slots=True)
class Peeled:
    """A line with its envelope taken off: the server's ``line``, and what wrapped it."""

    line: str
    #: the wrappers' kinds, outer first (a kind met again at once is named once; colour first where the
    #: line opens with it, else last)
    kinds: tuple[Wrapper, ...]
    #: the text taken off before and after ``line``, as it was but for its colour
    before: str
    after: str
    #: the UTC instant (RFC 3339) the innermost timestamped wrapper printed; None: none printed one
    instant: str | None


def peel(line: str) -> Peeled | None:
    """The line inside every wrapper around ``line`` (None: there is none, the common case, told cheaply)."""
    # what a wrapper may leave inside or at the end of a line that starts as a server's does, tested one by
    # one: half the time of ``any`` over a tuple of them, on every line a family does not read whole
    if _SERVER_START.match(line) is not None and not (
        "\x1b" in line or "[0" in line or "<" in line or "[repeated " in line or "│" in line or "^M" in line
    ):
        return None
    # colour is taken out first, wherever it is (vLLM colours its process tag, a terminal anything): it is
    # named outermost where the line opens with it, else innermost
    uncoloured = _compiled(_ESCAPE).sub("", line) if "\x1b" in line or "[" in line else line
    text = _compiled(_HTML_TAG, re.IGNORECASE).sub("", uncoloured) if "<" in uncoloured else uncoloured
    colours = [
        kind for kind, taken in ((Wrapper.ANSI, uncoloured != line), (Wrapper.HTML, text != uncoloured)) if taken
    ]
    kinds: list[Wrapper] = []
    before: list[str] = []
    after: list[str] = []
    instant: str | None = None
    while text:
        kind, taken, found = _opener(text)
        if kind is not None:
            before.append(text[:taken])
            text = text[taken:]
            instant = found or instant
        else:
            kind, start = _closer(text, bordered=Wrapper.BORDER in kinds)
            if kind is None:
                break
            after.insert(0, text[start:])
            text = text[:start]
        if not kinds or kinds[-1] is not kind:
            kinds.append(kind)
    if colours:
        opens = _compiled(f"{_ESCAPE}|{_HTML_TAG}", re.IGNORECASE).match(line) is not None
        kinds = [*colours, *kinds] if opens else [*kinds, *colours]
    if not kinds:
        return None
    return Peeled(text, tuple(kinds), "".join(before), "".join(after), instant)


def _opener(text: str) -> tuple[Wrapper | None, int, str | None]:
    """The wrapper that opens ``text``: its kind, how much of ``text`` it takes, and the instant it names."""
    first = text[0]
    for (kind, pattern), starts in zip(_OPENERS, _OPENER_STARTS, strict=True):
        if first in starts:
            match = _compiled(pattern).match(text)
            if match is not None:
                return kind, match.end(), _instant(match)
    return None, 0, None


def _closer(text: str, *, bordered: bool) -> tuple[Wrapper | None, int]:
    """The wrapper that closes ``text``: its kind and where it starts (a border's right side where its left was)."""
    if bordered and text.endswith(("│", "┃", "║", " ")):
        match = _compiled(_BORDER_END).search(text)
        if match is not None:
            return Wrapper.BORDER, match.start()
    carets = _compiled(_CARETS).search(text) if text.endswith("^M") else None  # a terminal's carriage return, copied
    if carets is not None:
        return Wrapper.CARRIAGE_RETURN, carets.start()
    if text.endswith(("]", ")", " ")) and "[repeated " in text:
        match = _compiled(_RAY_REPEATED).search(text)
        if match is not None:
            return Wrapper.RAY_REPEATED, match.start()
    return None, 0


def _instant(match: re.Match[str]) -> str | None:
    """The UTC instant a wrapper's timestamp names, as RFC 3339 (its fraction kept to the nanosecond)."""
    groups = match.groupdict()
    if groups.get("epoch_ms"):
        milliseconds = int(groups["epoch_ms"])
        if milliseconds > 253402300799999:  # after 9999-12-31: no instant an event can hold
            return None
        moment = datetime.fromtimestamp(milliseconds // 1000, tz=UTC)
        return f"{moment:%Y-%m-%dT%H:%M:%S}.{milliseconds % 1000:03d}Z"
    prefix = "b_" if groups.get("b_date") else ""
    date, zone = groups.get(f"{prefix}date"), groups.get(f"{prefix}zone")
    if date is None or zone is None:
        return None  # a syslog time of day: no year, no zone
    clock, fraction = groups[f"{prefix}clock"], groups[f"{prefix}fraction"]
    digits = f".{fraction}" if fraction else ""
    offset = timedelta(hours=int(zone[1:3]), minutes=int(zone[-2:])) if zone != "Z" else timedelta(0)
    try:
        moment = datetime.fromisoformat(f"{date}T{clock}") - (offset if zone[0] != "-" else -offset)
    except (ValueError, OverflowError):
        return None  # no such day or time: the wrapper is peeled, its time not believed
    return f"{moment:%Y-%m-%dT%H:%M:%S}{digits}Z"
