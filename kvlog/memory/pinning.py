"""Page-locking host memory for the GPU (``cudaHostRegister``), as HiCache's host pools need.

Copies between a host KV pool and the device only run asynchronously and at full PCIe/NVLink speed
from page-locked memory. The arena's memory is registered in place, range by range, after it is
committed and unregistered before it is given back (unmapping registered memory is undefined).
"""

from __future__ import annotations

from typing import Any

import torch

from kvlog.memory.errors import PinningError


def _runtime() -> Any:
    """The CUDA runtime as torch binds it (untyped in torch's stubs)."""
    return torch.cuda.cudart()  # type: ignore[no-untyped-call]


class PinnedRanges:
    """The host ranges this process registered with CUDA, so that each is unregistered exactly once."""

    def __init__(self) -> None:
        self._addresses: list[int] = []

    def __bool__(self) -> bool:
        return bool(self._addresses)

    def pin(self, ranges: list[tuple[int, int]]) -> None:
        """Register every ``(address, nbytes)``; on a failure, the ones already registered are undone."""
        if not torch.cuda.is_available():
            raise PinningError("pinning host memory needs a CUDA device, and torch sees none")
        runtime = _runtime()
        for address, nbytes in ranges:
            result = runtime.cudaHostRegister(address, nbytes, 0)
            if result != runtime.cudaError.success:
                self.unpin()
                raise PinningError(f"cudaHostRegister of {nbytes} bytes at {address:#x} failed: {result}")
            self._addresses.append(address)

    def unpin(self) -> None:
        """Unregister everything registered so far."""
        while self._addresses:
            runtime = _runtime()
            address = self._addresses.pop()
            result = runtime.cudaHostUnregister(address)
            if result != runtime.cudaError.success:
                raise PinningError(f"cudaHostUnregister at {address:#x} failed: {result}")
