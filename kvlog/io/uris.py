"""Whether an input or output name is a URI of a store or a path: one test for every reader and writer.

A name is a URI only where it starts with a scheme (``s3://``, ``file://``); ``logs/a://b`` is a path (a
directory ``a:`` holds ``b``). Deciding it here, with the standard library only, lets a reader of paths
ask without importing ``kvlog.io.store`` (and its extra) until a URI is met.
"""

from __future__ import annotations

import re

_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")


def is_uri(name: str) -> bool:
    """Whether ``name`` is a URI (``scheme://...``) rather than a path."""
    return "://" in name and _URI.match(name) is not None
