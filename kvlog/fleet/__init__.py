"""Running kvlog's work on a Ray cluster (the ``fleet`` extra): ``--engine ray``."""

from kvlog.fleet.ray_engine import ClusterError, RayCluster, connected

__all__ = ["ClusterError", "RayCluster", "connected"]
