"""Standard output for findings and reports: closed at start (``>&-``), a closed pipe, a full disk.

A closed pipe (``| head``) is its reader gone: ``ReaderGone`` stops the run quietly with 141, as SIGPIPE
stops ``cat``. The others are an ``OSError`` a command reports as "cannot write" with exit 2. After
either, the interpreter's own flush at exit would fail again and print a traceback: standard output
is pointed at /dev/null.
"""

from __future__ import annotations

import errno
import os
import sys

from kvlog.io.errors import ReaderGone


def write_out(text: str) -> None:
    """Write ``text`` to standard output; OSError (EBADF) if the process started without one."""
    if sys.stdout is None:  # started with descriptor 1 closed (`>&-`)
        raise OSError(errno.EBADF, "standard output is closed")
    try:
        sys.stdout.write(text)
    except BrokenPipeError:
        raise ReaderGone from None


def flush_out() -> None:
    """Flush standard output, if there is one (a run that writes nothing does not need it)."""
    if sys.stdout is not None:
        try:
            sys.stdout.flush()
        except BrokenPipeError:
            raise ReaderGone from None


def abandon_out() -> None:
    """Give up on standard output after a failed write, so that the exit's own flush is quiet."""
    if sys.stdout is not None:
        descriptor = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(descriptor, sys.stdout.fileno())
        except (OSError, ValueError):  # no descriptor of its own (a caller's stream): nothing to protect
            pass
        finally:
            os.close(descriptor)
