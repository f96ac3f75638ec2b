"""The demo behind ``kvlog demo``: the memory runtime doing real work, its events validated as they go.

It runs what an inference server does with its KV cache under post-capture sizing, on the GPU when
there is one (torch sees CUDA and cuda-bindings is installed), else on this process's own memory:
plan an MHA and a hybrid sliding-window pool (address space only, one page backed), size them from
a budget, put a pool to sleep and wake it, give a hierarchical cache its host pool, close all.
Every byte count printed is what the kernel or driver holds. The memory runtime (and so torch) is
imported only when the demo runs, so ``kvlog --help`` and the log commands stay free of it.
"""

from __future__ import annotations

from importlib.util import find_spec
from typing import IO, TYPE_CHECKING

from kvlog.emission import Output, bind_ranks, configure
from kvlog.testing import capture_events

if TYPE_CHECKING:
    from kvlog.memory.backend import BackendName

MIB = 1 << 20


def demo_backend() -> BackendName:
    """``cuda`` when torch sees a GPU and cuda-bindings is installed, else ``host``."""
    import torch  # noqa: PLC0415 - the demo alone needs torch

    return "cuda" if torch.cuda.is_available() and find_spec("cuda.bindings") is not None else "host"


def memory_runtime_tour(backend: BackendName) -> None:
    """Post-capture MHA and SWA pools, a sleep and a wake, an eager host pool, then close."""
    import torch  # noqa: PLC0415 - the demo alone needs torch

    from kvlog.memory import HostKVPool, KVShape, MHAKVPool, SWAKVPool  # noqa: PLC0415 - same reason

    shape = KVShape(layers=2, heads=8, head_dim=128, dtype=torch.bfloat16, page_size=16)
    window = KVShape(layers=2, heads=8, head_dim=128, dtype=torch.bfloat16, page_size=16)
    with (
        MHAKVPool.plan(shape, upper_bound_tokens=131072, backend=backend) as mha,
        SWAKVPool.plan(
            shape, window, full_upper_bound_tokens=65536, swa_upper_bound_tokens=8192, backend=backend
        ) as swa,
    ):
        # ... CUDA graphs would be captured here, over buffers that are only address space ...
        mha.finalize(budget_bytes=48 * MIB)
        swa.finalize(budget_bytes=24 * MIB)
        mha.sleep()
        mha.wake()
        with HostKVPool(shape, size_gb=0.05):
            pass


def run_demo(output: Output, stream: IO[str]) -> int:
    """Run the demo with validation that raises, events on ``stream``; return how many were emitted."""
    configure(output=output, validation="raise", stream=stream)
    bind_ranks(tp=0)
    with capture_events() as captured:
        memory_runtime_tour(demo_backend())
    return len(captured)
