"""kvlog: truthful, typed, versioned KV-cache memory events, and the tools to migrate old logs.

The public API is small: ``configure`` the pipeline once, ``emit`` typed events from
``kvlog.events``, ``bind_ranks`` per process. Importing kvlog never imports torch or cuda-python;
the memory runtime lives in ``kvlog.memory`` and needs the ``torch``/``cuda`` extras.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kvlog.errors import KvlogError, SchemaViolationError

if TYPE_CHECKING:
    from kvlog.emission import bind_ranks, configure, emit, formatter, get_logger

__version__ = "0.1.0"

#: imported on first use, so that commands which never emit (``kvlog validate``) start without structlog
_EMISSION_API = frozenset({"bind_ranks", "configure", "emit", "formatter", "get_logger"})


def __getattr__(name: str) -> Any:
    if name in _EMISSION_API:
        from kvlog import emission  # noqa: PLC0415 - the lazy import this function exists for

        value = getattr(emission, name)
        globals()[name] = value  # later look-ups find it directly and never come back here
        return value
    raise AttributeError(f"module 'kvlog' has no attribute {name!r}")


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
