"""Every exception the memory runtime raises, in one module (as httpx's ``_exceptions.py``).

``kvlog.memory`` exports each of them; they live here, a leaf, so that the arena, its backends and the
pools raise each other's errors without importing each other for it.
"""

from __future__ import annotations

from kvlog.errors import KvlogError


class ArenaError(KvlogError):
    """An arena operation was refused or failed; a ``kv_arena.error`` event was emitted with it.

    Also raised, without an event, for a size or offset refused before any arena exists (a
    backend's granularity, a reservation too large for the platform).
    """


class BackendError(KvlogError):
    """A driver or system call failed; ``call`` names it and ``code`` is its error code or errno.

    ``still_held``, when a backend knows it, lists the ``(address, nbytes)`` ranges of the call's range
    that still hold physical memory after the failure, so that the arena's books stay exact and a
    later decommit or close gives them back. None means the backend's contract: after a failed
    ``map`` nothing is held, after a failed ``unmap`` everything still is.
    """

    def __init__(self, call: str, code: int | str, detail: str = "") -> None:
        self.call = call
        self.code = code
        self.still_held: tuple[tuple[int, int], ...] | None = None
        super().__init__(f"{call} failed: {code}{f' ({detail})' if detail else ''}")


class PinningError(KvlogError):
    """Host memory could not be page-locked for the GPU (no CUDA device, or the driver refused)."""


class PoolSizingError(KvlogError):
    """A budget or shape that cannot give a pool even its first page."""


class PoolStateError(KvlogError):
    """A pool operation that its lifecycle state does not allow (finalize twice, use after close)."""


__all__ = ["ArenaError", "BackendError", "PinningError", "PoolSizingError", "PoolStateError"]
