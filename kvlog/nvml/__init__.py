"""The driver's word, live: device memory sampled through NVML (the ``nvml`` extra, ``nvidia-ml-py``).

``kvlog integrate --nvml`` samples at each memory record of a server process and writes a
``device_memory.measured`` event beside each event read from it; a pool whose line only claims to be
allocated gets its state from the measurement (``migrated.inferred`` rule ``measured``). A library
user of the memory runtime samples the same way around its own calls (docs/integrate.md). Importing
this package never imports nvidia-ml-py: ``open_sampler`` does, and says why when it cannot.
"""

from __future__ import annotations

from kvlog.nvml.errors import SamplingError
from kvlog.nvml.measured_rule import MAX_LAG_S, MeasuredState, measured_state
from kvlog.nvml.sampler import DeviceSample, NvmlSampler, open_sampler

__all__ = [
    "MAX_LAG_S",
    "DeviceSample",
    "MeasuredState",
    "NvmlSampler",
    "SamplingError",
    "measured_state",
    "open_sampler",
]
