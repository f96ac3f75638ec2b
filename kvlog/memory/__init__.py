"""The memory runtime: a VMM arena over CUDA or host memory, and KV pools built on it.

Importing this package needs torch (the ``torch`` extra); the CUDA backend is imported only by
``VmmArena.cuda`` and needs the ``cuda`` extra. ``import kvlog`` alone never gets here.
"""

from __future__ import annotations

from kvlog.memory.arena import ArenaChange, VmmArena
from kvlog.memory.backend import Backend, Measurement
from kvlog.memory.errors import ArenaError, BackendError, PinningError, PoolSizingError, PoolStateError
from kvlog.memory.host_backend import HostBackend
from kvlog.memory.pools import HostKVPool, KVPool, KVShape, MHAKVPool, MLAKVPool
from kvlog.memory.swa import SWAKVPool

__all__ = [
    "ArenaChange",
    "ArenaError",
    "Backend",
    "BackendError",
    "HostBackend",
    "HostKVPool",
    "KVPool",
    "KVShape",
    "MHAKVPool",
    "MLAKVPool",
    "Measurement",
    "PinningError",
    "PoolSizingError",
    "PoolStateError",
    "SWAKVPool",
    "VmmArena",
]
