"""kvlog: truthful, typed, versioned KV-cache memory events, and the tools to migrate old logs.

The public API is small: ``configure`` the pipeline once, ``emit`` typed events from
``kvlog.events``, ``bind_ranks`` per process. Importing kvlog never imports torch or cuda-python;
the memory runtime lives in ``kvlog.memory`` and needs the ``torch``/``cuda`` extras.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvlog import lazy
from kvlog.errors import KvlogError, SchemaViolationError

if TYPE_CHECKING:
    from kvlog.emission import bind_ranks, configure, emit, formatter, get_logger

__version__ = "0.1.0"

#: imported on first use, so that commands which never emit (``kvlog validate``) start without structlog
__getattr__ = lazy.lazy_exports(
    __name__, dict.fromkeys(("bind_ranks", "configure", "emit", "formatter", "get_logger"), "kvlog.emission")
)


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
