r"""Text from outside (file names, log content) made safe to print on one line of a report.

A file name can hold a newline, a carriage return or an escape sequence, and a log line can hold
anything. Printed raw, a name like ``x\n::error::...`` starts a line of its own, which a CI runner
reads as a workflow command, and ``\x1b[...`` rewrites the terminal. Everything that is not
printable is escaped the way Python writes it in a string literal; bytes that are not UTF-8 (which
Python hands over as surrogate escapes) become ``\xNN``.
"""

from __future__ import annotations

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def printable(text: str) -> str:
    """``text`` with every character that is not printable escaped: one line, no terminal controls."""
    if text.isprintable():
        return text
    return "".join(char if char.isprintable() else _escaped(char) for char in text)


def printable_name(name: str) -> str:
    """A file name for a report: unambiguous (backslashes escaped too) and never taken for a command.

    A name that would start its line with ``:`` (``::error::``) is shown as ``./NAME``, the same file.
    """
    shown = printable(name.replace("\\", "\\\\"))
    return f"./{shown}" if shown.startswith(":") else shown


def _escaped(char: str) -> str:
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:  # a byte that is not UTF-8, as os.fsdecode hands it over
        return f"\\x{code - 0xDC00:02x}"
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"
