"""Every exception ``kvlog follow``'s library raises, in one module."""

from __future__ import annotations

from kvlog.errors import KvlogError


class StateError(KvlogError):
    """The state file cannot be read or is not a follow state; the message names it and says why."""


__all__ = ["StateError"]
