"""Every exception the Ray engine raises, in one module that imports no Ray.

The command layer names ``ClusterError`` whether or not the ``ray`` extra is installed.
"""

from __future__ import annotations

from kvlog.errors import NamesOptions


class ClusterError(NamesOptions):
    """The Ray cluster cannot be reached or started; the message names the address and where it came from."""


__all__ = ["ClusterError"]
