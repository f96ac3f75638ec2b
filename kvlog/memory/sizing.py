"""How many token slots a byte budget buys, and how much memory is free to budget with.

Post-capture sizing (sglang's rule): after CUDA-graph capture, the pool may have the free device
memory minus a headroom, plus what it already holds, capped at the address space reserved for it.
Because every buffer is committed in whole granules, the token count that fits is found by search
over the exact committed cost, never by dividing by a per-token size (which would overshoot).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from kvlog.memory.backend import BackendName
from kvlog.memory.errors import PoolSizingError


def largest_fitting(cost: Callable[[int], int], budget_bytes: int, page_size: int, upper_bound: int) -> int:
    """The largest token count, a multiple of ``page_size`` and at most ``upper_bound``, costing <= budget.

    ``cost`` must not decrease as the token count grows; zero tokens must fit, else nothing does.
    """
    if cost(0) > budget_bytes:
        raise PoolSizingError(f"a budget of {budget_bytes} bytes does not cover the first page ({cost(0)} bytes)")
    low, high = 0, upper_bound // page_size
    while low < high:
        middle = (low + high + 1) // 2
        if cost(middle * page_size) <= budget_bytes:
            low = middle
        else:
            high = middle - 1
    return low * page_size


def free_memory_bytes(backend: BackendName, device: int | None) -> int:
    """Memory the pool could still get: CUDA free device memory, or the kernel's MemAvailable on the host."""
    if backend == "cuda":
        import torch  # noqa: PLC0415 - only CUDA pools ask the CUDA runtime

        free, _total = torch.cuda.mem_get_info(device)
        return int(free)
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    raise PoolSizingError("/proc/meminfo has no MemAvailable line")
