"""KV pools on the host backend: shapes, lifecycles and events checked against the kernel's Rss."""

from __future__ import annotations

import ctypes
import resource
from typing import Any

import pytest
import torch
from memory_helpers import gpu_or_skip, kernel_rss, last, validated_events

from kvlog.memory import (
    ArenaError,
    HostKVPool,
    KVShape,
    MHAKVPool,
    MLAKVPool,
    PinningError,
    PoolSizingError,
    PoolStateError,
    SWAKVPool,
    VmmArena,
)
from kvlog.memory.host_backend import PAGE_SIZE

MIB = 1 << 20
MADV_DONTNEED = 4
SHAPE = KVShape(layers=3, heads=4, head_dim=64, dtype=torch.bfloat16, page_size=16, v_head_dim=32)
SWA_SHAPE = KVShape(layers=2, heads=4, head_dim=64, dtype=torch.bfloat16, page_size=16)


def rss(arena: VmmArena) -> int:
    return kernel_rss(arena.base, arena.base + arena.reserved_va_bytes)


def named(captured: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [event for event in captured if event["event"] == name]


def test_eager_mha_pool_commits_its_shaped_buffers_as_views_into_its_arena() -> None:
    with validated_events() as captured, MHAKVPool.allocate(SHAPE, num_tokens=1000 * 16) as pool:
        rows = 1000 * 16 + 16
        assert [tuple(k.shape) for k in pool.k_buffer] == [(rows, 4, 64)] * 3
        assert [tuple(v.shape) for v in pool.v_buffer] == [(rows, 4, 32)] * 3
        arena = pool.arena
        assert all(arena.base <= b.data_ptr() < arena.base + arena.reserved_va_bytes for b in pool.buffers)
        pool.v_buffer[2][-1].fill_(1.5)  # the last row of the last buffer is backed: no fault
        offset = pool.v_buffer[2].data_ptr() - arena.base
        alias = arena.tensor(offset, (rows, 4, 32), torch.bfloat16)
        assert alias[-1, 3, 31].item() == 1.5
        del alias
        event = last(captured, "kv_pool.allocation")
        assert event["allocation_state"] == "allocated" and event["layout"] == "mha"
        assert (event["num_tokens"], event["dtype"], event["arena_ids"]) == (16000, "torch.bfloat16", [arena.arena_id])
        assert event["k_bytes"] == 3 * rows * 4 * 64 * 2 and event["v_bytes"] == 3 * rows * 4 * 32 * 2
        assert event["committed_bytes"] == pool.committed_bytes == pool.cost(16000) == rss(arena)
        assert pool.committed_bytes - (event["k_bytes"] + event["v_bytes"]) < 6 * PAGE_SIZE


def test_eager_pool_from_a_byte_budget_fits_the_budget_exactly() -> None:
    budget = 3 * MIB + 12345
    with validated_events() as captured, MHAKVPool.allocate(SHAPE, budget_bytes=budget) as pool:
        assert pool.num_tokens % 16 == 0
        assert pool.cost(pool.num_tokens) <= budget < pool.cost(pool.num_tokens + 16)
        assert last(captured, "kv_pool.allocation")["committed_bytes"] == pool.committed_bytes == rss(pool.arena)


def test_post_capture_lifecycle_backs_one_page_then_exactly_the_budget_at_the_same_addresses() -> None:
    with validated_events() as captured, MHAKVPool.plan(SHAPE, upper_bound_tokens=65536 + 7) as pool:
        planned = last(captured, "kv_pool.allocation")
        assert planned["allocation_state"] == "va_upper_bound" and planned["num_tokens"] == 65536
        assert planned["k_bytes"] == 3 * (65536 + 16) * 4 * 64 * 2
        first_page = 3 * (max(16 * 4 * 64 * 2, PAGE_SIZE) + max(16 * 4 * 32 * 2, PAGE_SIZE))
        assert planned["committed_bytes"] == pool.cost(0) == rss(pool.arena) == first_page
        assert pool.arena.reserved_va_bytes >= planned["k_bytes"] + planned["v_bytes"]
        addresses = [buffer.data_ptr() for buffer in pool.buffers]
        for buffer in pool.buffers:
            buffer[:16].fill_(1)  # the padding page is backed during capture
        del buffer  # a view left in a loop variable would keep the pool from closing

        budget = 10 * MIB
        tokens = pool.finalize(budget_bytes=budget, free_bytes=20 * MIB)
        assert [buffer.data_ptr() for buffer in pool.buffers] == addresses
        assert pool.cost(tokens) <= budget < pool.cost(tokens + 16)
        assert [buffer.shape[0] for buffer in pool.buffers] == [tokens + 16] * 6
        for buffer in pool.buffers:
            buffer[-1].fill_(2)  # the last usable row is backed: no fault
        del buffer  # a view left in a loop variable would keep the pool from closing
        sized = last(captured, "kv_pool.post_capture_sized")
        assert sized == sized | {
            "pool": "MHAKVPool",
            "max_total_num_tokens": tokens,
            "free_bytes": 20 * MIB,
            "budget_bytes": budget,
            "committed_bytes": pool.committed_bytes,
        }
        allocated = last(captured, "kv_pool.allocation")
        assert allocated["allocation_state"] == "allocated" and allocated["num_tokens"] == tokens
        assert allocated["committed_bytes"] == pool.committed_bytes == rss(pool.arena) == pool.cost(tokens)
        assert int(pool.k_buffer[0][0].sum()) == 4 * 64  # what was written during capture is still there
        with pytest.raises(PoolStateError, match="finalize runs once"):
            pool.finalize(budget_bytes=budget)


def test_finalize_caps_at_the_upper_bound_and_derives_the_budget_from_free_memory() -> None:
    with validated_events() as captured, MHAKVPool.plan(SHAPE, upper_bound_tokens=4096) as pool:
        tokens = pool.finalize(free_bytes=1 << 40, headroom_bytes=MIB)
        assert tokens == 4096
        assert last(captured, "kv_pool.post_capture_sized")["budget_bytes"] == (1 << 40) - MIB + pool.cost(0)
        assert pool.committed_bytes == pool.cost(4096) == rss(pool.arena)


def test_finalize_measures_free_memory_when_not_told() -> None:
    with validated_events() as captured, MHAKVPool.plan(SHAPE, upper_bound_tokens=1024) as pool:
        pool.finalize()
        assert last(captured, "kv_pool.post_capture_sized")["free_bytes"] > 0


def test_a_budget_below_the_first_page_is_refused() -> None:
    with validated_events(), MHAKVPool.plan(SHAPE, upper_bound_tokens=1024) as pool:
        with pytest.raises(PoolSizingError, match="first page"):
            pool.finalize(budget_bytes=PAGE_SIZE)
        assert pool.state == "va_upper_bound" and pool.committed_bytes == pool.cost(0) == rss(pool.arena)


def test_mla_pool_has_one_buffer_per_layer() -> None:
    shape = KVShape(layers=4, heads=1, head_dim=576, dtype=torch.bfloat16, page_size=1)
    with validated_events() as captured, MLAKVPool.plan(shape, upper_bound_tokens=8192) as pool:
        assert [tuple(kv.shape) for kv in pool.kv_buffer] == [(8193, 1, 576)] * 4
        tokens = pool.finalize(budget_bytes=4 * MIB)
        event = last(captured, "kv_pool.allocation")
        assert event["layout"] == "mla" and "k_bytes" not in event
        assert event["kv_bytes"] == 4 * (tokens + 1) * 576 * 2
        assert event["committed_bytes"] == rss(pool.arena)
    with pytest.raises(ValueError, match="no separate V"):
        MLAKVPool.allocate(SHAPE, num_tokens=16)


def test_swa_pool_totals_both_sub_pools_once() -> None:
    with (
        validated_events() as captured,
        SWAKVPool.plan(SHAPE, SWA_SHAPE, full_upper_bound_tokens=32768, swa_upper_bound_tokens=4096) as pool,
    ):
        assert pool.full.arena is not pool.swa.arena
        tokens = pool.finalize(budget_bytes=8 * MIB, free_bytes=9 * MIB)
        assert pool.swa.num_tokens == pool.swa_tokens_for(tokens) == tokens // 8 // 16 * 16
        assert pool.cost(tokens) <= 8 * MIB < pool.cost(tokens + 16)
        after = captured[[e["event"] for e in captured].index("kv_pool.post_capture_sized") :]
        allocations = named(after, "kv_pool.allocation")
        assert [e["label"] for e in allocations] == ["SWA", "Full"]
        summary = last(captured, "kv_pool.swa_summary")
        assert summary["allocation_state"] == "allocated"
        assert summary["total_bytes"] == sum(e["k_bytes"] + e["v_bytes"] for e in allocations)
        assert (summary["full_tokens"], summary["swa_tokens"]) == (tokens, pool.swa.num_tokens)
        assert summary["committed_bytes"] == sum(e["committed_bytes"] for e in allocations)
        assert summary["committed_bytes"] == rss(pool.full.arena) + rss(pool.swa.arena) == pool.cost(tokens)
        planned = named(captured, "kv_pool.swa_summary")[0]
        assert planned["allocation_state"] == "va_upper_bound" and planned["full_tokens"] == 32768


def test_swa_finalize_is_all_or_nothing_across_its_two_arenas() -> None:
    """A real ENOMEM (RLIMIT_DATA) on the Full sub-pool after the SWA sub-pool grew undoes that growth."""
    with (
        validated_events() as captured,
        SWAKVPool.plan(SHAPE, SWA_SHAPE, full_upper_bound_tokens=262144, swa_upper_bound_tokens=16384) as pool,
    ):
        addresses = [b.data_ptr() for b in (*pool.full.buffers, *pool.swa.buffers)]
        before = pool.committed_bytes
        soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
        resource.setrlimit(resource.RLIMIT_DATA, (vm_data() + 64 * MIB, hard))  # room for SWA (32 MiB), not Full
        try:
            with pytest.raises(ArenaError, match="ENOMEM"):
                pool.finalize(budget_bytes=1 << 30)  # SWA gets its 32 MiB, Full ~190 MiB: past the limit
        finally:
            resource.setrlimit(resource.RLIMIT_DATA, (soft, hard))
        assert pool.committed_bytes == before == rss(pool.full.arena) + rss(pool.swa.arena)
        assert pool.swa.state == pool.full.state == "va_upper_bound"
        swa = pool.swa.arena
        grown = [e for e in named(captured, "kv_arena.commit") if e["arena_id"] == swa.arena_id][-1]
        (undone,) = named(captured, "kv_arena.decommit")  # the SWA growth, undone in one batch
        kept = swa.committed_bytes
        assert {k: v for k, v in undone.items() if k not in ("timestamp", "pid", "duration_us")} == {
            "event": "kv_arena.decommit",
            "schema_version": 2,
            "level": "info",
            "arena_id": swa.arena_id,
            "range_count": len(pool.swa.specs),
            "offset_bytes": swa.committed_runs[0][1],  # the first buffer's growth, after its first page
            "nbytes": grown["committed_bytes"] - kept,
            "requested_nbytes": grown["committed_bytes"] - kept,
            "committed_bytes": kept,
            "measured_committed_bytes": rss(swa),
            "measurement_source": "smaps_rss",
        }
        assert [b.data_ptr() for b in (*pool.full.buffers, *pool.swa.buffers)] == addresses
        assert named(captured, "kv_pool.post_capture_sized") == []
        tokens = pool.finalize(budget_bytes=64 * MIB)
        assert pool.committed_bytes == pool.cost(tokens) == rss(pool.full.arena) + rss(pool.swa.arena)


def vm_data() -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmData:"))


def test_eager_swa_pool() -> None:
    with validated_events() as captured:
        pool = SWAKVPool.allocate(SHAPE, SWA_SHAPE, full_tokens=4096, swa_tokens=512)
        summary = last(captured, "kv_pool.swa_summary")
        assert (summary["allocation_state"], summary["full_tokens"], summary["swa_tokens"]) == ("allocated", 4096, 512)
        assert summary["committed_bytes"] == rss(pool.full.arena) + rss(pool.swa.arena)
        pool.close()


def test_host_pool_is_sized_in_decimal_gb_like_sglang() -> None:
    per_token = 3 * 4 * (64 + 32) * 2
    with validated_events() as captured, HostKVPool(SHAPE, size_gb=0.05) as pool:
        assert pool.num_tokens == 50_000_000 // per_token // 16 * 16
        assert pool.shape.page_size == 16 and pool.k_buffer[0].shape[0] == pool.num_tokens  # no padding page
        event = last(captured, "kv_host_pool.allocation")
        assert (event["label"], event["num_tokens"]) == ("kv", pool.num_tokens)
        assert event["host_bytes"] == pool.committed_bytes == rss(pool.arena)
        assert named(captured, "kv_pool.allocation") == []
    with (
        validated_events(),
        MHAKVPool.allocate(SHAPE, num_tokens=1024) as device_pool,
        HostKVPool(SHAPE, device_pool=device_pool, ratio=2.5, label="full") as host,
    ):
        assert host.num_tokens == 2560
    with pytest.raises(ValueError, match="exactly one"):
        HostKVPool(SHAPE, num_tokens=16, size_gb=1.0)


def test_sleep_frees_the_pool_and_wake_restores_it_at_the_same_addresses() -> None:
    with validated_events() as captured, MHAKVPool.allocate(SHAPE, num_tokens=4096) as pool:
        held = pool.committed_bytes
        addresses = [buffer.data_ptr() for buffer in pool.buffers]
        pool.k_buffer[0].fill_(3)
        runs = pool.arena.committed_runs
        pool.sleep()
        slept = last(captured, "kv_pool.sleep")
        assert slept["freed_bytes"] == held == slept["measured_freed_bytes"]
        (decommit,) = named(captured, "kv_arena.decommit")  # every buffer's run in one event
        assert {k: v for k, v in decommit.items() if k not in ("timestamp", "pid", "duration_us")} == {
            "event": "kv_arena.decommit",
            "schema_version": 2,
            "level": "info",
            "arena_id": pool.arena.arena_id,
            "range_count": len(runs),
            "offset_bytes": runs[0][0],
            "nbytes": held,
            "requested_nbytes": held,
            "committed_bytes": 0,
            "measured_committed_bytes": 0,
            "measurement_source": "smaps_rss",
        }
        assert decommit["duration_us"] == slept["duration_us"]
        assert (slept["discrepancy_bytes"], slept["level"], slept["label"]) == (0, "info", None)
        assert rss(pool.arena) == 0 == pool.committed_bytes
        pool.wake()
        woken = last(captured, "kv_pool.wake")
        assert woken["restored_bytes"] == held == woken["measured_restored_bytes"] == rss(pool.arena)
        commit = last(captured, "kv_arena.commit")
        assert (commit["range_count"], commit["offset_bytes"], commit["nbytes"]) == (len(runs), runs[0][0], held)
        assert commit["committed_bytes"] == held == commit["measured_committed_bytes"]
        assert pool.arena.committed_runs == runs
        assert woken["discrepancy_bytes"] == 0 and woken["arena_ids"] == [pool.arena.arena_id]
        assert [buffer.data_ptr() for buffer in pool.buffers] == addresses
        assert int(pool.k_buffer[0].abs().sum()) == 0


def test_swa_pool_sleeps_both_sub_pools() -> None:
    with validated_events() as captured:
        pool = SWAKVPool.allocate(SHAPE, SWA_SHAPE, full_tokens=1024, swa_tokens=256)
        pool.sleep()
        assert [e["label"] for e in named(captured, "kv_pool.sleep")] == ["SWA", "Full"]
        assert rss(pool.full.arena) + rss(pool.swa.arena) == 0
        pool.wake()
        assert rss(pool.full.arena) + rss(pool.swa.arena) == pool.committed_bytes == pool.cost(1024)
        pool.close()


def test_closing_a_pool_whose_buffer_is_still_held_is_refused() -> None:
    with validated_events():
        pool = MHAKVPool.allocate(SHAPE, num_tokens=256)
        kept = pool.k_buffer[1]
        with pytest.raises(ArenaError, match="live tensor view"):
            pool.close()
        del kept
        pool.close()
        with pytest.raises(PoolStateError, match="closed"):
            pool.sleep()


def test_sleep_flags_memory_given_back_behind_the_books() -> None:
    """Pages dropped with MADV_DONTNEED outside kvlog: the kernel and the books disagree, and sleep says so."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    with validated_events() as captured, MHAKVPool.allocate(SHAPE, num_tokens=8192) as pool:
        held = pool.committed_bytes
        assert libc.madvise(pool.arena.base, MIB, MADV_DONTNEED) == 0
        assert rss(pool.arena) == held - MIB
        pool.sleep()
        slept = last(captured, "kv_pool.sleep")
        assert (slept["freed_bytes"], slept["measured_freed_bytes"]) == (held, held - MIB)
        assert (slept["discrepancy_bytes"], slept["level"]) == (-MIB, "warning")
        pool.wake()
        assert last(captured, "kv_pool.wake")["discrepancy_bytes"] == 0


def test_a_pool_that_cannot_be_backed_gives_its_reservation_back() -> None:
    with validated_events() as captured:
        soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
        resource.setrlimit(resource.RLIMIT_DATA, (vm_data() + 16 * MIB, hard))
        try:
            with pytest.raises(ArenaError, match="ENOMEM"):
                MHAKVPool.allocate(SHAPE, num_tokens=65536)  # ~144 MiB
        finally:
            resource.setrlimit(resource.RLIMIT_DATA, (soft, hard))
        ready, closed = last(captured, "kv_arena.ready"), last(captured, "kv_arena.closed")
        assert ready["arena_id"] == closed["arena_id"] and closed["released_bytes"] == 0
        assert named(captured, "kv_pool.allocation") == []


def test_host_pool_is_pinned_only_where_there_is_a_gpu() -> None:
    with validated_events(), HostKVPool(SHAPE, num_tokens=1024) as pool:
        assert pool.pinned == torch.cuda.is_available()
    if not torch.cuda.is_available():
        with validated_events(), pytest.raises(PinningError, match="needs a CUDA device"):
            HostKVPool(SHAPE, num_tokens=1024, pin=True)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU visible to torch")
def test_pinned_host_pool_copies_to_and_from_the_gpu_asynchronously_across_sleep_and_wake() -> None:
    with validated_events(), HostKVPool(SHAPE, num_tokens=4096) as pool:
        assert pool.pinned and all(buffer.is_pinned() for buffer in pool.buffers)
        source = pool.k_buffer[0]
        source.copy_(torch.arange(source.numel()).view_as(source))
        on_device = source.to("cuda", non_blocking=True)
        pool.k_buffer[1].copy_(on_device, non_blocking=True)
        torch.cuda.synchronize()
        assert torch.equal(pool.k_buffer[1], source)
        pool.sleep()
        assert not pool.pinned
        pool.wake()
        assert pool.pinned and pool.k_buffer[0].is_pinned()
        assert rss(pool.arena) == pool.committed_bytes
        del source, on_device


@pytest.mark.parametrize("backend", ["host", pytest.param("cuda", marks=pytest.mark.cuda)])
def test_a_32_layer_pool_emits_one_commit_event_per_batch_with_the_totals_after_it(backend: str) -> None:
    """Issue 9, item 29: plan and finalize are one batch each, not one event per buffer (193 on an H200).

    Each event's committed_bytes and measurement are what the arena holds right after that batch,
    and its range count and bytes say what the batch did.
    """
    if backend == "cuda":
        gpu_or_skip()
    shape = KVShape(layers=32, heads=8, head_dim=128, dtype=torch.bfloat16, page_size=16)
    with validated_events() as captured, MHAKVPool.plan(shape, 4096, backend=backend) as pool:  # type: ignore[arg-type]
        after_plan = pool.committed_bytes
        tokens = pool.finalize(budget_bytes=pool.cost(2048), free_bytes=1 << 40)
        after_finalize = pool.committed_bytes
        measured = pool.arena.measure()
    commits = named(captured, "kv_arena.commit")
    assert [(e["range_count"], e["committed_bytes"]) for e in commits] == [(64, after_plan), (64, after_finalize)]
    assert [e["measured_committed_bytes"] for e in commits] == [after_plan, after_finalize]
    assert measured is not None and measured.nbytes == after_finalize
    assert commits[0]["nbytes"] == after_plan and commits[1]["nbytes"] == after_finalize  # both batches start at 0
    assert commits[1]["requested_nbytes"] == 64 * (tokens + 16) * 8 * 128 * 2
    assert all(e["offset_bytes"] == 0 for e in commits)
