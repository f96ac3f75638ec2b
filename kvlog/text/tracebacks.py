"""Lines of a Python traceback: a frame's location and its source line, which are never memory lines.

A server that fails prints the traceback through its logger, each line behind the server's prefix
(``ERROR 10-25 13:08:43 [core.py:708]   File ".../kv_cache_utils.py", line 699, in
check_enough_kv_cache_memory``), or a process tag, or bare. A frame names the file and function, whose
names may speak of memory (``kv_cache_utils``), and its source line is the code that raised
(``    raise ValueError("No available memory for the cache blocks. "``): neither is a record the server
logged of memory, so neither may be reported as a memory line no wording reads. The exception's own
line (``ValueError: ...``) is the server's message, read as its wording.
"""

from __future__ import annotations

import re
from functools import cache

#: ``  File "path", line N, in name`` (Python's frame line), at the end of the line, after any prefix
_FRAME = r'(?:^|\s)File "[^"]*", line [0-9]+, in [\w<>.]+\s*$'
#: a frame's source line, indented four spaces or more after any prefix: a statement that raises or returns, an
#: assignment of a call, a call, the arguments a call goes on with (``available_memory_one_worker)``), a string
#: literal that goes on (the message of a ``raise`` spread over lines), Python 3.11's markers under the code
#: (``~~~~^^^^``) and the lines it elides (``...<6 lines>...``)
_SOURCE = (
    r"(?:^|[\])] )\s{4,}(?:"
    r"(?:raise|return|assert|yield|await)\s"
    r"|[\w.\[\]]+\s*[-+*/]?=\s*(?:await\s+)?[\w.\[\]]+\("
    r"|[\w.\[\]]+\("
    r"|[\w.]+(?:,\s*[\w.]+)*\)+[,:]?\s*$"
    r"|[~^]{4,}\s*$"
    r"|\.\.\.<[0-9]+ lines>\.\.\.\s*$"
    r"|f?\"[^\"]*\"\s*\)?\s*$"
    r")"
)


@cache
def _patterns() -> tuple[re.Pattern[str], re.Pattern[str]]:
    """The two expressions, compiled when the first line not read is asked about: most runs meet none."""
    return re.compile(_FRAME), re.compile(_SOURCE)


def traceback_line(text: str) -> bool:
    """Whether ``text`` is a traceback's frame line or the source line under it."""
    frame, source = _patterns()
    return frame.search(text) is not None or source.search(text) is not None
