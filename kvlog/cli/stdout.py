"""Standard output for findings and reports: closed at start (``>&-``), a closed pipe, a full disk.

Each is an ``OSError`` a command reports as "cannot write" with exit 2. After one, the interpreter's
own flush at exit would fail again and print a traceback: standard output is pointed at /dev/null.
"""

from __future__ import annotations

import errno
import os
import sys


def write_out(text: str) -> None:
    """Write ``text`` to standard output; OSError (EBADF) if the process started without one."""
    if sys.stdout is None:  # started with descriptor 1 closed (`>&-`)
        raise OSError(errno.EBADF, "standard output is closed")
    sys.stdout.write(text)


def flush_out() -> None:
    """Flush standard output, if there is one (a run that writes nothing does not need it)."""
    if sys.stdout is not None:
        sys.stdout.flush()


def abandon_out() -> None:
    """Give up on standard output after a failed write, so that the exit's own flush is quiet."""
    if sys.stdout is not None:
        descriptor = os.open(os.devnull, os.O_WRONLY)
        os.dup2(descriptor, sys.stdout.fileno())
        os.close(descriptor)
