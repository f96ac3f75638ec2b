"""Running kvlog's work on a Ray cluster (the ``fleet`` extra): ``--engine ray``.

Importing this package never imports Ray: ``connected`` and ``RayCluster`` load it on first use, so
that ``ClusterError`` can be caught (``kvlog.fleet.errors``) where the extra is not installed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvlog.fleet.errors import ClusterError
from kvlog.lazy import lazy_exports

if TYPE_CHECKING:
    from kvlog.fleet.ray_engine import RayCluster, connected

__getattr__ = lazy_exports(__name__, dict.fromkeys(("RayCluster", "connected"), "kvlog.fleet.ray_engine"))

__all__ = ["ClusterError", "RayCluster", "connected"]
