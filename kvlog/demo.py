"""The demo behind ``kvlog demo``: events through the real pipeline, validated as they go."""

from __future__ import annotations

from typing import IO

from kvlog import events
from kvlog.emission import Output, bind_ranks, configure, emit
from kvlog.event_base import Event
from kvlog.testing import capture_events

GIB = 1 << 30
MIB = 1 << 20


def catalog_tour() -> list[Event]:
    """One event of every kind, with the figures of a small post-capture MHA pool."""
    arena = "4242_0"
    pool_bytes = 2 * GIB
    return [
        events.KvArenaReady(
            arena_id=arena,
            backend="host",
            device=None,
            reserved_va_bytes=pool_bytes + 64 * MIB,
            granularity_bytes=4096,
            handle_type=None,
        ),
        events.KvPoolAllocation(
            pool="MHAKVPool",
            label=None,
            layout="mha",
            allocation_state="va_upper_bound",
            dtype="torch.bfloat16",
            num_tokens=65536,
            k_bytes=GIB,
            v_bytes=GIB,
            committed_bytes=4096,
        ),
        events.KvArenaCommit(
            arena_id=arena,
            offset_bytes=0,
            nbytes=GIB,
            requested_nbytes=GIB,
            committed_bytes=GIB,
            measured_committed_bytes=GIB,
            measurement_source="smaps_rss",
            duration_us=1200.0,
        ),
        events.KvPoolPostCaptureSized(
            pool="MHAKVPool", max_total_num_tokens=32768, free_bytes=3 * GIB, budget_bytes=GIB, committed_bytes=GIB
        ),
        events.KvPoolAllocation(
            pool="MHAKVPool",
            label=None,
            layout="mha",
            allocation_state="allocated",
            dtype="torch.bfloat16",
            num_tokens=32768,
            k_bytes=GIB // 2,
            v_bytes=GIB // 2,
            committed_bytes=GIB,
        ),
        events.KvPoolSwaSummary(allocation_state="va_upper_bound", total_bytes=GIB, swa_tokens=4096, full_tokens=8192),
        events.KvHostPoolAllocation(label="kv", num_tokens=131072, host_bytes=4_000_000_000),
        events.KvMemoryPoolEnd(avail_bytes=40 * GIB),
        events.MambaPoolAllocation(
            label=None, max_mamba_cache_size=256, conv_state_bytes=128 * MIB, ssm_state_bytes=512 * MIB
        ),
        events.KvArenaError(
            arena_id=arena,
            operation="commit",
            offset_bytes=0,
            nbytes=64 * GIB,
            error="commit past the reservation",
            committed_bytes=GIB,
        ),
        events.KvArenaDecommit(
            arena_id=arena,
            offset_bytes=0,
            nbytes=GIB,
            requested_nbytes=GIB,
            committed_bytes=0,
            measured_committed_bytes=0,
            measurement_source="smaps_rss",
            duration_us=300.0,
        ),
        events.KvArenaClosed(arena_id=arena, released_bytes=0),
    ]


def run_demo(output: Output, stream: IO[str]) -> int:
    """Emit the tour on ``stream`` with validation that raises; return how many events were emitted."""
    configure(output=output, validation="raise", stream=stream)
    bind_ranks(tp=0)
    with capture_events() as captured:
        for event in catalog_tour():
            emit(event, level="error" if isinstance(event, events.KvArenaError) else "info")
    return len(captured)
