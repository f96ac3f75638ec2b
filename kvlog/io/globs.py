"""When a name is a glob pattern: one rule for paths and store keys alike.

A leaf of ``kvlog.io``: both the local expansion (``expansion``) and object storage (``store``) apply
it, and neither has to import the other for it.
"""

from __future__ import annotations

import glob
from collections.abc import Callable


def is_pattern(name: str, exists: Callable[[str], bool]) -> bool:
    """Whether ``name`` is read as a glob: it has ``*``, ``?`` or ``[`` and nothing has that very name.

    The exact name wins, for paths and store keys alike: a pattern read in its place would read another
    file (``run[1].log`` read as ``run1.log``), and a file or object with such a name could never be named.
    """
    return glob.has_magic(name) and not exists(name)
