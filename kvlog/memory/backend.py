"""What a memory backend must do for ``VmmArena``: reserve, map, unmap, measure.

The arena (bookkeeping, alignment, locking, events, rollback) is written once over this protocol;
a backend only talks to the driver (CUDA) or the kernel (host). Addresses are plain integers so
that both backends look the same to the arena.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol

if TYPE_CHECKING:
    import torch

BackendName = Literal["cuda", "host"]
MeasurementSource = Literal["smaps_rss", "cuMemGetInfo", "nvml"]


@dataclass(frozen=True)
class Measurement:
    """Physical bytes the driver or kernel attributes to an arena, and who said so."""

    nbytes: int
    source: MeasurementSource


class Backend(Protocol):
    """One kind of memory: CUDA virtual memory management or Linux virtual memory."""

    name: BackendName
    device: int | None
    granularity: int
    handle_type: str | None

    def reserve(self, nbytes: int) -> int:
        """Reserve ``nbytes`` (a multiple of the granularity) of address space; return the base address."""
        ...

    def map(self, address: int, nbytes: int) -> None:
        """Back ``[address, address + nbytes)`` (granularity-aligned) with physical memory, readable and writable.

        Either the whole range is backed or, on failure, none of it is and ``BackendError`` is raised;
        only when undoing the partial work fails too does the error name what is left in ``still_held``.
        """
        ...

    def unmap(self, address: int, nbytes: int) -> None:
        """Give back the physical memory of a mapped range, keeping the address space reserved."""
        ...

    def release(self, base: int, nbytes: int) -> None:
        """Give back a whole reservation (every range in it already unmapped)."""
        ...

    def measure(self, base: int, nbytes: int) -> Measurement | None:
        """Physical bytes backing ``[base, base + nbytes)`` as the driver or kernel reports them, if it can."""
        ...

    def tensor(self, address: int, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        """A zero-copy tensor over mapped memory starting at ``address``."""
        ...
