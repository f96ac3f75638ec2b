"""Outcome attributes under the names they had in 0.1.0, which still read, with a ``DeprecationWarning``.

``summary`` was a string on ``MigrateOutcome`` and ``PlotOutcome`` and a counts object on
``ValidateOutcome``; they are ``status_line`` and ``counts`` now (``CommandOutcome``). Code written
against 0.1.0 keeps working, and is told the new name, until a release removes the old one.
"""

from __future__ import annotations

import warnings
from typing import Any


class Renamed:
    """A class attribute that reads ``new`` of the instance, warning that its own name is deprecated."""

    def __init__(self, new: str) -> None:
        self.new = new
        self.old = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.old = name

    def __get__(self, instance: object, owner: type | None = None) -> Any:
        if instance is None:
            return self
        warnings.warn(
            f"{type(instance).__name__}.{self.old} is deprecated: use .{self.new}", DeprecationWarning, stacklevel=2
        )
        return getattr(instance, self.new)
