"""Which engine runs kvlog's hot paths: the compiled ``kvlog._native``, or the Python reference.

The native module is optional: ``scripts/bootstrap`` builds it where a Rust toolchain is installed
(``scripts/native``), and without it every path runs in Python, the engine the native one is held to
(``tests/test_native_differential.py``). ``KVLOG_NATIVE=0`` runs the Python engine even where the
module is built, to compare the two or to rule the native one out; ``kvlog --version`` says which runs.
"""

from __future__ import annotations

import os
from functools import cache
from types import ModuleType

#: ``0``: run the Python engine even where ``kvlog._native`` is built (``1``: the differential tests must find it)
ENV = "KVLOG_NATIVE"


@cache
def compiled() -> ModuleType | None:
    """``kvlog._native`` where it is built, whatever ``KVLOG_NATIVE`` says (the differential tests run both)."""
    try:
        from kvlog import _native  # noqa: PLC0415 - optional, so imported only where it is asked for
    except ImportError:
        return None
    return _native


def selected() -> ModuleType | None:
    """``kvlog._native`` where it is built and ``KVLOG_NATIVE`` is not ``0``: the engine a run uses."""
    return None if os.environ.get(ENV, "").strip() == "0" else compiled()


def engine() -> str:
    """Which engine runs the hot paths, and why when it is the Python one: what ``kvlog --version`` says."""
    if selected() is not None:
        return "native (kvlog._native)"
    if compiled() is not None:
        return f"Python ({ENV}=0)"
    return "Python (kvlog._native is not built: scripts/native builds it where cargo is installed)"
