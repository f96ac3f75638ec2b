"""Every exception the migration layer raises, in one module (as httpx's ``_exceptions.py``).

A leaf: the steps, the text grammar, the operations and the plan raise each other's errors (a
broken operation becomes a broken migration file) without importing each other for them.
``MigrationError`` and ``PlanError`` reach callers (``kvlog.migration``, ``kvlog.commands``); the
``ValueError``s are the parts' own, which the loader turns into a ``MigrationError`` naming the file.
"""

from __future__ import annotations

from kvlog.errors import KvlogError, OptionError


class MigrationError(KvlogError):
    """A migration file is broken, no path links two versions, or a step cannot apply to an event."""


class PlanError(OptionError):
    """The options or paths of a run conflict; nothing was read or written."""


class UnknownCatalogVersion(ValueError):
    """A catalog version to write that the catalog does not have; the command layer words it as an option."""

    def __init__(self, version: int, newest: int) -> None:
        super().__init__(f"catalog version {version} is not known (catalog versions are 1..{newest})")
        self.version = version
        self.newest = newest


class GrammarError(ValueError):
    """A generation file is inconsistent with the catalog; the caller adds the file name."""


class OpError(ValueError):
    """An operation spec is malformed; the caller adds the file name."""


class ApplyError(ValueError):
    """An operation cannot be applied to this event (an unmapped enum value, a missing field)."""


__all__ = ["ApplyError", "GrammarError", "MigrationError", "OpError", "PlanError", "UnknownCatalogVersion"]
