"""The demo behind ``kvlog demo``: the memory runtime doing real work, its events validated as they go.

It runs what an inference server does with its KV cache under post-capture sizing, on the GPU when
there is one (torch sees CUDA and cuda-bindings is installed), else on this process's own memory:
plan an MHA and a hybrid sliding-window pool (address space only, one page backed), size them from
a budget, put a pool to sleep and wake it, give a hierarchical cache its host pool, close all.
Every byte count printed is what the kernel or driver holds. The memory runtime (and so torch) is
imported only when the demo runs, so ``kvlog --help`` and the log commands stay free of it.
"""

from __future__ import annotations

import contextvars
import io
from importlib.util import find_spec
from typing import IO, TYPE_CHECKING

from kvlog.emission import Output, bind_ranks, configure
from kvlog.testing import capture_events

if TYPE_CHECKING:
    from kvlog.memory.backend import BackendName
    from kvlog.migration.records import Record

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
    # in a copy of the caller's context, so the demo's rank does not tag the caller's later events
    return contextvars.copy_context().run(_tour_as_rank_0)


def _tour_as_rank_0() -> int:
    bind_ranks(tp=0)
    with capture_events() as captured:
        memory_runtime_tour(demo_backend())
    return len(captured)


#: A few lines of old sglang logs, of several generations: what ``kvlog migrate`` reads.
OLD_SGLANG_LOG = """\
[2025-01-14 08:02:31 TP0] Using KV cache dtype: torch.bfloat16
[2025-01-14 08:02:32 TP0] KV Cache is allocated. K size: 31.04 GB, V size: 31.04 GB.
[2025-01-14 08:02:32 TP0] Memory pool end. avail mem=8.37 GB
[2026-07-21 09:00:52 TP0] Load weight begin. avail mem=139.06 GB
[2026-07-21 09:02:11 TP0] KvVmmArena[0] ready: device=0 reserved=78.8 GiB granularity=2048 KiB
[2026-07-21 09:02:11 TP0] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 1933312, K size: 36.88 GB, \
V size: 36.88 GB
[2026-07-21 09:02:12 TP0] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 1933312, K size: 0.46 GB, \
V size: 0.46 GB
[2026-07-21 09:03:42 TP0] Post-capture KV sizing: max_total_num_tokens=1638400, free memory=3.27 GB
[2026-08-12 16:31:21 TP0] Allocating full hierarchical KV host pool: 2652800 tokens, 21.73 GB host memory.
"""


def migration_tour(stream: IO[str]) -> int:
    """Migrate ``OLD_SGLANG_LOG`` and print each memory line as it was and as it reads today.

    The 2026-07 pool printed "is allocated" for what was only address space: the arena line before
    it tells, and the migrated event says so, with the evidence. Returns how many events it read.
    """
    from kvlog.migration import load_chain  # noqa: PLC0415 - only the demo's last step needs the migrator
    from kvlog.migration.engine import MigrateOptions, Migrator  # noqa: PLC0415 - same reason
    from kvlog.migration.legacy import current_line  # noqa: PLC0415 - same reason

    kept = _Records()
    Migrator(load_chain(), MigrateOptions()).take("old-sglang.log", io.BytesIO(OLD_SGLANG_LOG.encode()), kept)
    stream.write("\nkvlog migrate: lines of old sglang logs that read differently today\n")
    lines = OLD_SGLANG_LOG.splitlines()
    count = 0
    for record in kept.records:  # the events themselves, with their input lines: nothing is encoded to be read back
        old, event = lines[record.line - 1], record.event
        count += 1
        inferred = event["migrated"].get("inferred", {})
        notes = [
            f"{name} {event[name]} ({note['rule']}, line {note['evidence_line']})"
            for name, note in inferred.items()
            if "evidence_line" in note
        ]
        today = current_line(event)
        if today != old or notes:
            stream.write(f"  was: {old}\n  now: {today}\n")
            stream.write(f"       inferred: {'; '.join(notes)}\n" if notes else "")
    return count


class _Records:
    """The engine's downstream for the tour: the records kept, the lines no rule reads dropped."""

    def __init__(self) -> None:
        self.records: list[Record] = []

    def passthrough(self, data: bytes | memoryview, /) -> None:
        """Nothing: the tour shows the memory lines alone."""

    def record(self, record: Record, /) -> None:
        self.records.append(record)
