"""Every exception ``kvlog plot``'s library raises, in one module that imports no Plotly.

The command layer catches ``PlotError`` without the ``plot`` extra installed.
"""

from __future__ import annotations

from kvlog.errors import KvlogError


class PlotError(KvlogError):
    """The figure could not be drawn or written: the plotting extra or a browser is missing, or rendering failed."""


__all__ = ["PlotError"]
