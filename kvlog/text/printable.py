r"""Text from outside (file names, log content, catalog text) made safe to print on one line of a report.

A file name can hold a newline, a carriage return or an escape sequence, and a log line can hold
anything. Printed raw, a name like ``x\n::error::...`` starts a line of its own, which a CI runner
reads as a workflow command, and ``\x1b[...`` rewrites the terminal. An escaped character is written
the way Python writes it in a string literal; bytes that are not UTF-8 (which Python hands over as
surrogate escapes) become ``\xNN``. Which characters are escaped depends on what the report is for
(``LOG_REPORT``, ``CATALOG_REPORT``); how they are escaped is the same for every report.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_ACTS_ON_READER = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


@dataclass(frozen=True)
class Escaping:
    """The characters one kind of report escapes.

    ``shown_as_is`` holds for a text none of whose characters is escaped, one character or a whole
    line alike, so that text with nothing to escape (nearly all of it) costs a single call.
    """

    shown_as_is: Callable[[str], bool]


#: ``kvlog validate``: findings quote event names, keys and values from a server's log, which can hold
#: anything. Every character that does not show as itself is escaped, invisible ones too (U+200B,
#: U+00A0): an unknown event name holding one would otherwise look like a known name.
LOG_REPORT = Escaping(str.isprintable)
#: ``kvlog check``: findings about the project's own catalog, for a terminal, GitHub workflow commands,
#: JUnit XML and JSON tools. Only what one of those acts on instead of showing is escaped: C0 and C1
#: controls, line and paragraph separators, bidirectional overrides, and the surrogates that stand for
#: bytes of a file name that are not UTF-8. The rest of the catalog's text stays as it is written.
CATALOG_REPORT = Escaping(lambda text: _ACTS_ON_READER.search(text) is None)


def printable(text: str, *, escaping: Escaping = LOG_REPORT, keep: str = "") -> str:
    """``text`` as one line with no terminal controls; characters in ``keep`` are left for the caller."""
    if escaping.shown_as_is(text):
        return text
    return "".join(char if char in keep or escaping.shown_as_is(char) else _escaped(char) for char in text)


def printable_name(name: str, *, escaping: Escaping = LOG_REPORT, keep: str = "") -> str:
    """A file name for a report: unambiguous (backslashes escaped too) and never taken for a command.

    A name beginning with ``:`` (``::error::``) is shown as ``./NAME``, the same file, so that no line of
    any report (a ``kvlog check`` text line starts with the file too) begins with a workflow command.
    """
    shown = printable(name.replace("\\", "\\\\"), escaping=escaping, keep=keep)
    return f"./{shown}" if shown.startswith(":") else shown


def log_text(data: bytes) -> str:
    r"""Bytes of a log as text to quote (a dead letter, a report): a byte that is not UTF-8 as ``\xNN``, never U+FFFD.

    The replacement character would lose which byte it was; the escape says it, as every report does.
    """
    return data.decode("utf-8", "backslashreplace")


def name_text(name: str) -> str:
    r"""A file name as text that JSON can hold (a dead letter, ``migrated.file``): bytes not UTF-8 as ``\xNN``.

    Python hands such bytes of a name over as lone surrogates, which no UTF-8 writer takes.
    """
    try:
        return log_text(name.encode("utf-8", "surrogateescape"))
    except UnicodeEncodeError:  # a surrogate that stands for no byte (a caller's own str)
        return name.encode("utf-8", "backslashreplace").decode("utf-8")


def _escaped(char: str) -> str:
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:  # a byte that is not UTF-8, as os.fsdecode hands it over
        return f"\\x{code - 0xDC00:02x}"
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"
