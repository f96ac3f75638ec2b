"""The errors of NVML sampling (``kvlog.nvml``); a leaf, importing no extra."""

from __future__ import annotations

from kvlog.errors import KvlogError


class SamplingError(KvlogError):
    """NVML cannot be used, or failed a call: the sampler stops, and events go on without measurements."""
