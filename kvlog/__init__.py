"""kvlog: truthful, typed, versioned KV-cache memory events, and the tools to migrate old logs.

The public API is small: ``configure`` the pipeline once, ``emit`` typed events from
``kvlog.events``, ``bind_ranks`` per process. Importing kvlog never imports torch or cuda-python;
the memory runtime lives in ``kvlog.memory`` and needs the ``torch``/``cuda`` extras.
"""

from __future__ import annotations

from kvlog.emission import bind_ranks, configure, emit, formatter, get_logger
from kvlog.errors import KvlogError, SchemaViolationError

__version__ = "0.1.0"

__all__ = [
    "KvlogError",
    "SchemaViolationError",
    "__version__",
    "bind_ranks",
    "configure",
    "emit",
    "formatter",
    "get_logger",
]
