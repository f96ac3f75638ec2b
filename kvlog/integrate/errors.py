"""Every exception ``kvlog integrate``'s library raises, in one module."""

from __future__ import annotations

from kvlog.errors import KvlogError


class ConfigurationError(KvlogError):
    """A configuration to keep that kvlog's handler cannot be merged into; the message says why."""


__all__ = ["ConfigurationError"]
